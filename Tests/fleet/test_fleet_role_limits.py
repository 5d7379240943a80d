"""What a host's database role may make the server hold beyond the
fleet's tables (issue 46, finding 5e; SPEC S40, S44; SECURITY.md, "A
fleet of hosts"): no temporary tables (one host role made 223 MB of
them), temporary files bounded by `temp_file_limit` (sorts and hashes
that spill), which it cannot raise, and a `CONNECTION LIMIT`. No mount
is needed: the owner's host makes the role, the test speaks SQL as it."""

from __future__ import annotations

import time

import pytest
from fleet_hosts import add_host_role, init_owner_host
from postgres_server import PostgresServer
from scopefs_harness import Env, describe

ROLE = "scopefs_host_t"
TEMP_FILE_LIMIT = "256MB"  # FleetRepository.hostTempFileLimit
CONNECTION_LIMIT = 32  # FleetRepository.hostConnectionLimit


@pytest.fixture(scope="module")
def world():
    server = PostgresServer()
    owner = Env()
    try:
        init_owner_host(owner, server, 3.0)
        password = add_host_role(owner, owner, ROLE, "host-t").read_text().strip()
        yield owner, server, password
    finally:
        problems = owner.teardown()
        server.close()
        assert not problems, problems


def test_a_host_role_cannot_create_temporary_tables(world):
    _, server, password = world
    p = server.psql("CREATE TEMP TABLE planted AS SELECT g FROM generate_series(1, 10) g", role=ROLE, password=password)
    assert p.returncode != 0 and "permission denied to create temporary tables" in p.stderr, describe(p)
    p = server.psql("SELECT has_database_privilege(current_database(), 'TEMPORARY')", role=ROLE, password=password)
    assert p.returncode == 0 and p.stdout.strip() == "f", describe(p)
    # The owner's role, which owns the database, keeps them.
    assert server.psql("CREATE TEMP TABLE mine (x int)").returncode == 0


def test_a_host_roles_temporary_files_are_bounded_and_it_cannot_lift_the_bound(world):
    _, server, password = world
    p = server.psql("SHOW temp_file_limit", role=ROLE, password=password)
    assert p.returncode == 0 and p.stdout.strip() == TEMP_FILE_LIMIT, describe(p)
    for sql in ("SET temp_file_limit = -1", "ALTER ROLE CURRENT_USER RESET temp_file_limit"):
        p = server.psql(sql, role=ROLE, password=password)
        assert p.returncode != 0 and "permission denied" in p.stderr, (sql, describe(p))
    # A sort that spills more than the bound is stopped by the server.
    started = time.monotonic()
    p = server.psql(
        "SET work_mem = '64kB'; SELECT count(*) FROM"
        " (SELECT g, md5(g::text) FROM generate_series(1, 6000000) g ORDER BY 2) s",
        role=ROLE,
        password=password,
    )
    print(f"the spilling sort ended after {time.monotonic() - started:.1f} s: {p.stderr.strip()[:120]}")
    assert p.returncode != 0 and "temp_file_limit" in p.stderr, describe(p)


def test_a_host_role_has_a_connection_limit(world):
    _, server, password = world
    p = server.psql(f"SELECT rolconnlimit FROM pg_roles WHERE rolname = '{ROLE}'")
    assert p.returncode == 0 and int(p.stdout) == CONNECTION_LIMIT, describe(p)
    # `fleet add-host` again (a new password) keeps the bounds.
    owner, server, _ = world
    again = add_host_role(owner, owner, ROLE, "host-t")
    p = server.psql(f"SELECT rolconnlimit, rolconfig FROM pg_roles WHERE rolname = '{ROLE}'")
    assert p.stdout.startswith(f"{CONNECTION_LIMIT}|") and "temp_file_limit" in p.stdout, describe(p)
    p = server.psql("SELECT 1", role=ROLE, password=again.read_text().strip())
    assert p.returncode == 0, describe(p)
