"""Copies that a `kill -9` cannot leave half-made (issue 15 finding 6).

`scopefs import`, `export` and `move` (SPEC S18, S19, S20) killed in the
middle of copying a large file used to leave `.NAME.scopefs-partial-PID`
in the destination folder — for export and move a provider folder the app
may see through its grant — and a later successful copy did not remove it.
SPEC S34: never lost data (the original, or a `--force` target, is intact)
and nothing left behind: no new entry in the destination folder on the host
or in the app's view, and a later copy works and leaves nothing either.
A folder copy cannot be anonymous: it is staged out of the provider
folder on the destination's file system, and what a killed copy staged is
swept by the next command and by the daemon itself (issue 29 finding 5;
checked by walking the state and the providers)."""

import filecmp
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from doc_scope_helpers import container_host
from scopefs_harness import ALPHA, LOCAL, describe, wait_for

BIG = 256 << 20  # large enough that the copy takes well over the kill latency
KILL_AFTER = 4 << 20  # bytes in the copy when the test kills it


def write_big(path) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for i in range(BIG >> 20):
            f.write(block[:-8] + i.to_bytes(8, "big"))


def copy_in_progress(pid: int) -> str | None:
    """The target of the CLI's descriptor open for writing on a regular file
    that already holds KILL_AFTER bytes (the copy), or None."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                flags = int(next(row for row in f if row.startswith("flags:")).split()[1], 8)
            info = os.stat(f"/proc/{pid}/fd/{fd}")
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except (OSError, StopIteration):
            continue
        if flags & 3 and stat.S_ISREG(info.st_mode) and info.st_size >= KILL_AFTER:
            return target
    return None


def kill_mid_copy(env, *args) -> str:
    """Start `scopefs ARGS`, SIGKILL it once the copy holds KILL_AFTER bytes;
    returns what the copy's descriptor named."""
    proc = subprocess.Popen(
        env.cli_argv(*args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env.base_env,
        start_new_session=True,
    )
    seen = None
    deadline = time.monotonic() + 15
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            seen = copy_in_progress(proc.pid)
            if seen:
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        if proc.poll() is None and not seen:
            os.kill(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=10)
    p = subprocess.CompletedProcess(
        proc.args, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    )
    assert seen and proc.returncode == -signal.SIGKILL, (
        "the copy was not caught in progress (finished too fast?)\n" + describe(p)
    )
    return seen


def host_listing(path) -> list[str] | str:
    try:
        return sorted(os.listdir(path))
    except FileNotFoundError:
        return "ENOENT"


def app_listing(env, path):
    """The app's listing of a folder it was granted, in scope (SPEC S9)."""
    return env.app_json(
        ALPHA, "start_accessing(sys.argv[1])\nemit(outcome(lambda: sorted(os.listdir(sys.argv[1]))))", path
    )


def leftovers(env, name: str) -> list[str]:
    """Every file or folder called NAME or marked partial under the state
    and the providers' backing folders (not the mount)."""
    found = []
    for top in (env.state, env.root / "backing"):
        for dirpath, dirnames, filenames in os.walk(top):
            for entry in dirnames + filenames:
                if entry == name or "scopefs-partial" in entry:
                    found.append(os.path.relpath(os.path.join(dirpath, entry), env.root))
    return sorted(found)


def test_killed_import_leaves_nothing_in_the_inbox(env):
    """S18 + S34: import killed mid-copy: no entry in Container/tmp/<app>-Inbox
    (host and app view); a later import gives exactly the one copy."""
    source = env.backing(LOCAL) / "docs/big.bin"
    write_big(source)
    env.mount()
    inbox_rel = f"tmp/{ALPHA}-Inbox"
    inbox = container_host(env, ALPHA, inbox_rel)
    seen = kill_mid_copy(env, "import", ALPHA, f"{LOCAL}:docs/big.bin")
    assert host_listing(inbox) in ([], "ENOENT"), f"killed import (copy was {seen}) left {host_listing(inbox)}"
    view = app_listing(env, env.container(ALPHA, inbox_rel))
    assert view in ({"ok": []}, {"errno": "ENOENT"}), f"the app sees {view} in its inbox"
    p = env.cli("import", ALPHA, f"{LOCAL}:docs/big.bin")
    assert host_listing(inbox) == ["big.bin"], describe(p)
    assert filecmp.cmp(source, os.path.join(inbox, "big.bin"), shallow=False)
    assert leftovers(env, "big.bin") == sorted(
        [os.path.relpath(source, env.root), os.path.relpath(os.path.join(inbox, "big.bin"), env.root)]
    )


@pytest.mark.parametrize("command", ["export", "move"])
@pytest.mark.parametrize("force", [False, True], ids=["new", "force"])
def test_killed_export_or_move_leaves_the_provider_folder_as_it_was(env, command, force):
    """S19/S20 + S34: export or move killed mid-copy leaves the provider
    folder as it was — on the host and in the app's view through its grant
    on it — with a `--force` target intact and, for move, the original still
    in the container; the same command then succeeds and leaves nothing."""
    env.grant(ALPHA, f"{LOCAL}:work")
    work = env.backing(LOCAL) / "work"
    if force:
        (work / "big.bin").write_bytes(b"original\n")
    source = container_host(env, ALPHA, "Documents/big.bin")
    write_big(source)
    env.mount()
    before_host = host_listing(work)
    before_app = app_listing(env, env.prov(ALPHA, LOCAL, "work"))
    assert before_app == {"ok": before_host}, "the app cannot list its granted folder"
    extra = ["--force"] if force else []
    seen = kill_mid_copy(env, command, ALPHA, "Documents/big.bin", f"{LOCAL}:work", *extra)
    assert host_listing(work) == before_host, (
        f"killed {command} (copy was {seen}) changed the provider folder: {before_host} -> {host_listing(work)}"
    )
    assert app_listing(env, env.prov(ALPHA, LOCAL, "work")) == before_app, "the app's view changed"
    if force:
        assert (work / "big.bin").read_bytes() == b"original\n", "the --force target was damaged"
    assert os.path.getsize(source) == BIG, "the original left the container"
    reference = os.path.join(os.path.dirname(source), "reference.bin")
    os.link(source, reference)  # a second name, to compare after a move
    p = env.cli(command, ALPHA, "Documents/big.bin", f"{LOCAL}:work", *extra)
    assert host_listing(work) == ["big.bin"], describe(p)
    assert filecmp.cmp(reference, work / "big.bin", shallow=False)
    expected = [os.path.relpath(work / "big.bin", env.root)]
    expected.append(os.path.relpath(source, env.root))
    if command == "move":  # Documents/big.bin is now the reference document (S20)
        assert os.path.getsize(source) < 4096, "the moved data is still in the container"
    assert leftovers(env, "big.bin") == sorted(expected)


def test_killed_folder_export_is_swept_by_the_next_command(env):
    """S19 + S34: a folder cannot be copied anonymously; a kill -9 mid-copy
        leaves nothing in the provider folder, and whatever it staged is gone
        once the next command has started (it was staged in the state
    directory, out of every app's sight)."""
    env.grant(ALPHA, f"{LOCAL}:work")
    work = env.backing(LOCAL) / "work"
    write_big(container_host(env, ALPHA, "Documents/album/big.bin"))
    env.mount()
    assert app_listing(env, env.prov(ALPHA, LOCAL, "work")) == {"ok": []}
    seen = kill_mid_copy(env, "export", ALPHA, "Documents/album", f"{LOCAL}:work")
    assert host_listing(work) == [], f"killed folder export (copy was {seen}) left {host_listing(work)}"
    assert app_listing(env, env.prov(ALPHA, LOCAL, "work")) == {"ok": []}
    env.cli("privacy", ALPHA, "--json")
    assert leftovers(env, "big.bin") == [
        os.path.relpath(container_host(env, ALPHA, "Documents/album/big.bin"), env.root)
    ], "the staged copy was not swept"
    env.cli("export", ALPHA, "Documents/album", f"{LOCAL}:work")
    assert host_listing(work) == ["album"]
    assert host_listing(work / "album") == ["big.bin"]


def test_killed_folder_export_to_another_file_system_is_swept(env):
    """S19 + S34: a folder exported to a provider on another file system
    (/dev/shm) cannot be staged in the state directory; what a kill -9 left
    beside the destination is removed when the next command starts."""
    other = Path(tempfile.mkdtemp(prefix="scopefs-it-", dir="/dev/shm"))
    try:
        assert os.stat(other).st_dev != os.stat(env.state).st_dev, "/dev/shm is on the state's file system"
        env.cli("provider", "add", "shm", other, "--name", "Shared memory")
        write_big(container_host(env, ALPHA, "Documents/album/big.bin"))
        env.mount()
        seen = kill_mid_copy(env, "export", ALPHA, "Documents/album", "shm:")
        env.cli("privacy", ALPHA, "--json")
        assert host_listing(other) == [], (
            f"killed export (copy was {seen}) left {host_listing(other)} after the next command"
        )
        env.cli("export", ALPHA, "Documents/album", "shm:")
        assert host_listing(other) == ["album"] and host_listing(other / "album") == ["big.bin"]
    finally:
        shutil.rmtree(other)


@pytest.fixture
def removable_disk():
    """A small tmpfs standing for a disk other than the state's (a USB stick,
    a network share), mounted outside the test's world; unmounted after the
    world (ask for it before `env`)."""
    top = Path(tempfile.mkdtemp(prefix="scopefs-disk-", dir="/tmp"))
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512m,mode=755", "scopefs-disk", str(top)],
        capture_output=True,
        timeout=30,
    )
    if result.returncode != 0:
        top.rmdir()
        pytest.fail(f"cannot mount a tmpfs for the test (needs root): {result.stderr!r}")
    try:
        yield top
    finally:
        if subprocess.run(["umount", str(top)], capture_output=True, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(top)], capture_output=True, timeout=30)
        top.rmdir()


