"""An extension's provider on a fleet (issue 34; SPEC S41-S44; decision 63).

Two hosts share one PostgreSQL store and one "remote": a folder both
hosts' extensions reach (the built-in `folder` extension), as S3 or an
rclone remote would be. The owner adds the provider once; each host's
daemon starts its own extension and keeps its own replica in its own
state directory, and serves the fleet's grants from it. So an item
granted on A is downloaded and read on B, a revoke on A cuts B's app, a
write on B reaches the remote and A's apps, and a coordinated writer on A
waits for a reader on B of the same item. The store is data for the
hosts, never code: a fleet's provider is a built-in extension.

Host A is the owner's (loopback, owner's role); host B runs in its own
network namespace behind a veth, with a host role over TLS. Each has its
own state directory, daemon and default (strict) mount; apps run through
`scopefs run` in the default sandbox."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest
from fleet_hosts import CLAIM, HOLD_AND_LISTEN, two_hosts
from scopefs_harness import ALPHA, Env, describe, wait_for

LEASE = 3.0
CLOUD = "cloud"
REPORT = b"quarterly report\n" * 100
TIMED_OUT = 75  # ETIMEDOUT: a coordinated wait that ran out (docs/API.md)
BAD_STATE = 78  # what a fleet state directory refuses (docs/CLI.md, "A fleet")

# Starts a scope on argv[1] (S9), then reads it: the sha256 or the errno.
READ = """
path = sys.argv[1]
started = outcome(lambda: os.getxattr(path, "user.scopefs.start").decode())
read = outcome(lambda: __import__("hashlib").sha256(open(path, "rb").read()).hexdigest())
emit({"start": started, "read": read, "state": outcome(lambda: os.getxattr(path, "user.scopefs.state").decode())})
"""

# Starts a scope on the folder argv[1], writes argv[3] to the file argv[2] in it.
WRITE = """
folder, name, text = sys.argv[1], sys.argv[2], sys.argv[3]
os.getxattr(folder, "user.scopefs.start")
def write():
    with open(os.path.join(folder, name), "w") as f:
        f.write(text)
    return "written"
emit(outcome(write))
"""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    remote = tmp_path_factory.mktemp("remote")

    def add_the_provider(a: Env) -> None:
        # The shared remote: one folder on this machine that both hosts'
        # extensions serve (each in its own sandbox, which may write it).
        (remote / "docs").mkdir()
        (remote / "docs" / "report.txt").write_bytes(REPORT)
        for path in (remote, remote / "docs"):
            os.chmod(path, 0o777)
        added = a.cli("provider", "add", CLOUD, "--extension", "folder", "--option", f"root={remote}")
        assert added.stdout.strip() == f"provider {CLOUD} -> extension folder", describe(added)

    environ = {
        "SCOPEFS_FLEET_TIMEOUT": "1",
        "SCOPEFS_EXTENSION_POLL_SECONDS": "1",
        "SCOPEFS_EXTENSION_RETRY_SECONDS": "0.5",
    }
    with two_hosts(tmp_path_factory.mktemp("extension-daemon-logs"), LEASE, environ, add_the_provider) as hosts:
        for host in (hosts["a"], hosts["b"]):
            host.cli("provider", "sync", CLOUD)
        yield {**hosts, "remote": remote}


def read_as_app(host: Env, rel: str) -> dict:
    return host.app_json(ALPHA, READ, host.prov(ALPHA, CLOUD, rel), sandbox=True)


def wait_visible(host: Env, rel: str) -> None:
    """Until HOST serves A's new grant on REL to ALPHA (B follows A's
    commit on NOTIFY: not granted, an item is not even there, S2)."""
    wait_for(
        f"{rel} to be granted on {host.root.name}",
        lambda: host.app_json(ALPHA, "emit(os.path.exists(sys.argv[1]))", host.prov(ALPHA, CLOUD, rel), sandbox=True),
    )


def events_of(host: Env) -> list[dict]:
    """`scopefs events --json` on HOST: one event a line."""
    return [json.loads(line) for line in host.cli("events", "--json", "--limit", "200").stdout.splitlines()]


def extension_status(host: Env) -> dict:
    daemon = json.loads(host.cli("status", "--json").stdout)["daemon"]
    return next(e for e in daemon.get("extensions") or [] if e["provider"] == CLOUD)


def test_each_host_serves_the_provider_from_a_replica_of_its_own(fleet):
    """Decision 63: the store names A's replica; B's daemon runs its own
    extension and keeps its own replica in its own state directory, with
    the remote's items as placeholders (S42) before any read."""
    a, b = fleet["a"], fleet["b"]
    for host in (a, b):
        running = extension_status(host)
        assert running["state"].startswith("running"), running
        assert running["items"] >= 2, running  # docs and docs/report.txt
        replica = host.state / "extensions" / CLOUD / "files" / "docs" / "report.txt"
        assert replica.stat().st_size == len(REPORT), replica
    listed = json.loads(b.cli("provider", "list", "--json").stdout)
    cloud = next(p for p in listed if p["id"] == CLOUD)
    assert cloud["directory"] == str(b.state / "extensions" / CLOUD / "files"), cloud


