"""An upgrade while the daemon runs keeps everything working (issue 50,
finding 2; SPEC S41, S43: remote changes reach the replica).

`make install` and apt put a new file at the binary's path and rename it
over the old one while the daemon runs. The daemon started its replica
writer (`scopefs replica-writer`) from the path /proc/self/exe named, which
then reads "PATH (deleted)": every provider started after the upgrade had
a writer that never started ("the replica writer does not answer"), so no
remote change reached its replica until a restart.
"""

from __future__ import annotations

import os
import shutil

import pytest
from doc_scope_helpers import mount
from extension_cloud import CLOUD, CONTROLLED, Cloud
from scopefs_harness import EXTENSIONS, REPO_ROOT, describe, scopefs_bin, wait_for

pytestmark = pytest.mark.sqlite_store(EXTENSIONS)


def replace_like_an_installer(path) -> None:
    """A new file beside `path`, renamed over it: the running daemon's
    binary is deleted from the file system, a new one takes its name."""
    new = path.with_name(path.name + ".new")
    shutil.copy2(scopefs_bin(), new)
    os.rename(new, path)


def test_remote_changes_reach_the_replicas_after_the_binary_is_replaced(env):
    """Issue 50.2: the daemon runs from a copy of the binary; the copy is
    replaced on disk as an installer does; then a remote change of the
    provider that ran before, and the first listing of a provider added
    after, both reach their replicas (written by the replica writer)."""
    installed = env.root / "bin" / "scopefs"
    installed.parent.mkdir()
    shutil.copy2(env.bin, installed)
    env.bin = installed
    # The copy is not in a source tree: name where the test extensions' SDK is.
    env.base_env["SCOPEFS_EXTENSIONS_ROOT"] = str(REPO_ROOT)
    cloud = Cloud(env)
    mount(env)
    cloud.sync()
    env._record_daemon()

    replace_like_an_installer(installed)

    (cloud.remote / "docs" / "appeared.txt").write_bytes(b"after the upgrade\n")
    cloud.sync()
    replica = env.state / "extensions" / CLOUD / "files"
    wait_for("the remote change in the replica", lambda: (replica / "docs" / "appeared.txt").exists(), timeout=10)

    later = env.root / "later-remote"
    control = env.root / "later-control"
    (later / "notes").mkdir(parents=True)
    control.mkdir()
    (later / "notes" / "first.txt").write_bytes(b"listed after the upgrade\n")
    for path in (later, later / "notes", control):
        os.chmod(path, 0o777)
    env.cli(
        "provider", "add", "later", "--extension", f"/usr/bin/python3 {CONTROLLED} {later} {control}",
        "--writable", later, "--writable", control,
    )  # fmt: skip
    synced = env.cli("provider", "sync", "later", expect=None)
    assert synced.returncode == 0, describe(synced)
    placeholder = env.state / "extensions" / "later" / "files" / "notes" / "first.txt"
    wait_for("the new provider's first listing in its replica", placeholder.exists, timeout=10)
    env._record_daemon()  # the new provider's extension and replica are the daemon's from here on
