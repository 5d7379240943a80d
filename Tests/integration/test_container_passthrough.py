"""Kernel passthrough for the app's own container (issue 33): where the
kernel has FUSE passthrough (Linux 6.9+) and the daemon CAP_SYS_ADMIN, the
kernel reads, writes and maps container files itself, with no READ or
WRITE request to the daemon; provider files keep the daemon's path. What
the daemon no longer sees is made safe otherwise: a container file never
holds a set-id bit (SPEC S35, amended), and in the default sandbox no other
app can reach a descriptor (SPEC S33: an open file answers only processes
of the app that opened it). Each test runs as users run ScopeFS: the
default mount (strict scopes) and the default sandbox; the last one with a
non-root owner, where passthrough is off and `status` says why.

The requests the daemon receives are counted by the kernel itself
(`request_trace.RequestTrace`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import secrets
import subprocess
from pathlib import Path

import pytest
from doc_scope_helpers import mount as mount_with_scopes
from doc_scope_helpers import status
from request_trace import RequestTrace, connection_of
from scopefs_harness import (
    ALPHA,
    BETA,
    LOCAL,
    REPORT_BYTES,
    AppSession,
    describe,
    non_root_owner_root,
    run_non_root_session,
    wait_for,
)

MIB = 1 << 20


def kernel_offers_passthrough() -> bool:
    """Linux 6.9+ built with CONFIG_FUSE_PASSTHROUGH (assumed when the
    configuration cannot be read: the test then says what it found)."""
    found = re.match(r"(\d+)\.(\d+)", os.uname().release)
    if not found or tuple(map(int, found.groups())) < (6, 9):
        return False
    for path, opener in (("/proc/config.gz", gzip.open), (f"/boot/config-{os.uname().release}", open)):
        try:
            with opener(path, "rt") as f:
                return "CONFIG_FUSE_PASSTHROUGH=y" in f.read()
        except OSError:
            continue
    return True


def passthrough(env) -> dict:
    """`status --json`'s daemon.containerPassthrough."""
    return status(env)["daemon"]["containerPassthrough"]


def host_container(env, app: str) -> Path:
    return env.state / "containers" / app


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------
# passthrough in use


# Reads a container file the owner made on the host, writes a new one and
# reads it back through read() and mmap.
CONTAINER_IO = """
import hashlib, mmap
documents, size = sys.argv[1], int(sys.argv[2])
def digest(data): return hashlib.sha256(data).hexdigest()
got = {"host-made": digest(read_bytes(documents + "/host-made.bin"))}
data = bytes(range(256)) * (size // 256)
with open(documents + "/app-made.bin", "wb") as f:
    for start in range(0, size, 1 << 20):
        f.write(data[start:start + (1 << 20)])
with open(documents + "/app-made.bin", "rb") as f:
    got["read-back"] = digest(f.read())
    with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        got["mapped"] = digest(mapped[:])
got["written"] = digest(data)
emit(got)
"""

# In scope (strict mode, SPEC S9), the provider file read through the daemon.
READ_PROVIDER_FILE = """
import hashlib
os.setxattr(sys.argv[1], "user.scopefs.start", b"")
emit({"sha": hashlib.sha256(read_bytes(sys.argv[1])).hexdigest()})
"""


