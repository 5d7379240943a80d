"""SPEC S44: one isolation layer for a fleet, on a real PostgreSQL server.

Host A (the owner's) talks to the server on loopback with the owner's role;
host B runs in its own network namespace behind a veth (netns_link.Link),
with a host role of least rights over TLS (sslmode=require); host C is on
loopback with a host role whose password comes from PGPASSWORD. Each host has
its own state directory, daemon and mount (default strict scopes), and its
app processes run in the default sandbox. A revoke on A reaches an app
reading on B through LISTEN/NOTIFY; a partition or a dead server makes a
host fail closed once its lease runs out, and healing brings back exactly
the grants the store holds."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from fleet_hosts import add_host_role, init_owner_host, join_over_link, keep_daemon_logs, mount
from netns_link import Link
from postgres_server import PostgresServer
from scopefs_harness import (
    ALPHA,
    LOCAL,
    NON_ROOT_OWNER_PRELUDE,
    Env,
    describe,
    mount_count,
    run_bounded,
    wait_for,
)
from test_portal import Portal, SessionBus
from transition_reader import TransitionReader, reader_command

NOBODY = 65534
LEASE = 3.0  # seconds; the default is 30 (FleetConfiguration.defaultLease)
HOST_ROLE = "scopefs_host_b"
PROPAGATION_BOUND = 2.0  # seconds from the revoke's start to EPERM on the other host
FAIL_CLOSED_SLACK = 4.0  # a tick, a timed-out call and scheduling beyond the lease


def app_reader(host: Env, path: str, seconds: float = 110) -> TransitionReader:
    """A reader of PATH as a sandboxed ALPHA process on HOST."""
    return TransitionReader(host.run_argv(ALPHA, reader_command(path, seconds), sandbox=True), host.base_env)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    link = Link()
    server = PostgresServer(extra_addresses=[link.host_address])
    a, b, c = Env(), Env(), Env()
    hosts = {"a": a, "b": b, "c": c, "link": link, "server": server}
    try:
        for host in (a, b, c):
            host.base_env["SCOPEFS_FLEET_TIMEOUT"] = "1"
        # The owner's host: the owner's role, migrations, the apps and providers.
        init_owner_host(a, server, LEASE)
        # Host B: its own role, created by the owner, reaching the server over TLS.
        add_host_role(a, b, HOST_ROLE, "host-b")
        hosts["b_password"] = join_over_link(b, server, link, HOST_ROLE, "host-b", LEASE)
        # Host C: on loopback, its role's password from the environment (PGPASSWORD).
        c_password = add_host_role(a, c, "scopefs_host_c", "host-c")
        c.base_env["PGPASSWORD"] = c_password.read_text().strip()
        mount(a)
        mount(b, link)
        # Host C joins with the mount option alone, no `init` (issue 34: "and a mount option").
        mount(c, fleet_options=["--database", server.url("scopefs_host_c"), "--host-name", "host-c", "--lease", LEASE])
        yield hosts
    finally:
        keep_daemon_logs(tmp_path_factory.mktemp("daemon-logs"), {"a": a, "b": b, "c": c})
        problems = a.teardown() + b.teardown() + c.teardown()
        server.close()
        link.close()
        assert not problems, problems


def grant(host: Env, rel: str) -> str:
    p = host.cli("fleet", "grant", ALPHA, f"{LOCAL}:{rel}")
    return p.stdout.split()[1].rstrip(":")


def test_grant_and_revoke_on_a_reach_apps_reading_on_b_and_c(fleet):
    """A grant made on A shows on B and C; a revoke on A cuts the apps
    reading there (EPERM) within the bound, through LISTEN/NOTIFY."""
    a, b, c = fleet["a"], fleet["b"], fleet["c"]
    target = "docs/report.txt"
    readers = [app_reader(host, host.prov(ALPHA, LOCAL, target)) for host in (b, c)]
    try:
        for reader in readers:
            reader.wait_for("ENOENT", 20)  # not granted: not even there (SPEC S2)
        grant_id = grant(a, target)
        for reader in readers:
            reader.wait_for("ok", PROPAGATION_BOUND + 3)
        started = time.time()
        a.cli("fleet", "revoke", ALPHA, "--grant", grant_id)
        for reader in readers:
            denied = reader.wait_for("EPERM", PROPAGATION_BOUND + 3)
            assert denied["t"] - started < PROPAGATION_BOUND, reader.transitions
        # The owner sees which host each app process runs on (heartbeats, every 2 s).
        deadline = time.time() + 6
        while True:
            hosts = {h["name"]: h for h in json.loads(a.cli("fleet", "hosts", "--json").stdout)}
            running = {name: {p["app"] for p in h.get("processes", [])} for name, h in hosts.items()}
            if (ALPHA in running.get("host-b", ()) and ALPHA in running.get("host-c", ())) or time.time() > deadline:
                break
            time.sleep(0.5)
        assert ALPHA in running["host-b"] and ALPHA in running["host-c"], hosts
        assert ALPHA not in running.get("host-a", ()), hosts
    finally:
        for reader in readers:
            reader.close()
    # The events of A's CLI are the fleet's: B lists them, naming host-a.
    # --limit: the readers' denials on B and C are the fleet's events too.
    events = json.loads(b.cli("fleet", "events", "--app", ALPHA, "--limit", "20000", "--json").stdout)
    kinds = [(e["kind"], e["host"]) for e in events if e.get("grant") == int(grant_id)]
    assert ("grant", "host-a") in kinds and ("revoke", "host-a") in kinds, events
    status = json.loads(b.cli("status", "--json").stdout)["daemon"]
    assert status.get("fleetHost") == "host-b" and not status.get("policyFailure"), status
    hosts = {h["name"]: h for h in json.loads(a.cli("fleet", "hosts", "--json").stdout)}
    assert set(hosts) == {"host-a", "host-b", "host-c"} and hosts["host-b"]["role"] == HOST_ROLE, hosts
    assert all(h.get("failure") is None for h in hosts.values()), hosts


def test_the_mount_option_joins_the_fleet_and_refuses_another(fleet):
    """SPEC S44: `scopefs mount --database` records the fleet as `init
    --database` does (host C joined so, and serves the fleet's policy in
    the test above); a state directory on one fleet refuses another's URL
    (exit 78) and keeps its own."""
    c = fleet["c"]
    recorded = json.loads((c.state / "fleet.json").read_text())
    assert recorded["hostName"] == "host-c" and "scopefs_host_c@" in recorded["url"], recorded
    other = c.root / "other-mnt"
    other.mkdir(exist_ok=True)
    p = c.cli("mount", other, "--database", "postgresql://someone@127.0.0.1:1/elsewhere", expect=78)
    assert "already" in p.stderr, p.stderr
    assert json.loads((c.state / "fleet.json").read_text()) == recorded


def test_a_host_role_cannot_grant(fleet):
    """Least rights (SECURITY.md): B's role reads the policy and writes its
    own rows; a grant, an app or a forged event of another role is refused."""
    a, b, server = fleet["a"], fleet["b"], fleet["server"]
    grant(a, "docs/secret.txt")
    p = b.cli("fleet", "grant", ALPHA, f"{LOCAL}:docs/report.txt", expect=77)
    assert "permission denied" in p.stderr, describe(p)
    b.cli("fleet", "add-app", "com.example.intruder", expect=77)
    password = fleet["b_password"]
    attacks = [
        "UPDATE grants SET state = 'active'",
        "INSERT INTO apps (id, name, created_at) VALUES ('x', 'x', 0)",
        "INSERT INTO events (time, host, db_role, kind) VALUES (0, 'host-a', 'scopefs_owner', 'grant')",
        "UPDATE hosts SET db_role = 'scopefs_owner' WHERE name = 'host-b'",
        "CREATE TABLE planted (x int)",
    ]
    for sql in attacks:
        p = server.psql(sql, role=HOST_ROLE, password=password)
        assert p.returncode != 0 and ("permission denied" in p.stderr or "row-level security" in p.stderr), (sql, p)
    # What it may do: read the policy.
    p = server.psql("SELECT count(*) FROM grants", role=HOST_ROLE, password=password)
    assert p.returncode == 0, p.stderr


# An app's bookmark of a file (SPEC S25), in scope (strict mounts).
BOOKMARK = (
    "start_accessing(sys.argv[1]); emit(outcome(lambda: os.getxattr(sys.argv[1], 'user.scopefs.bookmark').decode()))"
)


def test_the_plain_commands_change_the_fleets_store_with_the_owners_role(fleet):
    """Issue 34, SPEC S44: one CLI for both stores. On the owner's host,
    `scopefs grant`, `revoke`, `restore` and `open` write the fleet's store
    (the local SQLite file stays empty: a change there would reach no
    daemon) and reach an app reading on B; an app's bookmark on B resolves
    there, not on A. On B, whose role is a host's,
    the same commands are refused by the database (77), a session grant
    too."""
    a, b = fleet["a"], fleet["b"]
    target = "deep/a/other.txt"
    reader = app_reader(b, b.prov(ALPHA, LOCAL, target))
    try:
        reader.wait_for("ENOENT", 20)
        grant_id = a.cli("grant", ALPHA, f"{LOCAL}:{target}").stdout.split()[-1]
        reader.wait_for("ok", PROPAGATION_BOUND + 3)
        fleet_grants = json.loads(a.cli("fleet", "grants", ALPHA, "--json").stdout)
        assert any(str(g["id"]) == grant_id for g in fleet_grants), fleet_grants
        reader.forget()
        a.cli("revoke", ALPHA, grant_id)
        reader.wait_for("EPERM", PROPAGATION_BOUND + 3)
        reader.forget()
        a.cli("restore", ALPHA, grant_id)
        reader.wait_for("ok", PROPAGATION_BOUND + 3)
    finally:
        reader.close()
    # A bookmark made on B (a host's role: the item's identifier read, not
    # recorded) resolves on B, within the grant; B's key is B's own.
    token = b.app_json(ALPHA, BOOKMARK, b.prov(ALPHA, LOCAL, target), sandbox=True)
    assert "ok" in token, token
    p = b.run_app(ALPHA, ["scopefs", "bookmark", "resolve", token["ok"], "--json"], sandbox=True)
    assert p.returncode == 0 and json.loads(p.stdout)["pathInApp"] == f"Providers/{LOCAL}/{target}", describe(p)
    p = a.run_app(ALPHA, ["scopefs", "bookmark", "resolve", token["ok"], "--json"], sandbox=True)
    assert p.returncode == 65, describe(p)
    # `open` (the picker's): the grant in the fleet's store, the reference in A's container.
    opened = json.loads(a.cli("open", ALPHA, f"{LOCAL}:docs/secret.txt", "--read-only", "--json").stdout)
    assert Path(a.state / "containers" / ALPHA / opened["reference"].removeprefix("Container/")).exists(), opened
    assert any(g["path"] == "docs/secret.txt" for g in json.loads(a.cli("privacy", ALPHA, "--json").stdout))
    with sqlite3.connect(a.state / "scopefs.sqlite") as local:
        assert local.execute("SELECT count(*) FROM grants").fetchone() == (0,)
    for argv in (["grant", ALPHA, f"{LOCAL}:docs/report.txt"], ["revoke", ALPHA, grant_id], ["app", "add", "x.y.z"]):
        p = b.cli(*argv, expect=77)
        assert "permission denied" in p.stderr, describe(p)
    # A session grant is the fleet's too, and B's role may make none either.
    p = b.cli("grant", ALPHA, f"{LOCAL}:docs/report.txt", "--session", expect=77)
    assert "permission denied" in p.stderr, describe(p)


# Starts a scope on argv[1], reads it, stops: the text or the errno (S6, S7).
READ_IN_SCOPE = """
path = sys.argv[1]
def read():
    os.setxattr(path, "user.scopefs.start", b"")
    try:
        return open(path, "rb").read().decode()
    finally:
        os.setxattr(path, "user.scopefs.stop", b"")
