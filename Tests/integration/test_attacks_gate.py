"""Attacks on open descriptors and held folders (issue 14, findings 5 and 6;
SPEC S33 amended: "A folder moved out of a grant on the host stops being
reachable through descriptors and working directories held on it within
1 s. An open file answers only processes of the app that opened it.").

Finding 5: another app takes app A's O_RDWR descriptor (here passed over an
AF_UNIX socket, as `pidfd_getfd` would hand it too) and writes through it.
Finding 6: the owner moves a granted folder's subfolder (or an ancestor of
a granted folder) to an ungranted place on the host while an app holds a
descriptor and its working directory in it.
"""

import os
import time

from doc_scope_helpers import wait_events
from scopefs_harness import ALPHA, BETA, LOCAL, REPORT_BYTES

# App A: opens the file O_RDWR, hands the descriptor to every process that
# connects to the socket (BETA's process, then an inspector), and finally
# lets a forked child of its own use it.
OWNER_SHARES_DESCRIPTOR = """
import socket
path, sock_path, clients = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(path, os.O_RDWR)
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sock_path)
os.chmod(sock_path, 0o777)
server.listen(4)
emit({"ready": True})
for _ in range(clients):
    conn, _ = server.accept()
    socket.send_fds(conn, [b"fd"], [fd])
    conn.recv(1)          # the thief is done with it
    conn.close()
step({"sent": clients})
pid = os.fork()
if pid == 0:
    ok = os.pwrite(fd, b"child", 0) == 5 and os.pread(fd, 5, 0) == b"child"
    os.fsync(fd)
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
emit({"child-status": os.waitstatus_to_exitcode(status)})
"""

# A process that receives a descriptor over the socket and tries every data
# operation on it; the host file must come out unchanged.
THIEF = """
import ctypes, socket
sock_path, sink = sys.argv[1], sys.argv[2]
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect(sock_path)
_, fds, _, _ = socket.recv_fds(conn, 16, 1)
fd = fds[0]
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate64.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]

def fallocate():
    if libc.fallocate64(fd, 0, 0, 1 << 20) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))

def copy_out():
    out = os.open(sink, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        return os.copy_file_range(fd, out, 4096, 0, 0)
    finally:
        os.close(out)

result = {
    "read": attempt(os.pread, fd, 16, 0),
    "pwrite": attempt(os.pwrite, fd, b"STOLEN", 0),
    "fallocate": attempt(fallocate),
    "fsync": attempt(os.fsync, fd),
    "fdatasync": attempt(os.fdatasync, fd),
    "ftruncate": attempt(os.ftruncate, fd, 3),
    "fsetxattr": attempt(os.setxattr, fd, "user.stolen", b"1"),
    "copy_file_range": attempt(copy_out) if sink else "skipped",
}
conn.send(b"x")
emit(result)
"""

DATA_OPERATIONS = ("read", "pwrite", "fallocate", "fsync", "fdatasync", "ftruncate")


