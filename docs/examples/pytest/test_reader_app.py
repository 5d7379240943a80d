"""Testing an app against revocation, faults and host changes with the
ScopeFS pytest plugin (clients/python/scopefs_testing.py):

    $ PYTHONPATH=clients/python python3 -m pytest -q -p scopefs_testing docs/examples/pytest

Each test gets a fresh mount in a temporary directory with the marker's
app, files and grants; the helpers act as the user would while the app
runs.
"""

import sys
from pathlib import Path

import pytest

APP = [sys.executable, str(Path(__file__).with_name("reader_app.py"))]
WORLD = pytest.mark.scopefs(app="com.example.reader", files={"docs/report.txt": "numbers\n"}, grants=["local:docs"])


def wait_for(app, line: str) -> None:
    """Reads the app's output until `line` (the app prints one line per change)."""
    seen = []
    while True:
        got = app.stdout.readline()
        if not got:
            pytest.fail(f"the app ended before printing {line!r}; it printed {seen}: {app.stderr.read()}")
        seen.append(got.strip())
        if got.strip() == line:
            return


@WORLD
def test_a_revoke_ends_the_app_cleanly_and_a_restore_brings_access_back(scopefs_mount):
    app = scopefs_mount.start(APP + [scopefs_mount.path("local:docs/report.txt")])
    wait_for(app, "reading docs/report.txt")
    scopefs_mount.revoke("local:docs")
    wait_for(app, "lost access")
    assert app.wait(timeout=20) == 0
    scopefs_mount.restore("local:docs")
    again = scopefs_mount.start(APP + [scopefs_mount.path("local:docs/report.txt")])
    wait_for(again, "reading docs/report.txt")
    again.kill()  # the world also stops what it started when the test ends


@WORLD
def test_failed_opens_are_retried(scopefs_mount):
    app = scopefs_mount.start(APP + [scopefs_mount.path("local:docs/report.txt")])
    wait_for(app, "reading docs/report.txt")
    scopefs_mount.inject("open", errno="EIO", path="Providers/local/docs/*")
    wait_for(app, "read failed: EIO")
    scopefs_mount.clear_faults()
    scopefs_mount.revoke("local:docs")
    wait_for(app, "lost access")
    assert app.wait(timeout=20) == 0


@WORLD
def test_the_app_follows_its_document_when_it_moves(scopefs_mount):
    app = scopefs_mount.start(APP + [scopefs_mount.path("local:docs/report.txt")])
    wait_for(app, "reading docs/report.txt")
    scopefs_mount.rename_on_host("local:docs/report.txt", "local:docs/2026/report.txt")
    wait_for(app, "reading docs/2026/report.txt")
    scopefs_mount.revoke("local:docs")
    wait_for(app, "lost access")
    assert app.wait(timeout=20) == 0
