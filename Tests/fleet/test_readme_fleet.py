"""The README's "Many machines" block runs as printed (issue 31), against
a real PostgreSQL server on the port it names (5433: Debian's package may
start its own cluster on 5432 when `make deps` installs it), as a new user
pastes it."""

from __future__ import annotations

import os
import socket

import pytest
from doc_blocks import fleet_block, run_as_a_new_user
from postgres_server import PostgresServer
from scopefs_harness import describe


def test_readme_fleet_block_runs_verbatim(tmp_path):
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 5433)) == 0:
            pytest.fail("port 5433 is taken: the README's block names it")
    server = PostgresServer(port=5433)
    try:
        home = tmp_path / "home"
        secret = home / ".config" / "scopefs" / "fleet-owner.pw"
        secret.parent.mkdir(parents=True)
        secret.write_text(server.owner_password + "\n")
        os.chmod(secret, 0o600)
        p = run_as_a_new_user(tmp_path, fleet_block(), home_ready=True)
    finally:
        server.close()
    assert p.returncode == 0, describe(p)
    out = p.stdout
    assert out.count("Q3 plan") == 1 and "revoked on every host" in out, describe(p)
    assert "laptop" in out and "revoke" in out, describe(p)
