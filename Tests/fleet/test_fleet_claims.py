"""Coordination across hosts (issue 34; SPEC S27a, S27b, S40, S44): claims on
a shared provider's items are held in the fleet's PostgreSQL store, so a
coordinated writer on host A waits for a coordinated reader on host B, B's
reader hears `save` then `relinquish`, a wait is bounded by the same timeout
(exit code 75, ETIMEDOUT) as on one host, and the claims of a host whose
daemon is killed end with its lease. Hosts are named: the fleet's processes
and claims say where each app process runs. A host's role cannot delete or
forge another host's claims or processes (row-level security).

Host A is the owner's (loopback, owner's role); host B runs in its own
network namespace behind a veth, with a host role over TLS. Each has its own
state directory, daemon and default (strict) mount; apps run through
`scopefs run` in the default sandbox."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from fleet_hosts import B_ROLE, CLAIM, HOLD_AND_LISTEN, mount, two_hosts
from scopefs_harness import ALPHA, LOCAL, Env, describe, mount_count

LEASE = 3.0  # seconds; short, so a dead host's claims end within the test
HOST_ROLE = B_ROLE
ITEM = "Providers/local/docs/report.txt"
TIMED_OUT = 75  # CommandError.Kind.timedOut, ETIMEDOUT in the client libraries
SLACK = 3.0  # polls, a heartbeat period and scheduling on a 2-core machine

DENIED_READ = """
emit(outcome(lambda p: open(p, "rb").read(1) and None, sys.argv[1]))
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with two_hosts(
        tmp_path_factory.mktemp("claims-daemon-logs"), LEASE, {"SCOPEFS_FLEET_TIMEOUT": "1"},
        lambda a: a.cli("fleet", "grant", ALPHA, f"{LOCAL}:docs/report.txt"),
    ) as hosts:  # fmt: skip
        yield hosts


def claim(host: Env, wait: float) -> dict:
    return host.app_json(ALPHA, CLAIM, ITEM, str(wait), sandbox=True)


def claims(host: Env) -> list[dict]:
    return json.loads(host.cli("fleet", "claims", "--json").stdout)


def test_a_writer_on_a_waits_for_a_reader_on_b_which_hears_save_and_relinquish(fleet):
    """SPEC S27a/S27b across hosts: B's coordinated reader holds the item;
    A's coordinated writer first gives up after its timeout (75, as on one
    host), then, with a longer wait, is granted only after B's reader —
    told `save` then `relinquish` naming its path — released."""
    a, b = fleet["a"], fleet["b"]
    reader = b.app_session(ALPHA, HOLD_AND_LISTEN, ITEM, "read", "20", sandbox=True)
    try:
        assert reader.recv()["claim"].get("ok") is True
        held = [c for c in claims(a) if c["state"] == "held"]
        assert [(c["host"], c["intent"], c["item"]) for c in held] == [("host-b", "read", "p/local/docs/report.txt")], (
            held
        )
        # A bounded wait: the same answer as on one host.
        got = claim(a, 1)
        assert got["answer"].get("ok") is False and got["answer"].get("code") == TIMED_OUT, got
        assert 0.9 <= got["answered"] - got["started"] <= 1 + SLACK, got
        # B's reader now listens (until relinquish); A waits long enough.
        reader.send()
        got = claim(a, 20)
        heard = reader.recv()
    finally:
        reader.kill()
    assert got["answer"].get("ok") is True and got["answer"].get("claim"), got
    kinds = [n["kind"] for n in heard["heard"]]
    assert kinds[-2:] == ["save", "relinquish"], heard
    assert all(n["path"] == ITEM for n in heard["heard"] if n["kind"] in ("save", "relinquish")), heard
    # Granted after B let go, not before; and promptly after.
    assert got["answered"] >= heard["released"] - 0.05, (got, heard)
    assert got["answered"] - heard["released"] <= SLACK, (got, heard)
    # Every claim ended with its release or its process.
    deadline = time.time() + 5
    while claims(a) and time.time() < deadline:
        time.sleep(0.1)
    assert claims(a) == [], claims(a)


