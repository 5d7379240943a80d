"""`scopefs fleet grant APP --from FILE` (issue 34, SPEC S44): many grants
in one transaction of the fleet's store, on a real PostgreSQL server. Host A
is the owner's (its role may grant), host C joins with a host role; both
mount (default strict scopes) and run their apps in the default sandbox.
The whole list reaches an app reading on C; a bad line anywhere grants
nothing and names the line (S34); a host role and an app process are
refused (77)."""

from __future__ import annotations

import json

import pytest
from fleet_hosts import add_host_role, mount
from postgres_server import PostgresServer
from scopefs_harness import ALPHA, LOCAL, Env, describe
from test_fleet import PROPAGATION_BOUND, app_reader

HOST_ROLE = "scopefs_host_c"
FILES = 200
MANY = 10_000  # an app's grants in issue 34's benchmark (100 apps x 10,000)

GRANT_INSIDE = """
import subprocess
binary, state, app, listed = sys.argv[1:5]
p = subprocess.run([binary, "--state", state, "fleet", "grant", app, "--from", listed],
                   capture_output=True, text=True, timeout=60)
emit([p.returncode, p.stderr.strip()[-300:]])
"""


@pytest.fixture(scope="module")
def bulk_fleet():
    server = PostgresServer()
    a, c = Env(), Env()
    for host in (a, c):
        host.base_env["SCOPEFS_FLEET_TIMEOUT"] = "1"  # as test_fleet.py's hosts
    try:
        a.cli(
            "init", "--database", server.url(), "--password-file", server.password_file, "--host-name", "host-a",
        )  # fmt: skip
        a._make_backing_tree()
        for index in range(FILES):
            (a.backing(LOCAL) / "bulk" / f"f{index:03}.txt").parent.mkdir(exist_ok=True)
            (a.backing(LOCAL) / "bulk" / f"f{index:03}.txt").write_bytes(b"bulk %d\n" % index)
        a.cli("fleet", "add-provider", LOCAL, a.backing(LOCAL))
        a.cli("fleet", "add-app", ALPHA)
        password = add_host_role(a, c, HOST_ROLE, "host-c")
        mount(a)
        mount(c, fleet_options=["--database", server.url(HOST_ROLE), "--password-file", password,
                                "--host-name", "host-c"])  # fmt: skip
        yield {"a": a, "c": c, "server": server}
    finally:
        problems = a.teardown() + c.teardown()
        server.close()
        assert not problems, problems


def fleet_grants(host: Env) -> list[dict]:
    return json.loads(host.cli("fleet", "grants", ALPHA, "--json").stdout)


def test_a_list_reaches_the_other_host_in_one_change(bulk_fleet):
    """200 items in one `fleet grant --from`: all stored, read-only by
    default, each with its grant event naming host A; an app reading one
    of them on host C sees it granted within the propagation bound."""
    a, c = bulk_fleet["a"], bulk_fleet["c"]
    target = c.prov(ALPHA, LOCAL, "bulk/f123.txt")
    reader = app_reader(c, target, seconds=60)
    try:
        reader.wait_for("ENOENT", 20)  # not granted: not even there (SPEC S2)
        listed = a.root / "items.txt"
        listed.write_text("".join(f"{LOCAL}:bulk/f{index:03}.txt\n" for index in range(FILES)))
        p = a.cli("fleet", "grant", ALPHA, "--from", listed)
        assert f"{FILES} grants" in p.stdout and "on every host" in p.stdout, describe(p)
        reader.wait_for("ok", PROPAGATION_BOUND + 3)
    finally:
        reader.close()
    grants = fleet_grants(a)
    assert sorted(g["relativePath"] for g in grants) == [f"bulk/f{index:03}.txt" for index in range(FILES)], grants
    assert all(g["access"] == "read" and g["state"] == "active" for g in grants)
    events = json.loads(c.cli("fleet", "events", "--app", ALPHA, "--limit", "1000", "--json").stdout)
    granted = {e["grant"] for e in events if e["kind"] == "grant" and e["host"] == "host-a"}
    assert {g["id"] for g in grants} <= granted, events


def test_a_bad_line_grants_nothing_on_any_host(bulk_fleet):
    """All or nothing (SPEC S34): a missing item on line 3 is exit 66 and
    a line without a provider 65, each naming its line; no item of the
    list is granted, and the policy version does not move."""
    a = bulk_fleet["a"]
    before = fleet_grants(a)
    version = bulk_fleet["server"].psql("SELECT version FROM policy_version").stdout.strip()
    listed = a.root / "bad.txt"
    listed.write_text(f"{LOCAL}:docs/report.txt\n{LOCAL}:deep/a/b\n{LOCAL}:docs/missing.txt\n{LOCAL}:photos/p.jpg\n")
    p = a.cli("fleet", "grant", ALPHA, "--from", listed, "--read-write", expect=66)
    assert "bad.txt line 3: " in p.stderr and "nothing was granted" in p.stderr, describe(p)
    listed.write_text(f"{LOCAL}:docs/report.txt\njust a path\n")
    p = a.cli("fleet", "grant", ALPHA, "--from", listed, expect=65)
    assert "bad.txt line 2: expected PROVIDER:RELPATH" in p.stderr, describe(p)
    assert fleet_grants(a) == before
    assert bulk_fleet["server"].psql("SELECT version FROM policy_version").stdout.strip() == version


def test_a_host_role_and_an_app_process_cannot_grant_from_a_list(bulk_fleet):
    """Least rights (SECURITY.md): host C's role may not grant (77); inside
    an app process on host A the command is refused (77, SPEC S5)."""
    a, c = bulk_fleet["a"], bulk_fleet["c"]
    before = fleet_grants(a)
    listed = c.root / "items.txt"
    listed.write_text(f"{LOCAL}:docs/report.txt\n")
    listed.chmod(0o644)
    p = c.cli("fleet", "grant", ALPHA, "--from", listed, expect=77)
    assert "permission denied" in p.stderr, describe(p)
    code, message = a.app_json(ALPHA, GRANT_INSIDE, a.bin, a.state, ALPHA, listed)
    assert code == 77 and "app process" in message, (code, message)
    assert fleet_grants(a) == before


def test_revoking_all_of_an_app_s_many_grants_is_one_change(bulk_fleet):
    """Issue 34: revoking and restoring all 10,000 grants of an app each
    succeed within a call's timeout, every grant changed and each with its
    event. (A statement per grant outlasted the 1 s timeout: exit 74.)"""
    a, c = bulk_fleet["a"], bulk_fleet["c"]
    many = "com.example.many"
    a.cli("fleet", "add-app", many)
    folder = a.backing(LOCAL) / "many"
    folder.mkdir()
    for index in range(MANY):
        (folder / f"m{index:05}.txt").write_bytes(b"m")
    listed = a.root / "many.txt"
    listed.write_text("".join(f"{LOCAL}:many/m{index:05}.txt\n" for index in range(MANY)))
    a.cli("fleet", "grant", many, "--from", listed)
    p = a.cli("fleet", "revoke", many)
    assert p.stdout.count("revoked on every host") == MANY, describe(p)
    grants = json.loads(c.cli("fleet", "grants", many, "--json").stdout)
    assert len(grants) == MANY and all(g["state"] == "revoked" for g in grants)
    p = a.cli("fleet", "restore", many)
    assert p.stdout.count("restored on every host") == MANY, describe(p)
    events = json.loads(a.cli("fleet", "events", "--app", many, "--limit", "100000", "--json").stdout)
    assert sum(e["kind"] == "revoke" for e in events) == MANY and sum(e["kind"] == "restore" for e in events) == MANY