def test_stolen_descriptor_answers_only_its_app(env):
    """SPEC S33 (amended), issue 14 finding 5: a descriptor app A opened
    O_RDWR on a granted file, handed to a process of app B (over a unix
    socket, as pidfd_getfd would) or to an inspector (the owner's process,
    SPEC S4), refuses read, pwrite, fallocate, fsync, ftruncate and
    copy_file_range with EPERM (fsetxattr, which the kernel sends without the
    descriptor, meets the gate of the node: ENOENT for another app, EROFS for
    the inspect view); the host file is unchanged. A's own forked child still reads and writes."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    host_file = env.backing(LOCAL) / "docs" / "report.txt"
    sock_path = str(env.root / "share.sock")
    owner = env.app_session(ALPHA, OWNER_SHARES_DESCRIPTOR, env.prov(ALPHA, LOCAL, "docs/report.txt"),
                            sock_path, 2)
    assert owner.recv() == {"ready": True}

    # BETA's sink is its own container file: copy_file_range into it would
    # copy A's data out.
    by_other_app = env.app_json(BETA, THIEF, sock_path, env.container(BETA, "loot.txt"))
    by_inspector = env.host_json(THIEF, sock_path, "")
    assert owner.recv() == {"sent": 2}

    assert host_file.read_bytes() == REPORT_BYTES, "a stolen descriptor changed the host file"
    assert "user.stolen" not in os.listxattr(host_file), "a stolen descriptor set an xattr on the host file"
    for who, result in (("app " + BETA, by_other_app), ("inspector", by_inspector)):
        for operation in DATA_OPERATIONS:
            assert result[operation] == "EPERM", f"{who}: {operation} through A's descriptor: {result}"
        # SETXATTR carries no file handle: the gate answers as for the node
        # (another app's: ENOENT; the inspect view refuses writes: EROFS).
        assert result["fsetxattr"] in ("EPERM", "ENOENT", "EROFS"), f"{who}: fsetxattr: {result}"
    assert by_other_app["copy_file_range"] == "EPERM", by_other_app

    # Each refusal is a denial event (SPEC S29), with the thief's app.
    refused = wait_events(env, lambda e: e.get("operation") in ("read", "write") and e.get("errnoName") == "EPERM",
                          kind="denial", app=BETA, count=2)
    assert {e["operation"] for e in refused} == {"read", "write"}, refused

    owner.send()
    assert owner.recv() == {"child-status": 0}, "the owning app's own child lost the descriptor"
    assert host_file.read_bytes()[:5] == b"child"


APP_READS_INSPECTOR_DESCRIPTOR = """
import socket
sock_path = sys.argv[1]
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect(sock_path)
_, fds, _, _ = socket.recv_fds(conn, 16, 1)
emit({"read": attempt(os.pread, fds[0], 16, 0)})
"""


def test_app_cannot_read_through_an_inspector_descriptor(env):
    """SPEC S33 (amended), S4, issue 14 finding 5: a descriptor the owner's
    inspector opened (read-only, in the inspect view) answers no app process."""
    import socket
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    fd = os.open(env.prov(ALPHA, LOCAL, "docs/report.txt"), os.O_RDONLY)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock_path = str(env.root / "inspector.sock")
        server.bind(sock_path)
        os.chmod(sock_path, 0o777)
        server.listen(1)
        app = env.app_session(ALPHA, APP_READS_INSPECTOR_DESCRIPTOR, sock_path)
        server.settimeout(20)
        conn, _ = server.accept()
        socket.send_fds(conn, [b"fd"], [fd])
        conn.close()
        assert app.recv() == {"read": "EPERM"}
        assert os.pread(fd, 16, 0) == REPORT_BYTES[:16], "the inspector's own read failed"
    finally:
        server.close()
        os.close(fd)


# Holds a descriptor on the folder and its working directory in it (or
# below it); after the test moved the folder on the host, tries to list,
# open and create through both.
HOLDS_FOLDER = """
folder, cwd = sys.argv[1], sys.argv[2]
dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
os.chdir(cwd)
step({"before": listing(folder), "cwd": sorted(os.listdir("."))})

def create_at(name, dir_fd=None):
    os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dir_fd))

def read_at(name, dir_fd=None):
    with open(os.open(name, os.O_RDONLY, dir_fd=dir_fd), "rb") as f:
        return f.read()

