"""Issue 31, points 2 and 4: the default sandbox can hold the developer's
program (`--expose PATH[:rw]`, `--env`, `--cwd` on `run`, `test` and
`chaos`), and a command the sandbox cannot run exits 127 or 126, a missing
`--expose` path 66, each with a ScopeFS message instead of bubblewrap's
`execvp` text and exit 1. Default mount (strict scopes), default sandbox.

Seen failing on the old main: `--env` and `--cwd` were unknown options
(64), a missing command exited 1 with "bwrap: execvp ...". SPEC S5; exit
codes as docs/CLI.md lists them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from doc_scope_helpers import mount as mount_with_scopes
from scopefs_harness import ALPHA, RUNNERS, describe, run_bounded

APP_SCRIPT = """\
import os, sys
sys.path.insert(0, os.environ["APP_LIB"])
import helper
print(helper.greeting(), os.environ.get("GREETING"), os.environ.get("LANG_PASSED"), os.getcwd())
with open(os.path.join(os.environ["OUT"], "result.txt"), "w") as f:
    f.write("written by the app")
"""


def developer_folder(env) -> Path:
    """A developer's project outside the mount: a script, a module beside
    it, and an output folder the app may write."""
    project = env.root / "project"
    (project / "lib").mkdir(parents=True)
    (project / "app.py").write_text(APP_SCRIPT)
    (project / "lib" / "helper.py").write_text("def greeting():\n    return 'hello from lib'\n")
    out = env.root / "out"
    out.mkdir()
    os.chmod(out, 0o777)  # the app account writes here when the owner is root
    return project


def run(env, *args, cwd=None, extra_env=None) -> subprocess.CompletedProcess:
    """`scopefs run --app ALPHA ARGS` from the folder `cwd`, as a developer
    types it there."""
    variables = dict(env.base_env, **(extra_env or {}))
    argv = [str(a) for a in env.cli_argv("run", "--app", ALPHA, *args)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=variables, cwd=cwd)


def test_the_sandbox_holds_the_developers_program(env):
    """A relative script path from the developer's folder (--cwd .), its
    module (PYTHONPATH-style, through --env), a variable passed through
    (--env NAME) and one set (--env NAME=VALUE), and an output folder the
    app writes (--expose PATH:rw) all work in the default sandbox."""
    project = developer_folder(env)
    out = env.root / "out"
    mount_with_scopes(env)
    p = run(
        env,
        "--expose",
        str(project),
        "--expose",
        f"{out}:rw",
        "--cwd",
        ".",
        "--env",
        f"APP_LIB={project / 'lib'}",
        "--env",
        "GREETING=hi",
        "--env",
        "LANG_PASSED",
        "--env",
        f"OUT={out}",
        "--",
        "python3",
        "app.py",
        cwd=project,
        extra_env={"LANG_PASSED": "passed-through"},
    )
    assert p.returncode == 0, describe(p)
    assert p.stdout.split() == ["hello", "from", "lib", "hi", "passed-through", str(project)], describe(p)
    assert (out / "result.txt").read_text() == "written by the app"


def test_an_exposed_path_is_read_only_unless_rw(env):
    project = developer_folder(env)
    mount_with_scopes(env)
    p = run(env, "--expose", str(project), "--", "sh", "-c", f"echo x > {project}/new.txt")
    assert p.returncode != 0 and not (project / "new.txt").exists(), describe(p)


@pytest.mark.sqlite_store(RUNNERS)
def test_sandbox_options_reach_scopefs_test(env, tmp_path):
    """`scopefs test` takes the same options and passes them to the run."""
    project = developer_folder(env)
    out = env.root / "out"
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"app: {ALPHA}\nexpect:\n  exit: 0\n")
    mount_with_scopes(env)
    argv = env.cli_argv(
        "test",
        scenario,
        "--expose",
        str(project),
        "--expose",
        f"{out}:rw",
        "--env",
        f"APP_LIB={project / 'lib'}",
        "--env",
        f"OUT={out}",
        "--cwd",
        str(project),
        "--",
        "python3",
        "app.py",
    )
    p = run_bounded(argv, 60, env.base_env, what="scopefs test")
    assert p.returncode == 0, describe(p)
    assert (out / "result.txt").read_text() == "written by the app"


def test_a_command_the_sandbox_cannot_run_exits_127_or_126_with_a_message(env):
    project = developer_folder(env)
    (project / "tool").write_text("#!/bin/sh\necho tool\n")
    os.chmod(project / "tool", 0o755)
    (project / "data.txt").write_text("not a program\n")
    mount_with_scopes(env)
    cases = [
        (["--", "no-such-command-here"], 127, "not found in the sandbox's PATH"),
        (["--", str(project / "tool")], 127, "the sandbox does not show it"),
        (["--expose", str(project), "--", str(project / "data.txt")], 126, "not an executable file"),
        (["--expose", str(project / "missing"), "--", "true"], 66, "no such file or folder"),
        (["--cwd", str(project), "--", "true"], 66, "the sandbox does not show it"),
    ]
    for args, code, words in cases:
        p = run(env, *args)
        assert p.returncode == code and words in p.stderr, (args, describe(p))
        assert "bwrap" not in p.stderr, describe(p)
    # And what it can run still runs: an exposed tool by its path.
    p = run(env, "--expose", str(project), "--", str(project / "tool"))
    assert p.returncode == 0 and p.stdout.strip() == "tool", describe(p)


def test_a_program_finds_its_libraries_through_its_run_path(env):
    """Issue 31, point 3: a program built against libraries outside the
    system directories (a Swift app and its toolchain's runtime under /opt;
    here a C program and its own library) runs in the sandbox when only the
    program is exposed: the folders of its run path (DT_RUNPATH) are shown
    read-only, read from the file without running it. Seen failing on the
    old main: `error while loading shared libraries` (127)."""
    build = env.root / "build"
    (build / "lib").mkdir(parents=True)
    (build / "bin").mkdir()
    (build / "greet.c").write_text('const char *greeting(void) { return "hello from a library"; }\n')
    (build / "main.c").write_text(
        "#include <stdio.h>\nconst char *greeting(void);\nint main(void) { puts(greeting()); return 0; }\n"
    )
    library, program = build / "lib" / "libgreet.so", build / "bin" / "greet"
    for argv in (
        ["cc", "-shared", "-fPIC", "-o", library, build / "greet.c"],
        ["cc", "-o", program, build / "main.c", f"-L{library.parent}", "-lgreet", f"-Wl,-rpath,{library.parent}"],
    ):
        compiled = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60)
        assert compiled.returncode == 0, describe(compiled)
    mount_with_scopes(env)
    p = run(env, "--expose", str(program.parent), "--", str(program))
    assert p.returncode == 0 and p.stdout.strip() == "hello from a library", describe(p)