def test_processes_and_claims_name_the_host(fleet):
    """Hosts are named (issue 34, SPEC S44): B's app process shows under
    host-b in `fleet processes` on A, its claim under host-b in `fleet
    claims`, and `status` on B says it is host-b."""
    a, b = fleet["a"], fleet["b"]
    holder = b.app_session(ALPHA, HOLD_AND_LISTEN, ITEM, "write", "30", sandbox=True)
    try:
        assert holder.recv()["claim"].get("ok") is True
        deadline = time.time() + 10
        listed = []
        while time.time() < deadline:
            listed = json.loads(a.cli("fleet", "processes", "--app", ALPHA, "--json").stdout)
            # A's list is its last heartbeat's (at most 2 s old): the
            # previous test's process on A leaves it within that.
            if any(p["host"] == "host-b" for p in listed) and not any(p["host"] == "host-a" for p in listed):
                break
            time.sleep(0.2)
        assert any(p["host"] == "host-b" and p["app"] == ALPHA and p["current"] for p in listed), listed
        assert not any(p["host"] == "host-a" for p in listed), listed
        text = a.cli("fleet", "processes").stdout
        assert "host-b\t" + ALPHA in text, text
        held = claims(a)
        assert [(c["host"], c["app"], c["intent"], c["live"]) for c in held] == [("host-b", ALPHA, "write", True)], held
        status = json.loads(b.cli("status", "--json").stdout)["daemon"]
        assert status.get("fleetHost") == "host-b", status
        assert "app processes on host host-b: " in b.cli("status").stdout
        privacy = a.cli("privacy", ALPHA).stdout
        assert f"live: {ALPHA} pid " in privacy and " on host host-b" in privacy, privacy
    finally:
        holder.kill()
    # The killed holder's claim ends with it, not with B's daemon: it made
    # its claim over the control socket, and B drops the rows of ended
    # processes within a look (250 ms).
    deadline = time.time() + 3
    while claims(a) and time.time() < deadline:
        time.sleep(0.1)
    assert claims(a) == [], claims(a)
    # An app process's incident on B is in the fleet's events, naming host-b.
    denied = b.app_json(ALPHA, DENIED_READ, b.prov(ALPHA, LOCAL, "docs/report.txt"), sandbox=True)
    assert denied.get("errno") == "EPERM", denied  # strict scopes: no scope started (SPEC S6)
    deadline, events = time.time() + 10, []
    while time.time() < deadline:
        events = json.loads(a.cli("fleet", "events", "--app", ALPHA, "--limit", "20000", "--json").stdout)
        if any(e["kind"] == "denial" for e in events):
            break
        time.sleep(0.3)
    denials = [e for e in events if e["kind"] == "denial"]
    assert denials and all(e["host"] == "host-b" and e["role"] == HOST_ROLE and e["pid"] for e in denials), events


def test_a_host_role_cannot_delete_or_forge_anothers_claims_or_processes(fleet):
    """Row-level security (SECURITY.md): B's role can neither end A's claim
    nor write one as A's role, nor rewrite A's published processes; a row it
    labels with A's host name is still its own and does not count as A's."""
    a, server = fleet["a"], fleet["server"]
    password = fleet["b_password"]
    holder = a.app_session(ALPHA, HOLD_AND_LISTEN, ITEM, "write", "30", sandbox=True)
    try:
        assert holder.recv()["claim"].get("ok") is True
        mine = [c for c in claims(a) if c["host"] == "host-a"]
        assert len(mine) == 1, claims(a)
        p = server.psql("DELETE FROM claims WHERE host = 'host-a' RETURNING id", role=HOST_ROLE, password=password)
        assert p.returncode == 0 and p.stdout.strip() == "", p  # no row of another role is visible to delete
        p = server.psql("UPDATE claims SET state = 'waiting' RETURNING id", role=HOST_ROLE, password=password)
        assert p.returncode == 0 and p.stdout.strip() == "", p
        forged = [
            "INSERT INTO claims (host, db_role, item, intent, state, app, pid, path)"
            " VALUES ('host-a', 'scopefs_owner', 'p/local/docs/report.txt', 'write', 'held', 'x', 1, 'x')",
            "UPDATE hosts SET processes = '[]' WHERE name = 'host-a'",
            "UPDATE claims SET db_role = 'scopefs_owner'",
        ]
        for sql in forged:
            p = server.psql(sql, role=HOST_ROLE, password=password)
            refused = "permission denied" in p.stderr or "row-level security" in p.stderr
            assert (p.returncode != 0 and refused) or p.stdout.strip() in ("", "UPDATE 0"), (sql, p)
        assert [c["id"] for c in claims(a) if c["host"] == "host-a"] == [mine[0]["id"]], claims(a)
        # A row B's role labels "host-a" is B's, never live as A's: it blocks nobody.
        p = server.psql(
            "INSERT INTO claims (host, item, intent, state, app, pid, path)"
            " VALUES ('host-a', 'p/local/docs/other.txt', 'write', 'held', 'x', 1, 'x') RETURNING db_role",
            role=HOST_ROLE,
            password=password,
        )
        assert p.returncode == 0 and p.stdout.strip() == HOST_ROLE, p
        assert [c["live"] for c in claims(a) if c["item"] == "p/local/docs/other.txt"] == [False], claims(a)
    finally:
        holder.kill()
        server.psql("DELETE FROM claims WHERE item = 'p/local/docs/other.txt'")


