"""The portal's layout reads the policy version the daemon serving the
state directory publishes (`STATE/served-policy`, issue 52), instead of
asking the daemon or the store before each lookup, open, read and write
(SPEC S36: no query on the hot path), and stays exact where the daemon
cannot vouch for the store: a revoke that returned cuts the next read
through the layout, open descriptors included (S13, S14), whether it went
through the daemon, past a live daemon the CLI could not reach, or after
the daemon died; while the daemon fails closed the layout denies every
document, as the mount does (S44's rule, issue 15). SPEC S45.
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

import pytest
from scopefs_harness import ALPHA, LOCAL, ON_THE_FILE, REPORT_BYTES, wait_for
from test_portal import Portal, SessionBus

REPORT = "docs/report.txt"


@pytest.fixture
def portal(env):
    bus = SessionBus(env.root)
    (env.root / "doc").mkdir()
    served = Portal(env, bus, env.root / "doc")
    yield served
    served.stop()
    bus.stop()


def layout_file(env, portal) -> Path:
    """REPORT exported to ALPHA; its file under `by-app/ALPHA/DOC_ID/`."""
    exported = portal.flatpak("document-export", "--app", ALPHA, env.backing(LOCAL) / REPORT).stdout.strip()
    return portal.mountpoint / "by-app" / ALPHA / Path(exported).parent.name / "report.txt"


def round_trip(path: Path) -> bytes:
    """What the bench times: a stat, an open and a 4 KiB read."""
    os.stat(path)
    with open(path, "rb", buffering=0) as f:
        return f.read(4096)


def pread_errno(fd: int) -> str:
    try:
        os.pread(fd, 16, 0)
        return "ok"
    except OSError as error:
        return errno.errorcode[error.errno]


def stat_errno(path: Path) -> str:
    try:
        os.stat(path)
        return "ok"
    except OSError as error:
        return errno.errorcode[error.errno]


def test_layout_checks_reads_without_asking_the_daemon(env, portal):
    """S36, S45: with the daemon stopped (SIGSTOP: it answers nothing, its
    page stays its own), reads through the layout go on at once, checked
    against the version it published. The layout used to ask the daemon
    (`servedPolicy`) before each check on a fleet: it waited 5 s for the
    answer that never came, and then refused the read."""
    env.mount()
    path = layout_file(env, portal)
    assert round_trip(path) == REPORT_BYTES[:4096]  # this process is known to the portal now
    pid = env.daemon_pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        for _ in range(5):
            assert round_trip(path) == REPORT_BYTES[:4096]
    finally:
        os.kill(pid, signal.SIGCONT)


def test_layout_descriptor_is_cut_by_a_revoke_through_the_daemon(env, portal):
    """S13, S14: with a daemon serving, `scopefs revoke` goes through it;
    once it returns, the next read of a descriptor opened under by-app/APP
    fails with EPERM and the file is gone from the layout; after `scopefs
    restore` it opens again."""
    env.mount()
    path = layout_file(env, portal)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert os.pread(fd, 16, 0) == REPORT_BYTES[:16]
        env.cli("revoke", ALPHA, f"{LOCAL}:{REPORT}")
        assert pread_errno(fd) == "EPERM"
        assert stat_errno(path) == "ENOENT"
    finally:
        os.close(fd)
    env.cli("restore", ALPHA, f"{LOCAL}:{REPORT}")
    assert round_trip(path) == REPORT_BYTES[:4096]


def test_a_revoke_written_past_a_live_daemon_cuts_the_layout(env, portal):
    """S14: a CLI that cannot reach the daemon (here its socket is moved
    away; under load a connection can fail too) writes the revoke to the
    store itself. The daemon's page still names the version before it, but
    counts the write, and the layout asks the store: the next read is EPERM
    at once, not at the daemon's next look at the store."""
    env.mount()
    path = layout_file(env, portal)
    fd = os.open(path, os.O_RDONLY)
    socket = env.state / "control.sock"
    moved = env.state / "control.sock.away"
    try:
        assert os.pread(fd, 16, 0) == REPORT_BYTES[:16]
        socket.rename(moved)
        try:
            env.cli("revoke", ALPHA, f"{LOCAL}:{REPORT}")
            assert pread_errno(fd) == "EPERM"
        finally:
            moved.rename(socket)
    finally:
        os.close(fd)


def test_a_revoke_after_the_daemon_died_cuts_the_layout(env, portal):
    """S14: the daemon killed (SIGKILL), `scopefs revoke` writes the store;
    the page nobody holds any more vouches for nothing, and the next read
    of a layout descriptor is EPERM."""
    env.mount()
    path = layout_file(env, portal)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert os.pread(fd, 16, 0) == REPORT_BYTES[:16]
        env.kill_daemon()
        env.cli("revoke", ALPHA, f"{LOCAL}:{REPORT}")
        assert pread_errno(fd) == "EPERM"
    finally:
        os.close(fd)
    env.mount()  # over the dead mount (S34), so teardown unmounts as usual


@pytest.mark.sqlite_store(ON_THE_FILE)
def test_layout_denies_every_document_while_the_daemon_fails_closed(env, portal):
    """Issue 15, S14: the database deleted under a running mount, the daemon
    serves every grant as revoked; the layout follows it: the document is
    gone (ENOENT, as with no grant) and a descriptor opened before reads
    EPERM. (It used to go on reading the deleted file's grants.)"""
    env.mount()
    path = layout_file(env, portal)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert os.pread(fd, 16, 0) == REPORT_BYTES[:16]
        (env.state / "scopefs.sqlite").unlink()
        wait_for("the layout to deny the document", lambda: stat_errno(path), lambda seen: seen != "ok", timeout=3)
        assert stat_errno(path) == "ENOENT"
        assert pread_errno(fd) == "EPERM"
    finally:
        os.close(fd)
