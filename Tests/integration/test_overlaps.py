"""A mount and the folders its daemon reads never overlap, and `unmount`
never waits for good (issue 50, finding 1; SPEC S34: a clear error and a
documented exit code, never a hang).

Mounting on a provider's folder (or above it, or above the state
directory) made the daemon wait on its own mount before its loop ran:
`mount` gave up after 20 s with the mount left in place, and `unmount`
then hung in a stat of the mount's root. Adding a provider whose folder
is inside a mount, or holds it, is the same mistake from the other side.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from scopefs_harness import DRIVE, LOCAL, MOUNT_TIMEOUT, describe, mount_count, wait_for, wait_for_exit

# A refusal is up front: it takes what a CLI call takes, not a readiness timeout.
REFUSAL_SECONDS = 10


def end_daemons_of(env) -> None:
    """Cleanup for a binary that wedged anyway (the old one): SIGKILL the
    daemons this test started on its state directory (found by their
    command line), then detach what they left mounted."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            command = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"mount" in command and str(env.state).encode() in command:
            os.kill(int(pid), signal.SIGCONT)
            os.kill(int(pid), signal.SIGKILL)
            wait_for_exit(int(pid), 10)
    for path in (env.backing(LOCAL), env.backing(LOCAL) / "work", env.root / "backing", env.state):
        if mount_count(path):
            subprocess.run(["fusermount3", "-uz", str(path)], capture_output=True, timeout=20)


def refused(env, *args) -> subprocess.CompletedProcess:
    started = time.monotonic()
    p = env.cli(*args, expect=None, timeout=MOUNT_TIMEOUT + 10)
    took = time.monotonic() - started
    assert p.returncode == 73, "want exit 73 (CLI.md: cannot create)\n" + describe(p)
    assert took < REFUSAL_SECONDS, f"the refusal took {took:.1f} s\n" + describe(p)
    return p


def test_a_mount_on_or_around_a_providers_folder_or_the_state_is_refused_up_front(env):
    """Issue 50.1, SPEC S34: the mountpoint is a provider's folder, inside
    it, above it, or the state directory: exit 73 at once, a sentence that
    names both paths, nothing mounted; then the right mountpoint works."""
    cases = [
        (env.backing(LOCAL), "is the folder of provider local", env.backing(LOCAL)),
        (env.backing(LOCAL) / "work", "is inside the folder of provider local", env.backing(LOCAL)),
        (env.root / "backing", "is above the folder of provider drive", env.backing(DRIVE)),
        (env.state, "is the state directory", env.state),
    ]
    try:
        for mountpoint, how, other in cases:
            p = refused(env, "mount", mountpoint)
            assert f"the mountpoint {mountpoint} {how}, {other}:" in p.stderr, describe(p)
            assert not mount_count(mountpoint), f"a refused mount stayed at {mountpoint}"
    finally:
        end_daemons_of(env)
    env.mount()


def test_a_provider_folder_inside_or_above_a_mount_is_refused(env):
    """Issue 50.1: with the mount in place, `provider add` of a folder inside
    it or above it is refused with exit 73, naming both; nothing is stored."""
    env.mount()
    inside = refused(env, "provider", "add", "inner", env.mnt / "com.example.alpha")
    assert f"the folder of provider inner, {env.mnt}/com.example.alpha, is inside the ScopeFS mount {env.mnt}" in (
        inside.stderr
    ), describe(inside)
    above = refused(env, "provider", "add", "outer", env.root)
    assert f"the folder of provider outer, {env.root}, is above the ScopeFS mount {env.mnt}" in above.stderr, describe(
        above
    )
    listed = env.cli("provider", "list").stdout
    assert "inner" not in listed and "outer" not in listed, listed


def test_unmount_ends_a_daemon_that_does_not_answer_and_says_so(env):
    """Issue 50.1, SPEC S34: `unmount` of a mount whose daemon answers
    nothing (stopped here, as a wedged one is) returns within its timeout
    and a few seconds: the mount is gone, the daemon ended, and standard
    error says what was done."""
    env.mount()
    pid = env.daemon.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        p = env.cli("unmount", env.mnt, "--timeout", "1", expect=None, timeout=30)
        took = time.monotonic() - started
    finally:
        if os.path.exists(f"/proc/{pid}"):
            os.kill(pid, signal.SIGCONT)
    assert p.returncode == 0, describe(p)
    assert f"daemon {pid} did not exit within 1.0 s of the unmount of {env.mnt}; ending it" in p.stderr, describe(p)
    assert took < 15, f"unmount took {took:.1f} s"
    assert not mount_count(env.mnt), "the mount is still there"
    wait_for("the daemon to be gone", lambda: wait_for_exit(pid, 0)[0], lambda how: how != "alive")
    env.daemon, env.mounted = None, False


def test_a_mount_that_gives_up_waiting_says_how_to_end_its_daemon(env):
    """Issue 50.1: `mount` that stops waiting for readiness (here at once,
    --timeout 0) exits 75 and says that the daemon still runs and which
    `unmount` ends it; that command does."""
    p = env.cli("mount", env.mnt, "--timeout", "0", expect=75)
    hint = f"`scopefs --state {env.state} unmount {env.mnt}` ends it"
    assert "still runs" in p.stderr and hint in p.stderr, describe(p)
    env.mounted = True
    wait_for("the daemon ready", lambda: env.cli("status", expect=None).returncode == 0, timeout=20)
    env._record_daemon()
    env.cli("unmount", env.mnt)
    assert not mount_count(env.mnt)
    env.mounted = False