emit(outcome(read))
"""


def fleet_grant_ids(host: Env) -> set[int]:
    return {g["id"] for g in json.loads(host.cli("fleet", "grants", ALPHA, "--json").stdout)}


def test_a_session_grant_is_its_hosts_and_ends_with_the_apps_last_process_there(fleet):
    """Decision 64 (SPEC S16, S44): `grant --session` on A is A's: A serves
    it, B never does (the app's processes there are not the session's);
    it ends, in the fleet's store, when the app's last process on A exits,
    also when the database was away at that moment (held revoked on A,
    ended in the store once it is back)."""
    a, b, server = fleet["a"], fleet["b"], fleet["server"]
    target = "deep/a/b/sibling.txt"
    on_a, on_b = a.prov(ALPHA, LOCAL, target), b.prov(ALPHA, LOCAL, target)
    grant_id = int(a.cli("grant", ALPHA, f"{LOCAL}:{target}", "--session", "--read-only").stdout.split()[-1])
    assert grant_id in fleet_grant_ids(b)  # every host lists it ...
    reader = app_reader(a, on_a)  # ... and A serves it while A's app runs
    try:
        reader.wait_for("ok", 10)
        denied = b.app_json(ALPHA, READ_IN_SCOPE, on_b, sandbox=True)
        assert denied == {"errno": "ENOENT"}, denied  # ... and B never (S2)
    finally:
        reader.close()  # the app's last process on A
    wait_for("the session's end in the fleet's store", lambda: grant_id not in fleet_grant_ids(b))
    ended = json.loads(b.cli("fleet", "events", "--app", ALPHA, "--limit", "20000", "--json").stdout)
    assert any(e["kind"] == "forget" and e.get("grant") == grant_id and e["host"] == "host-a" for e in ended), ended
    assert a.app_json(ALPHA, READ_IN_SCOPE, on_a, sandbox=True) == {"errno": "ENOENT"}

    # The database away when the session ends: A holds the grant revoked,
    # and ends it in the store once the server is back (else A would serve
    # it again from the store).
    grant_id = int(a.cli("grant", ALPHA, f"{LOCAL}:{target}", "--session", "--read-only").stdout.split()[-1])
    reader = app_reader(a, on_a)
    try:
        reader.wait_for("ok", 10)
        server.stop("immediate")
        reader.close()  # its end reaches A's daemon while the store is away
        time.sleep(2)  # the point: the session's end meets no database
    finally:
        reader.close()
        server.start()
    wait_for("the session's end once the store is back", lambda: grant_id not in fleet_grant_ids(b), timeout=20)
    wait_for(
        "A to serve the store again",
        lambda: a.app_json(ALPHA, READ_IN_SCOPE, on_a, sandbox=True),
        lambda got: got == {"errno": "ENOENT"},
        timeout=20,
    )
    # B's daemon, whose role may end no grant, never tried: its apps' exits
    # end none of A's session grants (it is not served them).
    assert "cannot end session grants" not in (b.state / "daemon.log").read_text()


def stat_outcome(path: Path) -> str:
    try:
        os.stat(path)
        return "ok"
    except OSError as error:
        return errno.errorcode[error.errno]


def test_the_portal_serves_the_fleets_documents_and_fails_closed_with_its_host(fleet, tmp_path):
    """Decision 65 (SPEC S44, S45): `scopefs portal` on a fleet host. An
    exported document is a grant in the fleet's store (every host lists
    it, its event names the host); a transient one is a session grant of
    that host. The layout checks each read against the version the host's
    daemon serves: while the daemon fails closed (the database away past
    the lease) the app's documents are gone from it, and they come back
    once the daemon serves the store again."""
    a, b, server = fleet["a"], fleet["b"], fleet["server"]
    bus = SessionBus(tmp_path)
    (tmp_path / "doc").mkdir()
    portal = Portal(a, bus, tmp_path / "doc")
    try:
        report = a.backing(LOCAL) / "deep" / "hidden" / "x.txt"
        exported = portal.flatpak("document-export", "--app", ALPHA, report).stdout.strip()
        layout = portal.mountpoint / "by-app" / ALPHA / Path(exported).parent.name / "x.txt"
        assert layout.read_bytes() == b"x\n"
        listed = json.loads(b.cli("fleet", "grants", ALPHA, "--json").stdout)
        [grant] = [g for g in listed if g["relativePath"] == "deep/hidden/x.txt"]
        assert grant["isSession"] is False, grant
        portal.flatpak("document-export", "--transient", "--app", ALPHA, a.backing(LOCAL) / "docs" / "secret.txt")
        listed = json.loads(b.cli("fleet", "grants", ALPHA, "--json").stdout)
        assert [g["isSession"] for g in listed if g["relativePath"] == "docs/secret.txt"] == [True], listed
        assert layout.read_bytes() == b"x\n"  # the layout's cache is at the version A serves
        server.stop("immediate")
        try:
            denied = wait_for(
                "the layout to deny the document once A fails closed",
                lambda: stat_outcome(layout),
                lambda seen: seen != "ok",
                timeout=LEASE + FAIL_CLOSED_SLACK + 3,
            )
            assert denied == "ENOENT", denied  # as for an app with no grant (S2)
            assert "FAILED CLOSED" in a.cli("status").stdout
        finally:
            server.start()
        wait_for("the layout to serve the document again", lambda: stat_outcome(layout) == "ok", timeout=20)
        assert layout.read_bytes() == b"x\n"
    finally:
        try:
            portal.stop()
        finally:
            bus.stop()


def test_a_partitioned_host_fails_closed_after_its_lease_and_heals(fleet):
    """Link down: B serves for its lease, then denies everything (EPERM,
    status says why); a revoke made on A meanwhile holds after healing."""
    a, b, link = fleet["a"], fleet["b"], fleet["link"]
    kept, revoked = "deep/a/b/target.txt", "deep/a/b/sibling.txt"
    kept_id, revoked_id = grant(a, kept), grant(a, revoked)
    reader = app_reader(b, b.prov(ALPHA, LOCAL, kept))
    other = app_reader(b, b.prov(ALPHA, LOCAL, revoked))
    try:
        reader.wait_for("ok", 10)
        other.wait_for("ok", 10)
        reader.forget()
        cut = time.time()
        link.down()
        a.cli("fleet", "revoke", ALPHA, "--grant", revoked_id)  # B cannot hear it
        denied = reader.wait_for("EPERM", LEASE + FAIL_CLOSED_SLACK + 3)
        assert LEASE - 0.5 <= denied["t"] - cut <= LEASE + FAIL_CLOSED_SLACK, (denied["t"] - cut, reader.transitions)
        status = json.loads(b.cli("status", "--json").stdout)
        assert "lost the fleet database" in (status["daemon"].get("policyFailure") or ""), status
        reader.forget()
        link.up()
        reader.wait_for("ok", 15)
        other.wait_for("EPERM", 1)
        time.sleep(1.5)
        assert [t["state"] for t in other.transitions if "state" in t][-1] == "EPERM", other.transitions
        # The fail-closed period is the fleet's event too, naming host B.
        events = json.loads(a.cli("fleet", "events", "--limit", "20000", "--json").stdout)
        closed = [e for e in events if e["kind"] == "policy-failed-closed"]
        assert closed and closed[-1]["host"] == "host-b" and closed[-1]["role"] == HOST_ROLE, events
        assert "lost the fleet database" in closed[-1]["operation"], closed
    finally:
        if link.state != "up":
            link.up()
        reader.close()
        other.close()
    a.cli("fleet", "restore", ALPHA, "--grant", kept_id)


def test_a_bookmark_resolves_from_the_served_policy_and_fails_closed_with_it(fleet):
    """Issue 34 (review of stop 43), SPEC S26, S44: a daemon resolves an
    app's bookmark against the policy it serves, in memory; before, each
    resolution read the whole policy from the fleet's store through the
    connection the revokes' reloads wait for, so an app's flood of them
    delayed revocation. Link down: within the lease B still resolves
    (seen failing on the old code: refused after SCOPEFS_FLEET_TIMEOUT);
    once B has failed closed the grant is served as revoked, and so the
    resolution is refused, as the app's reads are."""
    a, b, link = fleet["a"], fleet["b"], fleet["link"]
    target = "deep/hidden/x.txt"
    grant_id = grant(a, target)
    path = b.prov(ALPHA, LOCAL, target)
    resolve = ["scopefs", "bookmark", "resolve", "--json"]
    reader = app_reader(b, path)
    try:
        reader.wait_for("ok", 10)
        token = b.app_json(ALPHA, BOOKMARK, path, sandbox=True)
        assert "ok" in token, token
        reader.forget()
        cut = time.time()
        link.down()
        p = b.run_app(ALPHA, [*resolve, token["ok"]], sandbox=True)
        within = time.time() - cut
        assert p.returncode == 0 and json.loads(p.stdout)["pathInApp"] == f"Providers/{LOCAL}/{target}", (
            within,
            describe(p),
        )
        reader.wait_for("EPERM", LEASE + FAIL_CLOSED_SLACK + 3)
        p = b.run_app(ALPHA, [*resolve, token["ok"]], sandbox=True)
        assert p.returncode == 77 and "revoked" in p.stderr, describe(p)
        reader.forget()
        link.up()
        reader.wait_for("ok", 15)
        p = b.run_app(ALPHA, [*resolve, token["ok"]], sandbox=True)
        assert json.loads(p.stdout)["pathInApp"] == f"Providers/{LOCAL}/{target}", describe(p)
    finally:
        if link.state != "up":
            link.up()
        reader.close()
    a.cli("fleet", "revoke", ALPHA, "--grant", grant_id)


