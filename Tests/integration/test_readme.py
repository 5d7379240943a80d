"""The README's session runs verbatim (issue 19: "the first hour works"):
its code block, in a fresh home folder, with `scopefs` on PATH, as a new
user would paste it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from scopefs_harness import describe, mount_count, scopefs_bin

README = Path(__file__).resolve().parents[2] / "README.md"


def session_block() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## A session") :]
    return re.search(r"```\n(.*?)```", section, re.S).group(1)


def run_as_a_new_user(tmp_path: Path, script: str, cwd: Path | None = None, timeout: float = 180):
    """Runs `script` with bash in a fresh home folder, with `scopefs` on
    PATH, as a new user pastes a README block; the mount goes after."""
    home = tmp_path / "home"
    home.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scopefs").symlink_to(scopefs_bin())
    path = tmp_path / "session.sh"
    path.write_text("set -e\n" + script)
    env = {k: v for k, v in os.environ.items() if k not in ("SCOPEFS_STATE", "XDG_STATE_HOME")}
    env.update(HOME=str(home), PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}")
    try:
        p = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    finally:
        if mount_count(home / "scopefs"):
            subprocess.run(["fusermount3", "-u", str(home / "scopefs")], capture_output=True)
    assert not mount_count(home / "scopefs"), "the block left its mount behind"
    return p


def test_readme_session_runs_verbatim(tmp_path):
    p = run_as_a_new_user(tmp_path, session_block())
    assert p.returncode == 0, describe(p)
    out = p.stdout
    assert "Container" in out and "Providers" in out, describe(p)
    assert "no scope yet: EPERM" in out, describe(p)
    assert out.count("It was a dark and stormy night.") == 1, describe(p)
    assert "exit 77: only you change grants" in out, describe(p)
    assert "chapter1.txt ->" in out and "chapter1 2.txt" not in out, describe(p)


def revocation_block() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("Does your app survive losing a document") :]
    return re.search(r"```\n(.*?)```", section, re.S).group(1)


def test_readme_revocation_testing_block_runs_verbatim_after_the_session(tmp_path):
    """Issue 31, point 1: the README's revocation-testing block, pasted
    after its session from the repository's folder, gives the printed
    result in the default mount (strict scopes) and the default sandbox:
    the buggy app fails the scenario (exit status 1), the fixed one passes.
    Seen failing on the old main: `local:docs` did not exist (66)."""
    script = session_block() + "echo '=== revocation block'\n" + revocation_block()
    p = run_as_a_new_user(tmp_path, script, cwd=README.parent, timeout=240)
    assert p.returncode == 0, describe(p)
    out = p.stdout[p.stdout.index("=== revocation block") :]
    assert "FAIL exit status is 0: it was 1" in out and "exit 1" in out, describe(p)
    # The run's events are readable: fields apart, no literal `\t` (point 5).
    assert "\\t" not in out and "  revoke  com.example.editor" in out, describe(p)
    fixed = out[out.index("exit 1") :]
    assert "PASS" in fixed and "FAIL" not in fixed, describe(p)
