"""An extension's item modes in the replica and the mount (issue 46,
finding 5b; SPEC S42): a remote item of mode 06777 (or a folder of
07777, or a chmod to 06755 of an item the replica has) shows its
permission bits only, in the replica's file on the host and through the
mount; the remote keeps its own modes (nothing is sent back)."""

from __future__ import annotations

import os

import pytest
from doc_scope_helpers import mount
from scopefs_harness import ALPHA, EXTENSIONS, REPO_ROOT

pytestmark = pytest.mark.sqlite_store(EXTENSIONS)

CLOUD = "cloud"
FOLDER = REPO_ROOT / "docs" / "examples" / "extensions" / "folder.py"


def mode(path) -> int:
    return os.lstat(path).st_mode & 0o7777


def test_set_id_and_sticky_bits_of_remote_items_reach_neither_the_replica_nor_the_mount(env):
    remote = env.root / "remote"
    (remote / "docs").mkdir(parents=True)
    (remote / "docs" / "report.txt").write_text("quarterly report\n")
    (remote / "docs" / "setid.sh").write_text("#!/bin/sh\nid\n")
    os.chmod(remote / "docs" / "setid.sh", 0o6777)
    (remote / "docs" / "sticky").mkdir()
    os.chmod(remote / "docs" / "sticky", 0o7777)
    for path in (remote, remote / "docs"):
        os.chmod(path, 0o777)
    env.base_env.update(SCOPEFS_EXTENSION_POLL_SECONDS="1", SCOPEFS_EXTENSION_RETRY_SECONDS="0.5")
    env.cli("provider", "add", CLOUD, "--extension", f"/usr/bin/python3 {FOLDER} {remote}", "--writable", remote)
    mount(env)

    def sync():
        env.cli("provider", "sync", CLOUD)

    sync()
    env._record_daemon()
    env.grant(ALPHA, f"{CLOUD}:docs")
    replica = env.state / "extensions" / CLOUD / "files" / "docs"

    def shown(rel: str) -> str:
        return env.prov(ALPHA, CLOUD, rel)

    def seen() -> dict[str, str]:
        return {
            "replica file": oct(mode(replica / "setid.sh")),
            "replica folder": oct(mode(replica / "sticky")),
            "mount file": oct(mode(shown("docs/setid.sh"))),
            "mount folder": oct(mode(shown("docs/sticky"))),
        }

    assert seen() == {
        "replica file": "0o777",
        "replica folder": "0o777",
        "mount file": "0o777",
        "mount folder": "0o777",
    }, seen()
    # A remote chmod of an item the replica has already.
    os.chmod(remote / "docs" / "report.txt", 0o6755)
    sync()
    assert oct(mode(replica / "report.txt")) == "0o755"
    assert oct(mode(shown("docs/report.txt"))) == "0o755"
    # Nothing of it went back to the remote as a local chmod.
    sync()
    assert oct(mode(remote / "docs" / "setid.sh")) == "0o6777"
    assert oct(mode(remote / "docs" / "sticky")) == "0o7777"
    assert oct(mode(remote / "docs" / "report.txt")) == "0o6755"
