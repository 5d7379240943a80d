"""pytest fixtures for remote stores in network namespaces (remotes.py),
imported by conftest.py.

- ``remotes``: a RemoteSet; ``remotes.s3()``, ``remotes.webdav()``,
  ``remotes.sftp()`` make remotes, each in a namespace of its own; all are
  closed after the test, pass or fail, and a teardown that leaves a
  namespace, an interface or a process behind fails the test.
- ``s3_remote``, ``webdav_remote``, ``sftp_remote``: one of each.

Ask for a remote before ``env`` (``def test_x(s3_remote, env)``) so that
the mount, and the extension it runs, are gone before the remote is. For
example (checked against the daemon of main at 4dcc5ec)::

    def test_an_edit_survives_a_dropped_link(s3_remote, env):
        s3_remote.put("docs/report.txt", b"v1")
        env.base_env.update(s3_remote.env)  # the daemon, and so the extension, get the keys
        env.cli("provider", "add", "cloud", *s3_remote.extension_arguments())
        mount(env)  # doc_scope_helpers
        env.cli("provider", "sync", "cloud")  # the granted folder exists once synced
        env._record_daemon()  # the extension's descriptors are the daemon's from here on
        env.grant(ALPHA, "cloud:docs")
        s3_remote.link_down()  # or netem(delay_ms=200, loss_percent=5)
        ...  # an app edits MOUNT/ALPHA/Providers/cloud/docs/report.txt
        s3_remote.link_up()
        wait_for("the edit uploaded", lambda: s3_remote.get("docs/report.txt"), lambda v: v == b"v2")

``webdav_remote``/``sftp_remote`` the same way, with
``extension_arguments(path="docs")`` to serve a subfolder and changes
written straight into ``remote.folder``.
"""

from __future__ import annotations

import pytest
from remotes import RcloneRemote, RemoteSet, S3Remote


@pytest.fixture
def remotes(tmp_path_factory):
    made = RemoteSet(tmp_path_factory.mktemp("remotes"))
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def s3_remote(remotes) -> S3Remote:
    return remotes.s3()


@pytest.fixture
def webdav_remote(remotes) -> RcloneRemote:
    return remotes.webdav()


@pytest.fixture
def sftp_remote(remotes) -> RcloneRemote:
    return remotes.sftp()