# Mounts a tmpfs at $1 holding a copy of $2's tree, then becomes the rest:
# run in a mount namespace of its own, the copy is this host's view alone.
OWN_VIEW = 'view=$1 stage=$2; shift 2; mount -t tmpfs scopefs-view "$view" && cp -a "$stage"/. "$view" && exec "$@"'


def test_a_host_seeing_the_storage_on_another_device_serves_the_grants(fleet):
    """Issue 34, SPEC S44, decision 62: every NFS client sees the shared
    files with a device number of its own. Host D's daemon runs in a mount
    namespace where the provider's folder is the same tree on another
    file system (a tmpfs copy), as another machine would see it. A grant
    the owner makes on A is served on D. Seen failing on the old code:
    D compared the file identity A's host recorded, and the granted file
    hid (ENOENT)."""
    a, server = fleet["a"], fleet["server"]
    target = "deep/a/d-view.txt"
    (a.backing(LOCAL) / target).write_bytes(b"seen from D\n")
    d = Env()
    daemon = None
    try:
        d.base_env["PGPASSWORD"] = add_host_role(a, d, "scopefs_host_d", "host-d").read_text().strip()
        d.base_env["SCOPEFS_FLEET_TIMEOUT"] = "1"
        stage = d.root / "stage"
        shutil.copytree(a.backing(LOCAL), stage, symlinks=True)
        mount_argv = d.cli_argv(
            "mount", d.mnt, "--database", server.url("scopefs_host_d"), "--host-name", "host-d", "--lease", LEASE
        )
        argv = ["unshare", "--mount", "--propagation", "slave", "--", "sh", "-c", OWN_VIEW, "sh"]
        p = run_bounded([*argv, a.backing(LOCAL), stage, *mount_argv], 60, d.base_env, what="host D's mount")
        assert p.returncode == 0, describe(p)
        daemon = d.daemon_pid()
        in_view = ["nsenter", f"--mount=/proc/{daemon}/ns/mnt", "--"]
        device = os.stat(a.backing(LOCAL)).st_dev
        seen = run_bounded([*in_view, "stat", "-c", "%d", a.backing(LOCAL)], 30, d.base_env, what="D's view")
        assert int(seen.stdout) != device, "D's view of the provider is on the same device as A's"
        grant_id = grant(a, target)
        path = d.prov(ALPHA, LOCAL, target)
        read = [*in_view, *d.run_argv(ALPHA, ["scopefs", "scope", "exec", path, "--", "cat", path], sandbox=True)]
        got = run_bounded(read, 60, d.base_env, what="an app on D")
        assert got.returncode == 0 and got.stdout == "seen from D\n", describe(got)
        a.cli("revoke", ALPHA, grant_id)
        got = wait_for(
            "the revoke to reach D",
            lambda: run_bounded(read, 60, d.base_env, what="an app on D"),
            lambda p: p.returncode != 0,
            timeout=PROPAGATION_BOUND + 3,
        )
        assert got.returncode == 77 and "cannot start accessing" in got.stderr, describe(got)
    finally:
        if daemon is not None:
            subprocess.run(["nsenter", f"--mount=/proc/{daemon}/ns/mnt", "--", "fusermount3", "-u", str(d.mnt)],
                           capture_output=True, timeout=30)  # fmt: skip
            d.mounted, d.daemon = False, None
        problems = d.teardown()
    assert not problems, problems


