"""Testing an app against revocation, faults and host changes with the
ScopeFS pytest plugin (clients/python/scopefs_testing.py):

    $ PYTHONPATH=clients/python python3 -m pytest -q -p scopefs_testing docs/examples/pytest

(installed, by `make install`, the package or `pip install clients/python`,
the plugin loads without `-p`). Each test gets a fresh mount in a temporary
directory with the marker's app, files and grants; the helpers act as the
user would while the app runs, and `wait_for_line` reads the app's output
up to a line, failing after its timeout (20 s) with what the app printed.
"""

import sys
from pathlib import Path

import pytest

APP = [sys.executable, str(Path(__file__).with_name("reader_app.py"))]
WORLD = pytest.mark.scopefs(app="com.example.reader", files={"docs/report.txt": "numbers\n"}, grants=["local:docs"])


@WORLD
def test_a_revoke_ends_the_app_cleanly_and_a_restore_brings_access_back(scopefs_mount):
    app = scopefs_mount.start(APP + [scopefs_mount.path("local:docs/report.txt")])
    app.wait_for_line("reading docs/report.txt")
    scopefs_mount.revoke("local:docs")
    app.wait_for_line("lost access")
    assert app.wait(timeout=20) == 0
    scopefs_mount.restore("local:docs")
    again = scopefs_mount.start(APP + [scopefs_mount.path("local:docs/report.txt")])
    again.wait_for_line("reading docs/report.txt")
    again.kill()  # the world also stops what it started when the test ends


@WORLD
def test_failed_opens_are_retried(scopefs_mount):
    app = scopefs_mount.start(APP + [scopefs_mount.path("local:docs/report.txt")])
    app.wait_for_line("reading docs/report.txt")
    scopefs_mount.inject("open", errno="EIO", path="Providers/local/docs/*")
    app.wait_for_line("read failed: EIO")
    scopefs_mount.clear_faults()
    scopefs_mount.revoke("local:docs")
    app.wait_for_line("lost access")
    assert app.wait(timeout=20) == 0


@WORLD
def test_the_app_follows_its_document_when_it_moves(scopefs_mount):
    app = scopefs_mount.start(APP + [scopefs_mount.path("local:docs/report.txt")])
    app.wait_for_line("reading docs/report.txt")
    scopefs_mount.rename_on_host("local:docs/report.txt", "local:docs/2026/report.txt")
    app.wait_for_line("reading docs/2026/report.txt")
    scopefs_mount.revoke("local:docs")
    app.wait_for_line("lost access")
    assert app.wait(timeout=20) == 0
