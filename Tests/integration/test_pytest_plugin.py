"""The pytest plugin of the Python client (issue 18,
clients/python/scopefs_testing.py): its runnable example in
docs/examples/pytest passes when run with `pytest -p scopefs_testing` as
its own process; the same fixtures fail a test of a buggy app (a plugin
that cannot fail proves nothing); and the helpers are the owner's: an app
process that tries them gets 77 (SPEC S5)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from scopefs_harness import REPO_ROOT, describe, mounts_under

PYTHON_CLIENT = REPO_ROOT / "clients" / "python"
EXAMPLE = REPO_ROOT / "docs" / "examples" / "pytest"


def run_pytest(env, *args, timeout=180, pythonpath=PYTHON_CLIENT, by_name=True) -> subprocess.CompletedProcess:
    """pytest in its own process, with the plugin loaded by name (unless
    not `by_name`: then only an entry point can load it), its temporary
    worlds under the test's root (so leftovers are found)."""
    run_env = dict(env.base_env, PYTHONPATH=str(pythonpath), SCOPEFS_BIN=str(env.bin), TMPDIR=str(env.root))
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *(["-p", "scopefs_testing"] if by_name else []),
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


WAITS_TEST = """
import sys
import time

import pytest
from scopefs_testing import AppProcess, LineNotPrinted, ScopeFSTimeout

PRINTER = [sys.executable, "-c", "import sys, time; print('one', flush=True); time.sleep(0.3); "
           "print('  two  ', flush=True); print('three', flush=True); sys.stdin.read()"]


@pytest.mark.scopefs(app="com.example.waits")
def test_wait_for_line(scopefs_mount):
    app = scopefs_mount.start(PRINTER)
    assert isinstance(app, AppProcess)
    app.wait_for_line("two", timeout=20)  # white space around the line ignored
    assert app.stdout.readline() == "three\\n"  # what follows the line is left to read
    started = time.monotonic()
    with pytest.raises(LineNotPrinted) as raised:
        app.wait_for_line("four", timeout=0.5)
    assert 0.45 < time.monotonic() - started < 5
    assert raised.value.exit_status is None and "still running" in str(raised.value)
    app.stdin.close()
    assert app.wait(timeout=20) == 0


@pytest.mark.scopefs(app="com.example.waits")
def test_wait_for_line_of_an_app_that_ends_first(scopefs_mount):
    app = scopefs_mount.start([sys.executable, "-c", "import sys; print('bye'); print('oops', file=sys.stderr); sys.exit(3)"])
    started = time.monotonic()
    with pytest.raises(LineNotPrinted) as raised:
        app.wait_for_line("never", timeout=60)
    assert time.monotonic() - started < 15  # the end, not the timeout
    assert raised.value.exit_status == 3, str(raised.value)
    assert raised.value.output == "bye" and "oops" in raised.value.error_output


@pytest.mark.scopefs(app="com.example.waits", files={"docs/a.txt": "a"}, grants=["local:docs"])
def test_wait_for_events(scopefs_mount):
    scopefs_mount.revoke("local:docs")
    events = scopefs_mount.wait_for_events("revoke", timeout=20)
    assert [e["kind"] for e in events] == ["revoke"]
    started = time.monotonic()
    with pytest.raises(ScopeFSTimeout) as raised:
        scopefs_mount.wait_for_events("revoke", count=2, timeout=0.5)
    assert 0.45 < time.monotonic() - started < 10
    assert "2 revoke event(s) of com.example.waits" in str(raised.value)
"""


def test_the_plugin_waits_for_lines_and_events_with_a_timeout(env):
    """Issue 31, point 6: `AppProcess.wait_for_line` and
    `wait_for_events` (the Swift library's `waitForLine` and
    `waitForEvents`): a line is found with white space ignored and what
    follows stays readable; a line never printed fails at the timeout
    while the app runs, and at once when it ends (with its status, output
    and errors); events counted by occurrences, a timeout names what was
    missing. Seen failing on the old main: the plugin had neither."""
    test = env.root / "test_waits.py"
    test.write_text(WAITS_TEST)
    p = run_pytest(env, test)
    assert p.returncode == 0, describe(p)
    assert "3 passed" in p.stdout, p.stdout
    assert mounts_under(env.root) == []