def test_container_reads_and_writes_reach_no_daemon(env):
    """Issue 33: with passthrough on (`status` says so), a sandboxed app
    reads a container file made on the host, writes 8 MiB into a new one
    and reads it back (read and mmap) without one READ or WRITE request to
    the daemon, and the bytes are right; a provider file's read still
    reaches the daemon (its gate stays on every read, SPEC S14).
    Where the kernel lacks passthrough, `status` says so and the daemon
    serves the same bytes."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    mount_with_scopes(env, "strict")
    documents = host_container(env, ALPHA) / "Documents"
    host_made = os.urandom(4 * MIB)
    (documents / "host-made.bin").write_bytes(host_made)
    offered = kernel_offers_passthrough()
    state = passthrough(env)
    if not offered:
        assert state["on"] is False and "kernel" in state["reason"], state
    else:
        assert state == {"on": True, "openFiles": 0, "fallbacks": 0}, state
        assert "container files: kernel passthrough on, 0 open" in env.cli("status").stdout

    with RequestTrace(env.mnt) as container:
        got = env.app_json(ALPHA, CONTAINER_IO, env.container(ALPHA, "Documents"), 8 * MIB, sandbox=True)
    assert got["host-made"] == sha(host_made)
    assert got["read-back"] == got["mapped"] == got["written"]
    assert sha((documents / "app-made.bin").read_bytes()) == got["written"]
    with RequestTrace(env.mnt) as provider:
        read = env.app_json(ALPHA, READ_PROVIDER_FILE, env.prov(ALPHA, LOCAL, "docs/report.txt"), sandbox=True)
    assert read == {"sha": sha(REPORT_BYTES)}
    assert provider.counts["READ"] >= 1, provider.counts
    if offered:
        assert container.counts["READ"] == 0 and container.counts["WRITE"] == 0, container.counts
        assert container.counts["OPEN"] + container.counts["CREATE"] >= 3, container.counts
    else:
        assert container.counts["READ"] >= 1 and container.counts["WRITE"] >= 1, container.counts


def bdi_readahead_kib(mountpoint: Path) -> int:
    """The mount's readahead window (its bdi is named after its device)."""
    connection = connection_of(mountpoint)
    bdi = Path("/sys/class/bdi") / f"{connection >> 20}:{connection & 0xFFFFF}"
    return int((bdi / "read_ahead_kb").read_text())