def test_an_item_granted_on_a_is_downloaded_on_b_and_revoked_from_a(fleet):
    """S42 on B, S14 and S44 across hosts: B's app, granted from A's CLI,
    downloads the item through B's extension after its scope starts; A's
    revoke denies it on B (EPERM), A's restore gives it back."""
    a, b = fleet["a"], fleet["b"]
    grant_id = a.grant(ALPHA, f"{CLOUD}:docs/report.txt", read_only=True)
    wait_visible(b, "docs/report.txt")
    got = read_as_app(b, "docs/report.txt")
    assert got == {"start": {"ok": "1"}, "read": {"ok": sha(REPORT)}, "state": {"ok": "materialized"}}, got
    assert (b.state / "extensions" / CLOUD / "files" / "docs" / "report.txt").read_bytes() == REPORT
    a.revoke(ALPHA, grant_id)
    # `revoke` returns once A's daemon enforces it; B follows on NOTIFY.
    denied = wait_for(
        "A's revoke to reach B", lambda: read_as_app(b, "docs/report.txt"), lambda g: g["read"] != {"ok": sha(REPORT)}
    )
    assert denied["read"] == {"errno": "EPERM"}, denied
    a.restore(ALPHA, grant_id)
    wait_for(
        "A's restore to reach B",
        lambda: read_as_app(b, "docs/report.txt"),
        lambda g: g["read"] == {"ok": sha(REPORT)},
    )


def test_a_write_on_b_reaches_the_remote_and_an_app_on_a(fleet):
    """S43 across hosts: B's app writes in a granted folder; B's extension
    uploads it to the shared remote, and A's extension brings it to A's
    replica, where A's app reads it."""
    a, b, remote = fleet["a"], fleet["b"], fleet["remote"]
    a.grant(ALPHA, f"{CLOUD}:docs")
    text = f"written on host-b at {time.time()}\n"
    wait_visible(b, "docs")
    wrote = b.app_json(ALPHA, WRITE, b.prov(ALPHA, CLOUD, "docs"), "from-b.txt", text, sandbox=True)
    assert wrote == {"ok": "written"}, wrote
    wait_for(
        "the upload to the remote",
        lambda: (remote / "docs" / "from-b.txt").read_text() if (remote / "docs" / "from-b.txt").exists() else None,
        lambda seen: seen == text,
    )
    got = wait_for(
        "A's replica to bring the new file",
        lambda: read_as_app(a, "docs/from-b.txt"),
        lambda g: g["read"] == {"ok": sha(text.encode())},
    )
    assert got["start"] == {"ok": "1"}, got


