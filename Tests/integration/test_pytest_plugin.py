"""The pytest plugin of the Python client (issue 18,
clients/python/scopefs_testing.py): its runnable example in
docs/examples/pytest passes when run with `pytest -p scopefs_testing` as
its own process; the same fixtures fail a test of a buggy app (a plugin
that cannot fail proves nothing); and the helpers are the owner's: an app
process that tries them gets 77 (SPEC S5)."""

from __future__ import annotations

import subprocess
import sys

from scopefs_harness import REPO_ROOT, describe, mounts_under

PYTHON_CLIENT = REPO_ROOT / "clients" / "python"
EXAMPLE = REPO_ROOT / "docs" / "examples" / "pytest"


def run_pytest(env, *args, timeout=180) -> subprocess.CompletedProcess:
    """pytest in its own process, with the plugin loaded by name, its
    temporary worlds under the test's root (so leftovers are found)."""
    run_env = dict(env.base_env, PYTHONPATH=str(PYTHON_CLIENT), SCOPEFS_BIN=str(env.bin), TMPDIR=str(env.root))
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "scopefs_testing",
        "-p",
        "no:cacheprovider",
        "-q",
        "--rootdir",
        str(env.root),
        *map(str, args),
    ]
    return subprocess.run(argv, capture_output=True, text=True, env=run_env, timeout=timeout, cwd=env.root)


def test_the_plugin_example_passes(env):
    """docs/examples/pytest: revoke and restore, an injected EIO on open,
    a rename on the host, each against the example app, in a mount of its
    own; all pass and every mount is gone afterwards."""
    p = run_pytest(env, EXAMPLE)
    assert p.returncode == 0, describe(p)
    assert "3 passed" in p.stdout, p.stdout
    assert mounts_under(env.root) == []


BUGGY_APP_TEST = '''
import sys
import pytest

APP = [sys.executable, {app!r}, "Providers/local/docs/report.txt"]


@pytest.mark.scopefs(app="com.example.buggy", files={{"docs/report.txt": "x\\n"}}, grants=["local:docs"], scopes="lenient")
def test_survives_a_revoke(scopefs_mount):
    app = scopefs_mount.start(APP)
    assert app.stdout.readline().strip() == "READY"
    scopefs_mount.revoke("local:docs")
    out, err = app.communicate(timeout=20)
    assert app.returncode == 0, err[-300:]


def test_an_app_cannot_use_the_helpers(scopefs_mount):
    """The helpers run the CLI; inside an app process it refuses (77)."""
    code = "import subprocess, sys; print([subprocess.run(a.split()).returncode for a in sys.argv[1:3]])"
    base = [scopefs_mount.binary, "--state", str(scopefs_mount.state)]
    p = scopefs_mount.run([sys.executable, "-c", code,
                           " ".join(base + ["fault", "add", "--op", "open", "--errno", "EIO"]),
                           " ".join(base + ["revoke", scopefs_mount.app, "--all"])])
    assert p.stdout.strip() == "[77, 77]", (p.stdout, p.stderr)
'''


def test_the_plugin_fails_a_test_of_a_buggy_app(env):
    """The fixture and revoke() against the app that crashes on EPERM
    after a revoke (docs/examples/scenarios/cached_descriptor_buggy.py):
    that test fails, and says the app exited 1; the attack test in the
    same file passes (an app process gets 77 from `fault add` and
    `revoke`)."""
    app = REPO_ROOT / "docs" / "examples" / "scenarios" / "cached_descriptor_buggy.py"
    test = env.root / "test_buggy_app.py"
    test.write_text(BUGGY_APP_TEST.format(app=str(app)))
    p = run_pytest(env, test)
    assert p.returncode == 1, describe(p)
    assert "1 failed, 1 passed" in p.stdout, p.stdout
    assert "FAILED test_buggy_app.py::test_survives_a_revoke" in p.stdout, p.stdout
    assert "PermissionError" in p.stdout, p.stdout
    assert mounts_under(env.root) == []


EVENTS_TEST = """
import time
import pytest


@pytest.mark.scopefs(app="com.example.events", files={"docs/report.txt": "x\\\\n"}, grants=["local:docs"])
def test_events_of_a_revoke_and_a_restore(scopefs_mount):
    scopefs_mount.revoke("local:docs")
    scopefs_mount.restore("local:docs")
    deadline = time.monotonic() + 5
    while len(scopefs_mount.events("revoke,restore")) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    events = scopefs_mount.events("revoke,restore")
    assert [e["kind"] for e in events] == ["revoke", "restore"], events
    assert all(e["app"] == "com.example.events" for e in events), events
"""


def test_the_plugin_reads_the_event_stream(env):
    """`events()` returns every event of the app, one dict each:
    `scopefs events --json` prints one object per line (docs/CLI.md), so
    with two events there are two JSON documents to read, not one."""
    test = env.root / "test_events.py"
    test.write_text(EVENTS_TEST)
    p = run_pytest(env, test)
    assert p.returncode == 0, describe(p)
    assert "1 passed" in p.stdout, p.stdout
    assert mounts_under(env.root) == []