# Host E, owned by uid 65534, in a mount namespace of its own
# (NON_ROOT_OWNER_PRELUDE): it joins the fleet with a host role, mounts,
# reads the granted file as an app in the default sandbox, waits for the
# test's revoke, reads until denied, and tries a grant of its own.
NON_ROOT_HOST = (
    "root=$1 binary=$2 url=$3 p=$4"
    + NON_ROOT_OWNER_PRELUDE
    + r"""
s() { as_owner "$binary" --state "$root/state" "$@"; }
s init --database "$url" --password-file "$root/host.pw" --host-name host-e --lease 3 >/dev/null
s mount "$root/mnt" >/dev/null
trap 's unmount "$root/mnt" >/dev/null 2>&1 || fusermount3 -u "$root/mnt"' EXIT
read_it() { s run --app com.example.alpha -- scopefs scope exec "$p" -- cat "$p"; }
echo "read: $(read_it 2>&1)"
echo "status: $(s status --json | tr -d '\n')"
bookmark=$(s run --app com.example.alpha -- scopefs scope exec "$p" -- scopefs bookmark create "$p" 2>&1)
echo "resolved: $(s run --app com.example.alpha -- scopefs bookmark resolve "$bookmark" --json 2>&1 | tr -d '\n')"
read go
for _ in $(seq 100); do read_it >/dev/null 2>&1 || { echo "denied"; break; }; sleep 0.1; done
s grant com.example.alpha shared-e:docs/report.txt >/dev/null 2>"$root/grant.err" || echo "grant: $? $(cat "$root/grant.err")"
"""
)


