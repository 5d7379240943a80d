#!/usr/bin/env python3
"""What the kernel's FUSE passthrough (FOPEN_PASSTHROUGH, Linux 6.9+) does
here, tried on a minimal FUSE server that speaks the wire protocol itself
(libfuse 3.14 exposes none of it). Root only; mounts under /dev/shm and
unmounts again. docs/PERFORMANCE.md ("Kernel passthrough") says what the
answers mean for ScopeFS.

    python3 bench/passthrough_probe.py [--mib 512]

The server exposes one regular file, `f`, backed by a file in a tmpfs
folder. Each check mounts it afresh:
- `ioctl`: whether FUSE_DEV_IOC_BACKING_OPEN works with FUSE_PASSTHROUGH
  negotiated, without it, with max_stack_depth 0, and in a process
  without CAP_SYS_ADMIN;
- `data`: a write and a cold read of MIB MiB through a passthrough open,
  with the READ/WRITE requests the server saw, against the same through
  the server (no passthrough) and natively;
- `mixed`: a second open of the same file while a passthrough open
  exists, answered without passthrough, and with another backing file;
- `setid`: whether a write by an unprivileged caller through a
  passthrough open clears the file's setuid bit, with
  FUSE_HANDLE_KILLPRIV_V2 negotiated (as ScopeFS does) and without.
"""

import argparse
import ctypes
import errno
import fcntl
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time

FUSE_INIT, FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR, FUSE_SETATTR = 26, 1, 2, 3, 4
FUSE_OPEN, FUSE_READ, FUSE_WRITE, FUSE_RELEASE, FUSE_FLUSH = 14, 15, 16, 18, 25
FUSE_GETXATTR, FUSE_DESTROY, FUSE_BATCH_FORGET, FUSE_INTERRUPT = 22, 38, 42, 36
FUSE_INIT_EXT, FUSE_HANDLE_KILLPRIV_V2, FUSE_MAX_PAGES, FUSE_BIG_WRITES = 1 << 30, 1 << 28, 1 << 22, 1 << 5
FUSE_PASSTHROUGH_FLAGS2 = 1 << (37 - 32)
FOPEN_PASSTHROUGH = 1 << 7
FATTR_MODE, FATTR_SIZE = 1 << 0, 1 << 3
FUSE_DEV_IOC_BACKING_OPEN = 0x4010E501  # _IOW(229, 1, struct fuse_backing_map)
FUSE_DEV_IOC_BACKING_CLOSE = 0x4004E502  # _IOW(229, 2, uint32_t)
IN_HEADER = struct.Struct("<IIQQIIIHH")
OUT_HEADER = struct.Struct("<IiQ")
FILE_INO = 2

libc = ctypes.CDLL(None, use_errno=True)


def attr(st, ino):
    """struct fuse_attr (88 bytes) from an os.stat_result."""
    return struct.pack(
        "<QQQQQQIIIIIIIIII",
        ino,
        st.st_size,
        st.st_blocks,
        int(st.st_atime),
        int(st.st_mtime),
        int(st.st_ctime),
        0,
        0,
        0,
        st.st_mode,
        st.st_nlink,
        st.st_uid,
        st.st_gid,
        0,
        4096,
        0,
    )


def backing_open(devfd, fd):
    arg = bytearray(struct.pack("<iIQ", fd, 0, 0))
    return fcntl.ioctl(devfd, FUSE_DEV_IOC_BACKING_OPEN, (ctypes.c_char * 16).from_buffer(arg))