def test_a_writer_on_a_waits_for_a_reader_on_b_of_the_same_extension_item(fleet):
    """Coordination across hosts on an extension's item (issue 34, S27a,
    S27b): the fleet's claim names the extension's stable item id
    (`x/cloud/ID`, the folder extension's ids are inodes), which every
    host's replica gives the item and a remote rename keeps. A's writer
    times out (75) while B's reader holds it, also by the item's new name
    after a rename on the remote, and is granted once B's reader, told
    `save` then `relinquish`, lets go."""
    a, b, remote = fleet["a"], fleet["b"], fleet["remote"]
    a.grant(ALPHA, f"{CLOUD}:docs")
    (remote / "docs" / "held.txt").write_bytes(REPORT)
    for host in (a, b):
        host.cli("provider", "sync", CLOUD)
    wait_visible(b, "docs/held.txt")
    item = f"Providers/{CLOUD}/docs/held.txt"
    reader = b.app_session(ALPHA, HOLD_AND_LISTEN, item, "read", "30", sandbox=True)
    try:
        assert reader.recv()["claim"].get("ok") is True
        claims = json.loads(a.cli("fleet", "claims", "--json").stdout)
        inode = (remote / "docs" / "held.txt").stat().st_ino
        assert [(c["host"], c["item"]) for c in claims if c["state"] == "held"] == [
            ("host-b", f"x/{CLOUD}/i{inode}")
        ], claims
        got = a.app_json(ALPHA, CLAIM, item, "1", sandbox=True)
        assert got["answer"].get("code") == TIMED_OUT, got
        # Renamed on the remote: the same item by its new name, on A too.
        (remote / "docs" / "held.txt").rename(remote / "docs" / "renamed.txt")
        for host in (a, b):
            host.cli("provider", "sync", CLOUD)
        renamed = f"Providers/{CLOUD}/docs/renamed.txt"
        got = a.app_json(ALPHA, CLAIM, renamed, "1", sandbox=True)
        assert got["answer"].get("code") == TIMED_OUT, got
        reader.send()
        got = a.app_json(ALPHA, CLAIM, renamed, "20", sandbox=True)
        heard = reader.recv()
    finally:
        reader.kill()
    assert got["answer"].get("ok") is True, got
    assert [n["kind"] for n in heard["heard"]][-2:] == ["save", "relinquish"], heard
    assert got["answered"] >= heard["released"] - 0.05, (got, heard)


def test_a_fleets_provider_is_a_built_in_extension(fleet):
    """Decision 63: every host runs what the store names, so the store
    holds no code and no host path to open. The CLI refuses a command of
    the owner's and `--writable` on a fleet (78, nothing added); and a
    host's daemon, shown a command provider written into the store behind
    the CLI's back, does not run it (an event says why)."""
    a, b, server = fleet["a"], fleet["b"], fleet["server"]
    command = "/usr/bin/true"
    refused = a.cli("provider", "add", "tool", "--extension", command, expect=BAD_STATE)
    assert "every host of the fleet would run it" in refused.stderr, describe(refused)
    refused = a.cli(
        "provider", "add", "open", "--extension", "folder", "--option", f"root={a.root}", "--writable", "/etc",
        expect=BAD_STATE,
    )  # fmt: skip
    assert "--writable" in refused.stderr, describe(refused)
    listed = {p["id"] for p in json.loads(a.cli("provider", "list", "--json").stdout)}
    assert "tool" not in listed and "open" not in listed, listed
    spec = json.dumps({"command": [command], "options": {}})
    p = server.psql(
        "INSERT INTO providers (id, name, directory, extension, created_at)"
        f" VALUES ('tool', 'tool', '/tmp', '{spec}', 0)"
    )
    assert p.returncode == 0, p
    try:
        for host in (a, b):
            events = wait_for(
                "the daemon to refuse the store's command",
                lambda host=host: events_of(host),
                lambda got: any(e["path"] == "/Providers/tool" and "built-in" in e.get("operation", "") for e in got),
            )
            ran = [e for e in events if e["path"] == "/Providers/tool" and "extension." in e.get("operation", "")]
            assert ran == [], ran  # never started, exited or restarted
    finally:
        server.psql("DELETE FROM providers WHERE id = 'tool'")
