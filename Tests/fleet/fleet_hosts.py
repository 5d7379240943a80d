"""Hosts of a fleet on one machine, for Tests/fleet (SPEC S44): the
owner's host on loopback, other hosts joining with roles of their own,
host B's daemon inside its network namespace."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from netns_link import Link
from postgres_server import PostgresServer
from scopefs_harness import ALPHA, LOCAL, MOUNT_TIMEOUT, Env, describe, run_bounded

# App snippets of the coordination tests (docs/API.md `coordinate`), run by
# `Env.app_json` / `app_session` on any host.
ASK = """
import socket
def ask(request, timeout=60):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(os.path.join(os.environ["SCOPEFS_STATE"], "control.sock"))
    s.sendall(json.dumps(request).encode() + b"\\n")
    line = s.makefile().readline()
    s.close()
    return json.loads(line)
"""

# Claims PATH with INTENT, reports, and once told to go on listens for
# notices until `relinquish` (or LISTEN seconds), then releases and reports
# what it heard.
HOLD_AND_LISTEN = (
    ASK
    + """
import time
path, intent, listen = sys.argv[1], sys.argv[2], float(sys.argv[3])
cursor = ask({"op": "watch"})["cursor"]
claim = ask({"op": "coordinate", "path": path, "intent": intent, "waitSeconds": 5})
step({"claim": claim})
cursor = ask({"op": "watch"})["cursor"]  # only what comes after the test's go
heard = []
deadline = time.time() + listen
while time.time() < deadline and not any(n["kind"] == "relinquish" for n in heard):
    got = ask({"op": "watch", "after": cursor, "waitSeconds": 1})
    cursor = got["cursor"]
    heard += [{"kind": n["kind"], "path": n["path"], "t": time.time()} for n in got["notices"]]
released = time.time()
ask({"op": "release", "claim": claim["claim"]})
emit({"heard": heard, "released": released})
"""
)

# Claims PATH for writing, waiting up to WAIT seconds; reports the answer.
CLAIM = (
    ASK
    + """
import time
started = time.time()
answer = ask({"op": "coordinate", "path": sys.argv[1], "intent": "write", "waitSeconds": float(sys.argv[2])})
emit({"answer": answer, "started": started, "answered": time.time()})
"""
)


# Host B's database role in `two_hosts`.
B_ROLE = "scopefs_host_b"


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


@contextmanager
def two_hosts(
    logs: Path, lease: float, environ: dict[str, str], owner_setup: Callable[[Env], None] = lambda owner: None
) -> Iterator[dict]:
    """Host A (the owner's, on loopback) and host B (in its own network
    namespace, with the host role B_ROLE over TLS), both mounted
    in the default strict mode; OWNER_SETUP runs on A before the mounts.
    Yields {"a", "b", "link", "server", "b_password"}; at the end keeps the
    daemons' logs in LOGS and checks that both tore down cleanly."""
    link = Link()
    server = PostgresServer(extra_addresses=[link.host_address])
    a, b = Env(), Env()
    hosts = {"a": a, "b": b, "link": link, "server": server}
    try:
        for host in (a, b):
            host.base_env.update(environ)
        init_owner_host(a, server, lease)
        owner_setup(a)
        add_host_role(a, b, B_ROLE, "host-b")
        hosts["b_password"] = join_over_link(b, server, link, B_ROLE, "host-b", lease)
        mount(a)
        mount(b, link)
        yield hosts
    finally:
        keep_daemon_logs(logs, {"a": a, "b": b})
        problems = a.teardown() + b.teardown()
        server.close()
        link.close()
        assert not problems, problems