class Server:
    """A one-file FUSE server on its own thread. `passthrough(n)` says how
    the n-th OPEN is answered: None (through the server), "same" (the
    first backing id) or "new" (a backing id of its own)."""

    def __init__(self, base, backing, init_flags, stack_depth=1, passthrough=lambda n: "same"):
        self.backing, self.init_flags, self.stack_depth = backing, init_flags, stack_depth
        self.passthrough = passthrough
        self.counts = {}
        self.opens = 0
        self.backing_ids = []
        self.ioctl_error = None
        self.fds = {}
        self.mnt = tempfile.mkdtemp(dir=base, prefix="mnt-")
        os.chmod(self.mnt, 0o755)  # the unprivileged writer of the setid check walks through it
        self.dev = os.open("/dev/fuse", os.O_RDWR)
        opts = f"fd={self.dev},rootmode=40000,user_id=0,group_id=0,allow_other"
        if libc.mount(b"probe", self.mnt.encode(), b"fuse.probe", 6, opts.encode()) != 0:  # MS_NOSUID|MS_NODEV
            raise OSError(ctypes.get_errno(), "mount")
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()
        self.file = os.path.join(self.mnt, "f")

    def close(self):
        subprocess.run(["umount", self.mnt], check=False)
        self.thread.join(5)
        os.close(self.dev)
        os.rmdir(self.mnt)

    def reply(self, unique, body=b"", error=0):
        os.write(self.dev, OUT_HEADER.pack(OUT_HEADER.size + len(body), -error, unique) + body)

    def serve(self):
        while True:
            try:
                req = os.read(self.dev, (1 << 20) + 8192)
            except OSError as e:
                if e.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
                    continue
                return  # ENODEV: unmounted
            length, op, unique, node, uid, gid, pid, _, _ = IN_HEADER.unpack_from(req)
            self.counts[op] = self.counts.get(op, 0) + 1
            body = req[IN_HEADER.size : length]
            try:
                self.handle(op, unique, node, body)
            except OSError as e:
                self.reply(unique, error=e.errno or errno.EIO)

    def handle(self, op, unique, node, body):
        if op == FUSE_INIT:
            major, minor, readahead, flags, flags2 = struct.unpack_from("<IIIII", body)
            self.kernel_flags = flags | (flags2 << 32 if flags & FUSE_INIT_EXT else 0)
            want = FUSE_INIT_EXT | FUSE_MAX_PAGES | ((self.init_flags | FUSE_BIG_WRITES) & flags)
            want2 = FUSE_PASSTHROUGH_FLAGS2 if self.init_flags & (1 << 37) else 0
            out = struct.pack(
                "<IIIIHHIIHHII", 7, minor, readahead, want, 16, 12, 1 << 20, 1, 256, 0, want2, self.stack_depth
            ) + bytes(24)
            self.reply(unique, out)
        elif op == FUSE_LOOKUP:
            if body.rstrip(b"\0") != b"f":
                return self.reply(unique, error=errno.ENOENT)
            self.reply(unique, struct.pack("<QQQQII", FILE_INO, 0, 0, 0, 0, 0) + attr(os.stat(self.backing), FILE_INO))
        elif op == FUSE_GETATTR:
            st = os.stat(self.backing) if node == FILE_INO else os.stat("/")
            self.reply(unique, struct.pack("<QII", 0, 0, 0) + attr(st, node))
        elif op == FUSE_SETATTR:
            valid = struct.unpack_from("<I", body)[0]
            size, mode = struct.unpack_from("<Q", body, 16)[0], struct.unpack_from("<I", body, 68)[0]
            if valid & FATTR_SIZE:
                os.truncate(self.backing, size)
            if valid & FATTR_MODE:
                os.chmod(self.backing, mode & 0o7777)
            self.setattr_valid = getattr(self, "setattr_valid", []) + [valid]
            self.reply(unique, struct.pack("<QII", 0, 0, 0) + attr(os.stat(self.backing), node))
        elif op == FUSE_OPEN:
            flags = struct.unpack_from("<I", body)[0]
            fd = os.open(self.backing, flags & (os.O_ACCMODE | os.O_APPEND))
            self.opens += 1
            how = self.passthrough(self.opens)
            open_flags, backing_id = 0, 0
            if how:
                try:
                    if how == "new" or not self.backing_ids:
                        self.backing_ids.append(backing_open(self.dev, fd))
                    backing_id, open_flags = self.backing_ids[-1], FOPEN_PASSTHROUGH
                except OSError as e:
                    self.ioctl_error = e.errno
            self.fds[fd] = fd
            self.reply(unique, struct.pack("<QIi", fd, open_flags, backing_id))
        elif op == FUSE_READ:
            fh, offset, size = struct.unpack_from("<QQI", body)
            self.reply(unique, os.pread(self.fds[fh], size, offset))
        elif op == FUSE_WRITE:
            fh, offset, size = struct.unpack_from("<QQI", body)
            os.pwrite(self.fds[fh], body[40 : 40 + size], offset)
            self.reply(unique, struct.pack("<II", size, 0))
        elif op == FUSE_RELEASE:
            fh = struct.unpack_from("<Q", body)[0]
            os.close(self.fds.pop(fh))
            self.reply(unique)
        elif op in (FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT):
            pass
        elif op == FUSE_FLUSH or op == FUSE_DESTROY:
            self.reply(unique)
        elif op == FUSE_GETXATTR:
            self.reply(unique, error=errno.ENODATA)
        else:
            self.reply(unique, error=errno.ENOSYS)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def timed_dd(args):
    t = time.monotonic()
    subprocess.run(["dd", "bs=1M", "status=none", *args], check=True)
    return time.monotonic() - t


def data(base, mib, passthrough):
    backing = os.path.join(base, "data.bin")
    open(backing, "w").close()
    srv = Server(base, backing, 1 << 37, passthrough=lambda n: "same" if passthrough else None)
    try:
        write = timed_dd(["if=/dev/zero", f"of={srv.file}", f"count={mib}", "conv=notrunc"])
        drop_caches()
        read = timed_dd([f"if={srv.file}", "of=/dev/null"])
        return {
            "write_s": round(write, 3),
            "read_cold_s": round(read, 3),
            "READ": srv.counts.get(FUSE_READ, 0),
            "WRITE": srv.counts.get(FUSE_WRITE, 0),
            "ioctl_error": srv.ioctl_error,
        }
    finally:
        srv.close()
        os.unlink(backing)


