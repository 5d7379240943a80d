"""Bounded resources: the daemon never runs out of descriptors, and the
owner is always answered (issue 29; SPEC S40, S30, S14, S15).

Every test runs on the default mount (strict scopes) with app processes in
the default sandbox, as users run them.

- An accept error on the owner's control socket (the daemon driven to
  EMFILE by lowering its limit from outside with `prlimit`) is retried, and
  the socket keeps serving `status`, `revoke` and `restore` (finding 4).
"""

from __future__ import annotations

import os
import subprocess

import pytest
from doc_scope_helpers import mount
from scopefs_harness import ALPHA, LOCAL, describe

# -- helpers -------------------------------------------------------------------


def descriptor_limits(pid: int) -> tuple[int, int]:
    """(soft, hard) RLIMIT_NOFILE of pid, from /proc/PID/limits."""
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError(f"no 'Max open files' in /proc/{pid}/limits")


def set_descriptor_limit(pid: int, soft: int, hard: int) -> None:
    p = subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={soft}:{hard}"], capture_output=True, timeout=10)
    assert p.returncode == 0, "prlimit failed\n" + describe(p)


def lowest_free_descriptor(pid: int) -> int:
    """The number the daemon's next descriptor would get: a soft limit of
    this number makes every new descriptor fail with EMFILE."""
    used = {int(name) for name in os.listdir(f"/proc/{pid}/fd")}
    free = 0
    while free in used:
        free += 1
    return free


def owner_cli(env, *args, timeout: float = 20) -> subprocess.CompletedProcess | None:
    """A CLI command of the owner; None when it did not return in time."""
    try:
        return subprocess.run(env.cli_argv(*args), env=env.base_env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def answered(p: subprocess.CompletedProcess | None) -> bool:
    return p is not None and p.returncode == 0


# An app process that starts accessing a granted folder, then on each line
# from the test reads one file in it and reports the outcome.
READ_ON_REQUEST = r"""
folder, name = sys.argv[1], sys.argv[2]
os.setxattr(folder, "user.scopefs.start", b"")
while True:
    step(attempt(read_bytes, os.path.join(folder, name)))
"""

# -- finding 4: the owner's control socket survives accept errors ---------------


@pytest.mark.scopefs_timeout(180)
def test_owner_socket_serves_after_accept_fails_with_emfile(env):
    """SPEC S40: "An error on the control socket's accept is retried, never
    fatal; owner requests have their own reserve." The daemon is driven to
    EMFILE from outside (`prlimit` lowers its soft limit to its lowest free
    descriptor); `status` asked then must be answered from the reserve, and
    once the limit is back `status`, `revoke` and `restore` must be answered
    and take effect (SPEC S14, S15, S30)."""
    grant = env.grant(ALPHA, f"{LOCAL}:docs")
    mount(env, "strict")
    folder = env.prov(ALPHA, LOCAL, "docs")
    reader = env.app_session(ALPHA, READ_ON_REQUEST, folder, "report.txt", sandbox=True)
    assert reader.recv() == "OK"

    pid = env.daemon_pid()
    soft, hard = descriptor_limits(pid)
    set_descriptor_limit(pid, lowest_free_descriptor(pid), hard)
    try:
        under_limit = owner_cli(env, "status", "--json", timeout=15)
    finally:
        set_descriptor_limit(pid, soft, hard)

    after = {"status": owner_cli(env, "status", "--json")}
    after["revoke"] = owner_cli(env, "revoke", ALPHA, grant)
    reader.send()
    read_revoked = reader.recv()
    after["restore"] = owner_cli(env, "restore", ALPHA, grant)
    reader.send()
    read_restored = reader.recv()
    reader.kill()

    log = env.state / "daemon.log"
    logged = log.read_text(errors="replace") if log.exists() else ""
    assert "accept failed" in logged, "the lowered limit made no accept fail; the test injected nothing"
    unanswered = [name for name, p in after.items() if not answered(p)]
    assert not unanswered, (
        f"after one EMFILE on accept the owner's socket no longer answers {unanswered}: "
        + "; ".join(f"{name}: {'timed out' if p is None else describe(p)}" for name, p in after.items())
    )
    assert (read_revoked, read_restored) == ("EPERM", "OK"), (read_revoked, read_restored)
    assert answered(under_limit), "`status` asked while the daemon was at its descriptor limit got no answer: " + (
        "timed out" if under_limit is None else describe(under_limit)
    )