AUTOLOADED_TEST = """
import pytest


@pytest.mark.scopefs(app="com.example.loaded")
def test_the_fixture_is_there(scopefs_mount):
    assert scopefs_mount.mounted
"""


def test_an_installed_plugin_loads_without_p(env):
    """Issue 31, point 6: installed with its metadata (what `make install`,
    the package and `pip install clients/python` write: the pytest11 entry
    point of clients/python/pyproject.toml), the plugin loads by itself;
    naming it with `-p scopefs_testing` as well loads it once. Seen failing
    on the old main: without `-p`, "fixture 'scopefs_mount' not found"."""
    site = env.root / "site-packages"
    site.mkdir()
    for module in ("scopefs.py", "scopefs_testing.py"):
        shutil.copy(PYTHON_CLIENT / module, site / module)
    made = subprocess.run(
        [sys.executable, REPO_ROOT / "packaging" / "python-dist-info.py", PYTHON_CLIENT / "pyproject.toml", site],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, describe(made)
    test = env.root / "test_loaded.py"
    test.write_text(AUTOLOADED_TEST)
    for by_name in (False, True):
        p = run_pytest(env, test, pythonpath=site, by_name=by_name)
        assert p.returncode == 0 and "1 passed" in p.stdout, describe(p)
    assert mounts_under(env.root) == []


ENVIRONMENT_TEST = """
import sys

import pytest

SHOW = ["/bin/sh", "-c", 'echo "${READER_MODE:-None}"']  # the system's shell: the sandbox shows it


@pytest.mark.scopefs(app="com.example.env")
@pytest.mark.parametrize("sandbox", [True, False])
def test_the_environment_reaches_the_app(scopefs_mount, sandbox):
    p = scopefs_mount.run(SHOW, sandbox=sandbox, env={"READER_MODE": "caches-descriptor"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[0] == "caches-descriptor", (p.stdout, p.stderr)
    app = scopefs_mount.start(SHOW, sandbox=sandbox, env={"READER_MODE": "started"})
    out, err = app.communicate(timeout=30)
    assert app.returncode == 0, err
    assert out.split()[0] == "started", (out, err)
    assert scopefs_mount.run(SHOW, sandbox=sandbox).stdout.split()[0] == "None"


def test_a_bad_name_is_refused(scopefs_mount):
    with pytest.raises(ValueError):
        scopefs_mount.run(SHOW, sandbox=True, env={"A=B": "x"})
"""


def test_the_plugin_passes_an_environment_to_the_app(env):
    """Issue 48, finding 2: `run(cmd, env=...)` and `start(cmd, env=...)`
    give the app those variables, in the sandbox too (which starts the
    app with a cleared environment: they go through `scopefs run --env`),
    and without them the app does not see them. Seen failing before: the
    two took no environment at all (TypeError)."""
    test = env.root / "test_environment.py"
    test.write_text(ENVIRONMENT_TEST)
    p = run_pytest(env, test)
    assert p.returncode == 0, describe(p)
    assert "3 passed" in p.stdout, p.stdout
    assert mounts_under(env.root) == []


STDERR_TEST = """
import pytest


@pytest.mark.scopefs(app="com.example.noisy")
def test_an_app_that_fails_quietly_for_the_test(scopefs_mount):
    app = scopefs_mount.start(["python3", "-c", "import sys; print('disk on', 'fire', file=sys.stderr); sys.exit(3)"])
    assert app.wait(timeout=30) == 0
"""


def test_a_failed_tests_report_shows_the_apps_standard_error(env):
    """Issue 50.4: a test that fails on the app's exit status shows what the
    app wrote on its standard error, in a section of the report per app
    process (the plugin's report said nothing of why the app failed)."""
    test = env.root / "test_noisy_app.py"
    test.write_text(STDERR_TEST)
    p = run_pytest(env, test)
    assert p.returncode == 1 and "1 failed" in p.stdout, describe(p)
    assert "scopefs app " in p.stdout and "(exit status 3) stderr" in p.stdout, p.stdout
    assert "disk on fire" in p.stdout, p.stdout
    assert mounts_under(env.root) == []
