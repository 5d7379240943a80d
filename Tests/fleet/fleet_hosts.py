"""Hosts of a fleet on one machine, for Tests/fleet (SPEC S44): the
owner's host on loopback, other hosts joining with roles of their own,
host B's daemon inside its network namespace."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from netns_link import Link
from postgres_server import PostgresServer
from scopefs_harness import ALPHA, LOCAL, MOUNT_TIMEOUT, Env, describe, run_bounded


def init_owner_host(a: Env, server: PostgresServer, lease: float) -> None:
    """Host A: the owner's role, the migrations, the provider and the app."""
    a.cli(
        "init", "--database", server.url(), "--password-file", server.password_file,
        "--host-name", "host-a", "--lease", lease,
    )  # fmt: skip
    a._make_backing_tree()
    a.cli("fleet", "add-provider", LOCAL, a.backing(LOCAL))
    a.cli("fleet", "add-app", ALPHA)


def add_host_role(owner: Env, host: Env, role: str, name: str) -> Path:
    """The owner creates ROLE for HOST; returns its password file (0600)."""
    password = host.root / "host.pw"
    password.write_text(f"{name}-" + os.urandom(8).hex() + "\n")
    os.chmod(password, 0o600)
    owner.cli("fleet", "add-host", role, "--password-file", password)
    return password


def join_over_link(host: Env, server: PostgresServer, link: Link, role: str, name: str, lease: float) -> str:
    """`init --database` for a host reaching the server over LINK with TLS
    (sslmode=require); returns its role's password."""
    password = host.root / "host.pw"
    host.cli(
        "init", "--database", server.url(role, link.host_address, "require"), "--password-file", password,
        "--host-name", name, "--lease", lease,
    )  # fmt: skip
    return password.read_text().strip()


def mount(host: Env, link: Link | None = None, fleet_options: list[str] = ()) -> None:
    """`scopefs mount` in the default strict mode; a linked host's daemon inside its namespace."""
    argv = host.cli_argv("mount", host.mnt, *fleet_options)
    if link is not None:
        argv = ["nsenter", f"--net=/run/netns/{link.namespace}", "--", *argv]
    p = run_bounded(argv, MOUNT_TIMEOUT, host.base_env, out_dir=host.root, what="scopefs mount")
    assert p.returncode == 0, describe(p)
    host.mounted = True
    host._record_daemon()


def keep_daemon_logs(folder: Path, hosts: dict[str, Env]) -> None:
    for name, host in hosts.items():
        log = host.state / "daemon.log"
        if log.exists():
            shutil.copy(log, folder / f"{name}.log")