def native(base, mib):
    f = os.path.join(base, "native.bin")
    write = timed_dd(["if=/dev/zero", f"of={f}", f"count={mib}"])
    drop_caches()
    read = timed_dd([f"if={f}", "of=/dev/null"])
    os.unlink(f)
    return {"write_s": round(write, 3), "read_cold_s": round(read, 3)}


def ioctl_checks(base):
    backing = os.path.join(base, "small.bin")
    with open(backing, "w") as f:
        f.write("x" * 4096)
    out = {}
    for name, flags, depth in (("negotiated", 1 << 37, 1), ("not negotiated", 0, 1), ("max_stack_depth 0", 1 << 37, 0)):
        srv = Server(base, backing, flags, stack_depth=depth)
        try:
            fd = os.open(backing, os.O_RDONLY)
            try:
                out[name] = f"backing id {backing_open(srv.dev, fd)}"
            except OSError as e:
                out[name] = errno.errorcode[e.errno]
            os.close(fd)
            if name == "negotiated":
                # The same ioctl from a process without CAP_SYS_ADMIN (root
                # otherwise), on the same /dev/fuse descriptor.
                code = (
                    "import fcntl,ctypes,struct,os,errno\nfd=os.open(%r,os.O_RDONLY)\n"
                    "a=bytearray(struct.pack('<iIQ',fd,0,0))\n"
                    "try: print('backing id', fcntl.ioctl(%d,%d,(ctypes.c_char*16).from_buffer(a)))\n"
                    "except OSError as e: print(errno.errorcode[e.errno])\n"
                    % (backing, srv.dev, FUSE_DEV_IOC_BACKING_OPEN)
                )
                r = subprocess.run(
                    ["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", sys.executable, "-c", code],
                    pass_fds=[srv.dev],
                    capture_output=True,
                    text=True,
                )
                out["negotiated, without CAP_SYS_ADMIN"] = (r.stdout + r.stderr).strip()
        finally:
            srv.close()
    return out


def mixed(base):
    backing = os.path.join(base, "small.bin")
    out = {}
    for name, second in (("second open without passthrough", None), ("second open, other backing id", "new")):
        srv = Server(base, backing, 1 << 37, passthrough=lambda n, s=second: "same" if n == 1 else s)
        try:
            first = os.open(srv.file, os.O_RDONLY)
            try:
                os.close(os.open(srv.file, os.O_RDONLY))
                out[name] = "opened"
            except OSError as e:
                out[name] = errno.errorcode[e.errno]
            os.close(first)
        finally:
            srv.close()
    return out


def setid(base):
    out = {}
    for name, flags in (
        ("with HANDLE_KILLPRIV_V2", (1 << 37) | FUSE_HANDLE_KILLPRIV_V2),
        ("without HANDLE_KILLPRIV_V2", 1 << 37),
    ):
        for how in ("passthrough", "through the server"):
            backing = os.path.join(base, "setid.bin")
            with open(backing, "w") as f:
                f.write("x" * 4096)
            os.chmod(backing, 0o4777)
            srv = Server(base, backing, flags, passthrough=lambda n, h=how: "same" if h == "passthrough" else None)
            try:
                r = subprocess.run(
                    [
                        "setpriv",
                        "--reuid=65534",
                        "--regid=65534",
                        "--clear-groups",
                        "dd",
                        "if=/dev/zero",
                        f"of={srv.file}",
                        "bs=4096",
                        "count=1",
                        "conv=notrunc",
                        "status=none",
                    ],
                    capture_output=True,
                    text=True,
                )
                mode = os.stat(backing).st_mode & 0o7777
                out[f"{name}, {how}"] = (
                    f"mode after write {mode:o}"
                    + (" (setuid kept)" if mode & 0o4000 else "")
                    + (f"; writer: {r.stderr.strip()}" if r.returncode else "")
                    + f"; WRITE requests {srv.counts.get(FUSE_WRITE, 0)}"
                    + f"; SETATTR valid {getattr(srv, 'setattr_valid', [])}"
                )
            finally:
                srv.close()
                os.unlink(backing)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mib", type=int, default=512)
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("passthrough_probe: needs root (mount, drop_caches, the ioctl)")
    base = tempfile.mkdtemp(prefix="passthrough-probe-", dir="/dev/shm")
    os.chmod(base, 0o755)
    try:
        print("kernel", os.uname().release)
        for k, v in ioctl_checks(base).items():
            print(f"ioctl BACKING_OPEN, {k}: {v}")
        for k, v in mixed(base).items():
            print(f"mixed opens, {k}: {v}")
        for k, v in setid(base).items():
            print(f"setuid file written by uid 65534, {k}: {v}")
        print(f"{args.mib} MiB native: {native(base, args.mib)}")
        for pt in (False, True):
            print(
                f"{args.mib} MiB through the probe server, {'passthrough' if pt else 'no passthrough'}: "
                f"{data(base, args.mib, pt)}"
            )
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", base])


if __name__ == "__main__":
    main()