def test_a_non_root_owners_host_serves_the_fleets_grants(fleet):
    """Issue 34, SPEC S5, S44, as users run it with a non-root owner (uid
    65534) and the default sandbox: host E joins with a host role from a
    password file the owner (not root) owns, mode 0600; a grant made on A
    reaches E's app, whose bookmark resolves there, a revoke on A cuts it,
    and E's own grant is refused by the database (77)."""
    a, server = fleet["a"], fleet["server"]
    root = Path(tempfile.mkdtemp(prefix="scopefs-fleet-owner-", dir="/tmp"))
    shell = None
    try:
        os.chmod(root, 0o755)
        for folder in ("provider/docs", "mnt", "dev"):
            (root / folder).mkdir(parents=True)
        (root / "provider/docs/report.txt").write_text("the report\n")
        password = root / "host.pw"
        password.write_text("host-e-" + os.urandom(8).hex() + "\n")
        os.chmod(password, 0o600)
        a.cli("fleet", "add-host", "scopefs_host_e", "--password-file", password)  # the file is root's yet
        for path in [root, *root.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        a.cli("provider", "add", "shared-e", root / "provider")
        grant_id = a.cli("grant", ALPHA, "shared-e:docs/report.txt").stdout.split()[-1]
        target = root / "mnt" / ALPHA / "Providers/shared-e/docs/report.txt"
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", NON_ROOT_HOST, "host-e"]
        shell = subprocess.Popen(
            [*argv, root, str(Path(a.bin).resolve()), server.url("scopefs_host_e"), target],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        first = shell.stdout.readline()
        assert first == "read: the report\n", (first, shell.stderr.read() if shell.poll() is not None else "")
        status = json.loads(shell.stdout.readline().removeprefix("status: "))
        assert status["daemon"].get("fleetHost") == "host-e", status
        # A bookmark made by E's app resolves on E (E's key, the served policy).
        resolved = shell.stdout.readline().removeprefix("resolved: ")
        assert json.loads(resolved)["pathInApp"] == "Providers/shared-e/docs/report.txt", resolved
        a.cli("revoke", ALPHA, grant_id)
        out, err = shell.communicate("go\n", timeout=60)
        assert shell.returncode == 0, (out, err)
        assert out.splitlines()[0] == "denied", (out, err)
        assert out.splitlines()[1].startswith("grant: 77") and "permission denied" in out, (out, err)
    finally:
        if shell is not None and shell.poll() is None:
            shell.kill()
            shell.wait(30)
        a.cli("forget", ALPHA, "--all", expect=None)
        a.cli("provider", "remove", "shared-e", expect=None)
        if not mount_count(root / "mnt"):
            shutil.rmtree(root, ignore_errors=True)


def test_server_killed_and_restarted(fleet):
    """The server dies (immediate stop): a revoke is refused with exit 74,
    never local; both hosts fail closed after the lease and serve again,
    from the store, once it is back."""
    a, b, server = fleet["a"], fleet["b"], fleet["server"]
    target = "photos/p.jpg"
    grant_id = grant(a, target)
    readers = [app_reader(a, a.prov(ALPHA, LOCAL, target)), app_reader(b, b.prov(ALPHA, LOCAL, target))]
    try:
        for r in readers:
            r.wait_for("ok", 10)
            r.forget()
        server.stop("immediate")
        p = a.cli("fleet", "revoke", ALPHA, "--grant", grant_id, expect=74)
        assert "fleet database" in p.stderr, describe(p)
        for r in readers:
            r.wait_for("EPERM", LEASE + FAIL_CLOSED_SLACK + 3)
            r.forget()
        server.start()
        for r in readers:
            r.wait_for("ok", 15)
        a.cli("fleet", "revoke", ALPHA, "--grant", grant_id)
        for r in readers:
            r.wait_for("EPERM", PROPAGATION_BOUND + 3)
    finally:
        for r in readers:
            r.close()


def test_daemon_killed_mid_change_serves_the_store_after_remount(fleet):
    """kill -9 of B's daemon while A revokes and restores: the new daemon
    serves the store's last word, nothing the dead one held."""
    a, b, link = fleet["a"], fleet["b"], fleet["link"]
    target = "docs/secret.txt"
    grant_id = grant(a, target)
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            a.cli("fleet", "revoke", ALPHA, "--grant", grant_id)
            a.cli("fleet", "restore", ALPHA, "--grant", grant_id)

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        time.sleep(1)
        b.kill_daemon()
    finally:
        stop.set()
        flipper.join(60)
    a.cli("fleet", "revoke", ALPHA, "--grant", grant_id)
    subprocess.run(["fusermount3", "-u", "-z", str(b.mnt)], capture_output=True, timeout=30)
    mount(b, link)
    assert mount_count(b.mnt) == 1
    reader = app_reader(b, b.prov(ALPHA, LOCAL, target), seconds=20)
    try:
        reader.wait_for("EPERM", 10)
    finally:
        reader.close()


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def test_revocation_propagation_figures(fleet):
    """docs/PERFORMANCE.md: revoke on A to EPERM on B, over many revokes
    (SCOPEFS_FLEET_ROUNDS, default 40), measured two ways: from the start
    of A's `scopefs fleet revoke` (a new process, its connection and
    login included), and from the revoke's event time, taken in its
    transaction just before the commit (what the fleet's path costs)."""
    a, b = fleet["a"], fleet["b"]
    target = "docs/report.txt"
    grant_id = grant(a, target)
    reader = app_reader(b, b.prov(ALPHA, LOCAL, target), seconds=1800)
    rounds = int(os.environ.get("SCOPEFS_FLEET_ROUNDS", "40"))
    # SCOPEFS_FLEET_DELAY_MS: each packet to and from host B waits that long (netns_link).
    delay = float(os.environ.get("SCOPEFS_FLEET_DELAY_MS", "0"))
    if delay:
        fleet["link"].shape(delay_ms=delay)
    started, denied = [], []
    try:
        for _ in range(rounds):
            reader.wait_for("ok", 10)
            reader.forget()
            started.append(time.time())
            a.cli("fleet", "revoke", ALPHA, "--grant", grant_id)
            denied.append(reader.wait_for("EPERM", 10)["t"])
            reader.forget()
            a.cli("fleet", "restore", ALPHA, "--grant", grant_id)
    finally:
        reader.close()
        if delay:
            fleet["link"].shape()
    events = json.loads(a.cli("fleet", "events", "--app", ALPHA, "--limit", "20000", "--json").stdout)
    committed = [e["time"] for e in events if e["kind"] == "revoke" and e.get("grant") == int(grant_id)][-rounds:]
    assert len(committed) == rounds, events
    from_cli = percentiles([d - s for d, s in zip(denied, started, strict=True)])
    from_commit = percentiles([d - c for d, c in zip(denied, committed, strict=True)])
    print(
        f"\nrevocation propagation A->B (link delay {delay:g} ms) over {rounds} revokes: from the CLI's start p50 {from_cli[0] * 1000:.0f} ms, "
        f"p99 {from_cli[1] * 1000:.0f} ms; from the commit p50 {from_commit[0] * 1000:.1f} ms, "
        f"p99 {from_commit[1] * 1000:.1f} ms"
    )
    assert from_cli[1] < PROPAGATION_BOUND, (denied, started)