def test_a_killed_hosts_claims_end_with_its_lease(fleet):
    """kill -9 of B's daemon while B's app holds a write claim: A's writer
    waits, then is granted once B's lease has run out since its last
    heartbeat (SPEC S44), not before."""
    a, b, link = fleet["a"], fleet["b"], fleet["link"]
    holder = b.app_session(ALPHA, HOLD_AND_LISTEN, ITEM, "write", "60", sandbox=True)
    try:
        assert holder.recv()["claim"].get("ok") is True
        killed_at = time.time()
        b.kill_daemon()
        got = claim(a, 20)
    finally:
        holder.kill()
    assert got["answer"].get("ok") is True, got
    waited = got["answered"] - killed_at
    # Its last heartbeat was at most a beat (lease/3) before the kill.
    assert LEASE - LEASE / 3 - 0.5 <= waited <= LEASE + SLACK, (waited, got)
    subprocess.run(["fusermount3", "-u", "-z", str(b.mnt)], capture_output=True, timeout=30)
    mount(b, link)
    assert mount_count(b.mnt) == 1


def test_a_host_role_cannot_grow_the_fleets_tables_without_bound(fleet):
    """SPEC S40, S44 (SECURITY.md): a compromised host speaks SQL with its
    role's rights, not ScopeFS's 50 incidents a batch. The server bounds
    what it can make the shared tables hold: its events are cut to the
    newest 10,000, its claims stop at 4,096 and its host rows at 4, each
    refused with a clear error; other roles' rows are untouched."""
    a, server, password = fleet["a"], fleet["server"], fleet["b_password"]

    def as_b(sql):
        return server.psql(sql, role=HOST_ROLE, password=password)

    def count(table):
        return int(server.psql(f"SELECT count(*) FROM {table} WHERE db_role = '{HOST_ROLE}'").stdout)

    owners_before = int(server.psql(f"SELECT count(*) FROM events WHERE db_role <> '{HOST_ROLE}'").stdout)
    try:
        flood = as_b(
            "INSERT INTO events (time, host, kind, app, pid, path, operation, errno)"
            " SELECT extract(epoch from now()), 'host-b', 'denial', 'x', 1, 'p', 'read', 1"
            " FROM generate_series(1, 12000)"
        )
        assert flood.returncode == 0, describe(flood)
        assert count("events") <= 10_000 + 100, "the newest 10,000 and at most one pruning's worth"
        newest = server.psql(f"SELECT max(id) FROM events WHERE db_role = '{HOST_ROLE}'").stdout.strip()
        assert newest and int(newest) > 0, "the newest rows stay"
        claims_flood = as_b(
            "INSERT INTO claims (host, item, intent, state, app, pid, path)"
            " SELECT 'host-b', 'p/local/x' || n, 'read', 'waiting', 'x', 1, 'x' FROM generate_series(1, 5000) n"
        )
        assert claims_flood.returncode != 0 and "4096 rows in claims" in claims_flood.stderr, describe(claims_flood)
        assert count("claims") < 4096
        hosts_flood = as_b(
            "INSERT INTO hosts (name, last_seen, version, lease)"
            " SELECT 'forged-' || n, 0, 0, 1 FROM generate_series(1, 10) n"
        )
        assert hosts_flood.returncode != 0 and "rows in hosts" in hosts_flood.stderr, describe(hosts_flood)
        huge = as_b("UPDATE hosts SET processes = repeat('x', 2000000) WHERE db_role = current_user")
        assert huge.returncode != 0 and "hosts_sizes" in huge.stderr, describe(huge)
        owners_after = int(server.psql(f"SELECT count(*) FROM events WHERE db_role <> '{HOST_ROLE}'").stdout)
        assert owners_after >= owners_before, "no other role's events are pruned"
    finally:
        server.psql(f"DELETE FROM events WHERE db_role = '{HOST_ROLE}' AND app = 'x'")
        server.psql(f"DELETE FROM claims WHERE db_role = '{HOST_ROLE}' AND app = 'x'")
    # B's daemon still beats and answers: its own host row is intact.
    assert "host-b" in a.cli("fleet", "hosts").stdout