emit({
    "list-fd": attempt(os.listdir, dfd),
    "open-fd": attempt(read_at, "f.txt", dfd),
    "stat-fd": attempt(os.stat, "f.txt", dir_fd=dfd),
    "create-fd": attempt(create_at, "via-fd.txt", dfd),
    "mkdir-fd": attempt(os.mkdir, "dir-via-fd", dir_fd=dfd),
    "list-cwd": attempt(os.listdir, "."),
    "open-cwd": attempt(read_at, "g.txt"),
    "create-cwd": attempt(create_at, "via-cwd.txt"),
    "mkdir-cwd": attempt(os.mkdir, "dir-via-cwd"),
})
"""

MOVED_OPERATIONS = ("list-fd", "open-fd", "stat-fd", "create-fd", "mkdir-fd",
                    "list-cwd", "open-cwd", "create-cwd", "mkdir-cwd")
CREATED_NAMES = ("via-fd.txt", "dir-via-fd", "via-cwd.txt", "dir-via-cwd")


def _held_folder_cut_after_host_move(env, folder_rel, cwd_rel, moved_rel, destination):
    """Common body: the app holds `folder_rel` (fd) and `cwd_rel` (cwd); the
    owner renames `moved_rel` to `destination` on the host; 1.5 s later every
    operation through the descriptor and the working directory fails with
    ENOENT or EPERM, and nothing appears in the new host location."""
    backing = env.backing(LOCAL)
    (backing / cwd_rel).mkdir(parents=True, exist_ok=True)
    (backing / folder_rel / "f.txt").write_bytes(b"f\n")
    (backing / cwd_rel / "g.txt").write_bytes(b"g\n")
    app = env.app_session(ALPHA, HOLDS_FOLDER, env.prov(ALPHA, LOCAL, folder_rel), env.prov(ALPHA, LOCAL, cwd_rel))
    before = app.recv()
    assert "f.txt" in before["before"] and "g.txt" in before["cwd"], before

    os.rename(backing / moved_rel, destination)
    moved_at = time.monotonic()
    time.sleep(1.5)
    app.send()
    after = app.recv()
    elapsed = time.monotonic() - moved_at
    for operation in MOVED_OPERATIONS:
        assert after[operation] in ("ENOENT", "EPERM"), \
            f"{operation} through a held folder {elapsed:.1f} s after it moved out of the grant: {after}"
    created = [str(p) for p in destination.rglob("*") if p.name in CREATED_NAMES]
    assert not created, f"created in the ungranted host location: {created}"


def test_folder_moved_out_of_grant_is_cut(env):
    """SPEC S33 (amended), issue 14 finding 6: the owner moves `work/sub` on
    the host into an ungranted folder while an app holds a descriptor on it
    and its cwd in `work/sub/deep`: within 1.5 s listing, opening and creating
    through both fail (ENOENT/EPERM) and nothing is created there."""
    env.grant(ALPHA, f"{LOCAL}:work")
    env.mount()
    _held_folder_cut_after_host_move(env, "work/sub", "work/sub/deep", "work/sub",
                                     env.backing(LOCAL) / "work2" / "sub")


def test_ancestor_moved_out_of_provider_cuts_held_folder(env):
    """SPEC S33 (amended), issue 14 finding 6: the owner moves an ancestor of
    the granted folder `deep/a` out of the provider on the host: the app's
    descriptor on `deep/a/b` and its
    cwd in `deep/a/b` stop working within 1.5 s."""
    env.grant(ALPHA, f"{LOCAL}:deep/a")
    env.mount()
    _held_folder_cut_after_host_move(env, "deep/a/b", "deep/a/b", "deep",
                                     env.root / "backing" / "escape" / "deep")


HOLDS_FOLDER_STILL_GRANTED = """
folder = sys.argv[1]
dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
os.chdir(folder)
step({"before": sorted(os.listdir(dfd))})
fd = os.open("made-in-cwd.txt", os.O_WRONLY | os.O_CREAT, 0o644)
os.close(fd)
emit({"list-fd": outcome(lambda: sorted(os.listdir(dfd))), "list-cwd": outcome(lambda: sorted(os.listdir(".")))})
"""


def test_folder_renamed_within_grant_stays_usable(env):
    """SPEC S33 (amended), the other side of finding 6: a folder the owner
    renames on the host inside the same granted folder has not left the
    grant, so the app's descriptor and cwd on it keep working after the
    location check ran (1.5 s), and what it creates lands in the new place."""
    env.grant(ALPHA, f"{LOCAL}:work")
    env.mount()
    backing = env.backing(LOCAL) / "work"
    (backing / "sub").mkdir()
    (backing / "sub" / "f.txt").write_bytes(b"f\n")
    app = env.app_session(ALPHA, HOLDS_FOLDER_STILL_GRANTED, env.prov(ALPHA, LOCAL, "work/sub"))
    assert app.recv() == {"before": ["f.txt"]}
    os.rename(backing / "sub", backing / "renamed")
    time.sleep(1.5)
    app.send()
    after = app.recv()
    assert after == {"list-fd": {"ok": ["f.txt", "made-in-cwd.txt"]},
                     "list-cwd": {"ok": ["f.txt", "made-in-cwd.txt"]}}, after
    assert (backing / "renamed" / "made-in-cwd.txt").exists()