def test_a_provider_file_is_read_in_requests_of_half_a_mebibyte(env):
    """Issue 33 (larger requests): a root owner's daemon widens its
    mount's readahead window from the kernel's 128 KiB to 512 KiB, so a
    cold sequential read of a provider file, which still reaches the
    daemon on every READ (S14), takes a quarter of the round trips: 8 MiB
    in at most 17 READs (32 at the kernel's window), with the right bytes."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    mount_with_scopes(env, "strict")
    assert bdi_readahead_kib(env.mnt) == 512
    data = os.urandom(8 * MIB)
    (env.backing(LOCAL) / "docs" / "big.bin").write_bytes(data)
    subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=True, timeout=60)
    with RequestTrace(env.mnt) as trace:
        read = env.app_json(ALPHA, READ_PROVIDER_FILE, env.prov(ALPHA, LOCAL, "docs/big.bin"), sandbox=True)
    assert read == {"sha": sha(data)}
    assert 8 <= trace.counts["READ"] <= 17, trace.counts


HOLDS_FILE = """
path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"held")
step({"open": True})
link = os.readlink("/proc/self/fd/%d" % fd)
os.close(fd)
emit({"closed": True, "link": link})
"""


def test_status_counts_the_container_files_open_through_passthrough(env):
    """Issue 33: one backing file per open container file, registered at
    its first open: `status` counts it while an app holds the file and not
    after its last close (the daemon's descriptors are checked at
    teardown). Where the kernel lacks passthrough none is counted. The
    app's own write, which the host-change channel sees as a host change
    (the kernel made it, for the app's pid), does not drop the file's
    entry: its descriptor still names the file, not "... (deleted)"."""
    mount_with_scopes(env, "strict")
    path = env.container(ALPHA, "Documents/held.txt")
    app = env.app_session(ALPHA, HOLDS_FILE, path, sandbox=True)
    assert app.recv() == {"open": True}
    assert passthrough(env)["openFiles"] == (1 if kernel_offers_passthrough() else 0)
    app.send()
    assert app.recv() == {"closed": True, "link": path}
    wait_for("the backing file to be given back", lambda: passthrough(env)["openFiles"], lambda n: n == 0)


# ---------------------------------------------------------------------------
# fallbacks and what the daemon must still see


def test_turned_off_the_daemon_serves_container_files(env):
    """Issue 33's fallback as the owner can choose it: `scopefs mount
    --no-container-passthrough` says in `status` that passthrough is off
    and why, and container files are read and written through the daemon
    (READ and WRITE requests reach it), with the right bytes."""
    env.mount_args = lambda *a, **k: ["mount", env.mnt, "--no-container-passthrough"]
    env.mount()
    state = passthrough(env)
    assert state["on"] is False and state["reason"] == "turned off (--no-container-passthrough)", state
    assert "container files: through the daemon (kernel passthrough off: turned off" in env.cli("status").stdout
    documents = host_container(env, ALPHA) / "Documents"
    host_made = os.urandom(MIB)
    (documents / "host-made.bin").write_bytes(host_made)
    with RequestTrace(env.mnt) as trace:
        got = env.app_json(ALPHA, CONTAINER_IO, env.container(ALPHA, "Documents"), 2 * MIB, sandbox=True)
    assert got["host-made"] == sha(host_made)
    assert got["read-back"] == got["mapped"] == got["written"] == sha((documents / "app-made.bin").read_bytes())
    assert trace.counts["READ"] >= 1 and trace.counts["WRITE"] >= 1, trace.counts


READ_CONTAINER_FILE = "emit(outcome(lambda: len(read_bytes(sys.argv[1]))))"


def test_a_fault_rule_on_container_files_still_meets_their_reads(env):
    """Issue 18 with issue 33: while a fault rule is set, container files
    open through the daemon, so a read rule fails their reads (with
    passthrough the read would not reach the daemon). After `fault clear`
    they open through passthrough again, with no READ request."""
    mount_with_scopes(env, "strict")
    (host_container(env, ALPHA) / "Documents" / "data.bin").write_bytes(b"d" * 65536)
    path = env.container(ALPHA, "Documents/data.bin")
    env.cli("fault", "add", "--app", ALPHA, "--path", "Container/Documents/*.bin", "--op", "read", "--errno", "EIO")
    assert env.app_json(ALPHA, READ_CONTAINER_FILE, path, sandbox=True) == {"errno": "EIO"}
    env.cli("fault", "clear", "--all")
    with RequestTrace(env.mnt) as trace:
        assert env.app_json(ALPHA, READ_CONTAINER_FILE, path, sandbox=True) == {"ok": 65536}
    if kernel_offers_passthrough():
        assert trace.counts["READ"] == 0, trace.counts


# The set-id bits a chmod, a create and a mknod ask for, and what the
# container keeps: none on a regular file, setgid on a folder.
SET_ID_CHANGES = """
import stat
documents = sys.argv[1]
def mode(path): return oct(stat.S_IMODE(os.stat(path).st_mode))
os.umask(0o022)
write_text(documents + "/chmod", "x")
got = {}
os.chmod(documents + "/chmod", 0o4755); got["chmod-setuid"] = mode(documents + "/chmod")
os.chmod(documents + "/chmod", 0o2755); got["chmod-setgid"] = mode(documents + "/chmod")
os.close(os.open(documents + "/create", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o6744))
got["create"] = mode(documents + "/create")
os.mknod(documents + "/mknod", stat.S_IFREG | 0o2644); got["mknod"] = mode(documents + "/mknod")
os.mkdir(documents + "/folder"); os.chmod(documents + "/folder", 0o2775); got["folder"] = mode(documents + "/folder")
emit(got)
"""

APPEND = """
with open(sys.argv[1], "ab") as f:
    f.write(b"more")
emit({"ok": True})
"""


def test_container_files_never_hold_set_id_bits(env):
    """SPEC S35 (amended, issue 33): in the container a chmod, a create or
    a mknod never leaves a regular file setuid or setgid (a write through
    passthrough never reaches the daemon, which clears those bits when a
    caller without CAP_FSETID writes); a folder keeps setgid. A file made
    setuid on the host goes through the daemon, which clears the bit when
    the app writes, as on any file system.
    Seen failing on the old main: the chmod left 0o4755."""
    mount_with_scopes(env, "strict")
    documents = host_container(env, ALPHA) / "Documents"
    got = env.app_json(ALPHA, SET_ID_CHANGES, env.container(ALPHA, "Documents"), sandbox=True)
    assert got == {
        "chmod-setuid": "0o755",
        "chmod-setgid": "0o755",
        "create": "0o744",
        "mknod": "0o644",
        "folder": "0o2775",
    }, got
    for name, mode in (("chmod", 0o755), ("create", 0o744), ("mknod", 0o644), ("folder", 0o2775)):
        assert (documents / name).stat().st_mode & 0o7777 == mode, name

    setuid = documents / "setuid.bin"
    setuid.write_bytes(b"x" * 4096)
    os.chmod(setuid, 0o4777)
    with RequestTrace(env.mnt) as trace:
        assert env.app_json(ALPHA, APPEND, env.container(ALPHA, "Documents/setuid.bin"), sandbox=True) == {"ok": True}
    assert setuid.stat().st_mode & 0o7777 == 0o777, oct(setuid.stat().st_mode)
    assert setuid.read_bytes().endswith(b"more")
    assert trace.counts["WRITE"] >= 1, f"a set-id file's write must reach the daemon: {trace.counts}"


# ---------------------------------------------------------------------------
# S33: no other app reaches a descriptor


# App A: opens its file, offers the descriptor to whoever connects to a
# unix socket bound in its container or in the abstract namespace, until
# the test says stop.
OFFERS_DESCRIPTOR = """
import select, socket
path, sock_path, abstract = sys.argv[1], sys.argv[2], sys.argv[3]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"alpha's own bytes")
servers = []
for address in (sock_path, "\\0" + abstract):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(8)
    servers.append(server)
os.chmod(sock_path, 0o777)
info = os.fstat(fd)
emit({"ready": True, "fd": fd, "dev": info.st_dev, "ino": info.st_ino})
while True:
    readable, _, _ = select.select(servers + [sys.stdin], [], [])
    if sys.stdin in readable:
        break
    for server in readable:
        conn, _ = server.accept()
        socket.send_fds(conn, [b"fd"], [fd])
        conn.close()
emit({"done": True})
"""

# App B: every way to A's descriptor from its own sandbox.
REACHES_FOR_DESCRIPTOR = """
import ctypes, socket
sock_path, state_sock, abstract = sys.argv[1], sys.argv[2], sys.argv[3]
pid, fd, dev, ino = (int(a) for a in sys.argv[4:8])
libc = ctypes.CDLL(None, use_errno=True)

def take(address):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(address)
        _, fds, _, _ = socket.recv_fds(s, 16, 1)
        return fds
    finally:
        s.close()

def pidfd_getfd(pidfd, target):
    got = libc.syscall(438, pidfd, target, 0)
    if got < 0:
        raise OSError(ctypes.get_errno(), "pidfd_getfd")
    return got

result = {
    "mount-socket": attempt(take, sock_path),
    "state-socket": attempt(take, state_sock),
    "abstract-socket": attempt(take, "\\0" + abstract),
    "proc-fd-list": attempt(os.listdir, "/proc/%d/fd" % pid),
    "proc-fd-open": attempt(os.open, "/proc/%d/fd/%d" % (pid, fd), os.O_RDONLY),
    "pidfd-open": attempt(os.pidfd_open, pid),
}
# Every descriptor of every process this app can see, opened through
# /proc and taken with pidfd_getfd: none is A's file.
def same_file(st): return (st.st_dev, st.st_ino) == (dev, ino)
reached, seen = [], 0
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    seen += 1
    try:
        numbers = [int(n) for n in os.listdir("/proc/%s/fd" % entry)]
    except OSError:
        continue
    try:
        pidfd = os.pidfd_open(int(entry))
    except OSError:
        pidfd = None
    for number in numbers:
        try:
            if same_file(os.stat("/proc/%s/fd/%d" % (entry, number))):
                reached.append(["proc", entry, number])
        except OSError:
            pass
        if pidfd is None:
            continue
        try:
            taken = pidfd_getfd(pidfd, number)
        except OSError:
            continue
        if same_file(os.fstat(taken)):
            reached.append(["pidfd_getfd", entry, number])
        os.close(taken)
result["reached"] = reached
result["processes-seen"] = seen
emit(result)
"""

# A second process of app A, in a sandbox of its own: takes the descriptor
# over the socket in the container and reads through it.
SAME_APP_TAKES = """
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
_, fds, _, _ = socket.recv_fds(s, 16, 1)
emit({"read": os.pread(fds[0], 64, 0).decode()})
"""


def app_host_pid(marker: str) -> int:
    """The host pid of the sandboxed python whose command line holds `marker`."""

    def find() -> list[int]:
        pids = []
        for entry in os.listdir("/proc"):
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in cmdline and any(part.endswith(b"python3") for part in cmdline[:1]):
                pids.append(int(entry))
        return pids

    return wait_for(f"the app process holding {marker}", find, lambda pids: len(pids) == 1)[0]


def test_no_other_app_reaches_a_container_descriptor(env):
    """SPEC S33 with issue 33: a container file open through passthrough
    answers reads and writes without the daemon, so in the default sandbox
    no process of another app may obtain the descriptor. App A opens its
    file and hands the descriptor to whoever connects to a unix socket it
    bound in its container or in the abstract namespace. App B cannot
    connect to either (ENOENT: A's container is not in B's view, nor the
    state directory; ECONNREFUSED: B has a network namespace of its own),
    cannot open /proc/PID/fd of A's process (ENOENT: another pid namespace)
    nor get a pidfd of it (ESRCH), and no descriptor of any process B can
    see, through /proc or pidfd_getfd, is A's file. A second process of
    app A, in a sandbox of its own, connects to the same socket and reads
    through the descriptor (the same app: S33 allows it)."""
    mount_with_scopes(env, "strict")
    marker = f"steal-{secrets.token_hex(4)}"
    sock_path = env.container(ALPHA, "tmp/steal.sock")
    owner = env.app_session(
        ALPHA, OFFERS_DESCRIPTOR, env.container(ALPHA, "Documents/private.txt"), sock_path, marker, sandbox=True
    )
    offered = owner.recv()
    assert offered["ready"] is True, offered
    pid = app_host_pid(marker)
    assert os.readlink(f"/proc/{pid}/fd/{offered['fd']}") == env.container(ALPHA, "Documents/private.txt")
    if kernel_offers_passthrough():
        assert passthrough(env)["openFiles"] == 1

    state_sock = str(host_container(env, ALPHA) / "tmp" / "steal.sock")
    got = env.app_json(
        BETA,
        REACHES_FOR_DESCRIPTOR,
        sock_path,
        state_sock,
        marker,
        pid,
        offered["fd"],
        offered["dev"],
        offered["ino"],
        sandbox=True,
    )
    assert got["mount-socket"] == "ENOENT", got
    assert got["state-socket"] == "ENOENT", got
    assert got["abstract-socket"] == "ECONNREFUSED", got
    assert got["proc-fd-list"] == "ENOENT", got
    assert got["proc-fd-open"] == "ENOENT", got
    assert got["pidfd-open"] in ("ESRCH", "EPERM"), got
    assert got["reached"] == [] and got["processes-seen"] >= 1, got

    assert env.app_json(ALPHA, SAME_APP_TAKES, sock_path, sandbox=True) == {"read": "alpha's own bytes"}
    owner.send("stop")
    assert owner.recv() == {"done": True}


# Without a sandbox every app process is a host process of the owner: A
# hands its descriptor over a socket on the host, B reads through it.
HANDS_OVER = """
import socket
path, sock_path = sys.argv[1], sys.argv[2]
if "/Providers/" in path:
    os.setxattr(path, "user.scopefs.start", b"")  # strict mode (SPEC S9)
fd = os.open(path, os.O_RDONLY)
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sock_path)
server.listen(1)
emit({"ready": True})
conn, _ = server.accept()
socket.send_fds(conn, [b"fd"], [fd])
conn.recv(1)
emit({"done": True})
"""

READS_HANDED = """
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
_, fds, _, _ = socket.recv_fds(s, 16, 1)
got = {"read": outcome(lambda: os.pread(fds[0], 64, 0).decode())}
s.send(b"x")
emit(got)
"""


@pytest.mark.parametrize("where", ["container", "provider"])
def test_without_a_sandbox_a_handed_container_descriptor_answers_its_holder(env, where):
    """`--no-sandbox` (no security boundary, SECURITY.md): app processes
    are the owner's host processes, which can read every container in the
    state directory anyway; S33's check holds there for provider files (a
    process of app B reading through app A's descriptor gets EPERM) but not
    for container files open through passthrough, whose reads no longer
    reach the daemon: B reads A's container file through a descriptor A
    handed over. Without passthrough the daemon refuses it as before."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    mount_with_scopes(env, "strict")
    (host_container(env, ALPHA) / "Documents" / "shared.txt").write_text("alpha's container file")
    source = env.container(ALPHA, "Documents/shared.txt") if where == "container" else None
    source = source or env.prov(ALPHA, LOCAL, "docs/secret.txt")
    sock_path = str(env.root / "hand-over.sock")
    owner: AppSession = env.app_session(ALPHA, HANDS_OVER, source, sock_path)
    assert owner.recv() == {"ready": True}
    got = env.app_json(BETA, READS_HANDED, sock_path)
    assert owner.recv() == {"done": True}
    if where == "container" and passthrough(env)["on"]:
        assert got == {"read": {"ok": "alpha's container file"}}, got
    else:
        assert got == {"read": {"errno": "EPERM"}}, got


# ---------------------------------------------------------------------------
# a non-root owner: passthrough off, container I/O through the daemon

NOBODY_SESSION = r"""
set -e
root=$1 binary=$2 probe=$3
mount -t tmpfs -o mode=755 tmpfs "$root/dev"
mknod -m 666 "$root/dev/fuse" c 10 229
mount --bind "$root/dev/fuse" /dev/fuse
as_owner() { setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$root" XDG_RUNTIME_DIR= "$@"; }
s() { as_owner "$binary" --state "$root/state-parent/state" "$@"; }
s init >/dev/null
s app add com.example.alpha >/dev/null
s mount "$root/mnt" >/dev/null
trap 's unmount "$root/mnt" >/dev/null 2>&1 || fusermount3 -u "$root/mnt"' EXIT
s status --json > "$root/status.json"
s status > "$root/status.txt"
s run --app com.example.alpha -- python3 -c "$probe"
"""

WRITES_AND_READS_BACK = r"""
import hashlib, json, os
path = os.path.join(os.environ["SCOPEFS_MOUNT"], "Container", "Documents", "data.bin")
data = os.urandom(3 << 20)
with open(path, "wb") as f:
    f.write(data)
with open(path, "rb") as f:
    back = f.read()
print(json.dumps({"same": back == data, "size": len(back)}))
"""


def test_a_non_root_owner_serves_the_container_through_the_daemon(tmp_path):
    """Issue 33's fallback: a daemon without CAP_SYS_ADMIN (a non-root
    owner, uid 65534 here) cannot register backing files, so `status`
    (text and --json) says passthrough is off and why, and the app's
    container files are read and written through the daemon, correctly."""
    with non_root_owner_root("scopefs-owner-", ("state-parent", "mnt")) as root:
        p = run_non_root_session(NOBODY_SESSION, root, WRITES_AND_READS_BACK, what="owner")
        assert p.returncode == 0, describe(p)
        assert json.loads(p.stdout.strip().splitlines()[-1]) == {"same": True, "size": 3 << 20}
        state = json.loads((root / "status.json").read_text())["daemon"]["containerPassthrough"]
        assert state["on"] is False and "CAP_SYS_ADMIN" in state["reason"], state
        text = (root / "status.txt").read_text()
        assert "container files: through the daemon (kernel passthrough off: " in text, text