def tree(top) -> list[str]:
    """Every path under TOP, relative to it."""
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        for entry in dirnames + filenames:
            found.append(os.path.relpath(os.path.join(dirpath, entry), top))
    return sorted(found)


APP_WALK = """
start_accessing(sys.argv[1])
found = []
for dirpath, dirnames, filenames in os.walk(sys.argv[1]):
    found += [os.path.relpath(os.path.join(dirpath, e), sys.argv[1]) for e in dirnames + filenames]
emit(sorted(found))
"""

SWEEP_WAIT = 40  # seconds: the daemon sweeps at start and periodically (Tunables)


def test_killed_folder_export_to_another_disk_leaves_nothing_visible(removable_disk, env):
    """S19 + S34 (issue 29 finding 5): a folder exported to a provider on
    another file system than the state directory, killed mid-copy, shows
    nothing — not in the provider folder on the host, not through the mount
    to an app granted the destination — and what it staged on that disk is
    removed by the daemon itself (no command runs in between)."""
    disk = removable_disk
    provider = disk / "Documents"
    (provider / "out").mkdir(parents=True)
    assert os.stat(disk).st_dev != os.stat(env.state).st_dev, "the tmpfs is on the state's file system"
    env.cli("provider", "add", "usb", provider, "--name", "USB stick")
    env.grant(ALPHA, "usb:out")
    write_big(container_host(env, ALPHA, "Documents/album/big.bin"))
    env.mount()
    before = tree(disk)
    assert env.app_json(ALPHA, APP_WALK, env.prov(ALPHA, "usb", "out")) == []
    seen = kill_mid_copy(env, "export", ALPHA, "Documents/album", "usb:out")
    assert tree(provider) == ["out"], f"killed export (copy was {seen}) shows in the provider folder: {tree(provider)}"
    view = env.app_json(ALPHA, APP_WALK, env.prov(ALPHA, "usb", "out"))
    assert view == [], f"an app granted the destination sees the partial copy {seen}: {view}"
    wait_for(
        f"the daemon to sweep what the killed export staged ({seen})",
        lambda: tree(disk),
        lambda now: now == before,
        SWEEP_WAIT,
        interval=0.5,
    )
    assert leftovers(env, "big.bin") == [
        os.path.relpath(container_host(env, ALPHA, "Documents/album/big.bin"), env.root)
    ], "the staged copy's journal or files are left in the state"
    env.cli("export", ALPHA, "Documents/album", "usb:out")
    assert tree(provider) == ["out", "out/album", "out/album/big.bin"]
    assert tree(disk) == sorted(before + ["Documents/out/album", "Documents/out/album/big.bin"])
    assert env.app_json(ALPHA, APP_WALK, env.prov(ALPHA, "usb", "out")) == ["album", "album/big.bin"]
    # A staging folder inside a granted folder (a provider at a disk's root,
    # or the last resort after EXDEV) is never shown through the mount.
    staging = provider / "out" / f".scopefs-partial-copies-{os.geteuid()}"
    (staging / "1-2").mkdir(parents=True)
    (staging / "1-2" / "half.bin").write_bytes(b"half")
    (provider / "out" / ".album.scopefs-partial-1").mkdir()
    assert env.app_json(ALPHA, APP_WALK, env.prov(ALPHA, "usb", "out")) == ["album", "album/big.bin"]
    half = env.prov(ALPHA, "usb", f"out/{staging.name}/1-2/half.bin")
    assert env.app_json(ALPHA, "emit(outcome(lambda: os.stat(sys.argv[1]).st_size))", half) == {"errno": "ENOENT"}
