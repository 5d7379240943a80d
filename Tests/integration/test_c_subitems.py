"""A folder's presenter in C hears its items appear, move and go (issue 31
item 7, SPEC S27c): the C client's notices carry the new kind `appeared`
and the paths in the app's view, with `old_path` for a move; the kinds are
the SCOPEFS_NOTICE_* constants of scopefs.h. Default mount (strict scopes),
default sandbox (the program's folder exposed).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from client_builds import c_build, compile_c_example  # noqa: F401  (fixture: the C library)
from doc_scope_helpers import mount
from scopefs_harness import ALPHA, LOCAL

HERE = Path(__file__).resolve().parent


@pytest.fixture
def folder_presenter(env, c_build) -> Path:  # noqa: F811
    """Built where the app account may run it (pytest's tmp_path is the owner's only)."""
    folder = env.root / "c-app"
    folder.mkdir()
    os.chmod(env.root, 0o755)
    os.chmod(folder, 0o755)
    return compile_c_example(HERE / "c_programs" / "folder_presenter.c", folder / "folder_presenter", c_build)


def test_c_folder_presenter_hears_subitems(env, folder_presenter):
    mount(env)
    env.cli("open", ALPHA, f"{LOCAL}:docs")
    docs = env.backing(LOCAL) / "docs"
    argv = env.run_argv(
        ALPHA,
        [folder_presenter, env.prov(ALPHA, LOCAL, "docs"), "4"],
        sandbox=True,
        extra=("--expose", str(folder_presenter.parent)),
    )
    app = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.base_env, text=True, start_new_session=True
    )
    try:
        assert app.stdout.readline() == "ready\n", app.stderr.read()
        time.sleep(0.5)  # scopefs_watch subscribes once called
        (docs / "c.txt").write_text("made on the host\n")
        time.sleep(0.3)
        os.rename(docs / "c.txt", docs / "d.txt")
        time.sleep(0.3)
        os.unlink(docs / "d.txt")
        (env.backing(LOCAL) / "photos" / "beside.jpg").write_bytes(b"not granted\n")
        out, err = app.communicate(timeout=30)
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
    assert app.returncode == 0, err
    lines = [line for line in out.splitlines() if not line.startswith("changed ")]
    path = lambda rel: env.prov(ALPHA, LOCAL, rel)  # noqa: E731
    assert lines == [
        f"appeared {path('docs/c.txt')}",
        f"moved {path('docs/d.txt')} {path('docs/c.txt')}",
        f"deleted {path('docs/d.txt')}",
        "done",
    ], out
