"""POSIX behaviour inside granted read-write folders, driven by app
processes (in the spirit of go-fuse's posixtest). SPEC S35, S32, S33.

Each case gets a fresh world in which ALPHA holds read-write grants on
local:work, local:work2 and drive:inbox; the case runs app snippets with
the work folder's mount path as argv[1] and checks the backing files on
the host."""

from __future__ import annotations

import os
import resource
import sqlite3
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from scopefs_harness import ALPHA, DRIVE, LOCAL, NOBODY, Env


@dataclass
class Ctx:
    env: Env
    work: str  # MOUNT/alpha/Providers/local/work, as the app sees it
    host: Path  # its backing directory

    def app(self, code: str, *args):
        """Run an ALPHA snippet with argv[1] = work folder; return its JSON."""
        return self.env.app_json(ALPHA, code, self.work, *args)


@dataclass
class PosixCase:
    name: str
    fn: Callable[[Ctx], None]
    allow_other: bool = False


CASES: list[PosixCase] = []


def posix_case(name: str, allow_other: bool = False):
    """Register a POSIX table case; allow_other mounts with --allow-other
    (needed when part of the case runs as uid 65534)."""

    def register(fn):
        CASES.append(PosixCase(name, fn, allow_other))
        return fn

    return register


def make_ctx(env: Env, allow_other: bool = False) -> Ctx:
    """The POSIX cases run their system calls as a test suite does, in
    scopes no app starts: the mount is lenient (S9), which only lifts the
    need for a started scope; grants decide as ever."""
    for spec in (f"{LOCAL}:work", f"{LOCAL}:work2", f"{DRIVE}:inbox"):
        env.grant(ALPHA, spec)
    env.mount(allow_other=allow_other, lenient=True)
    return Ctx(env, env.prov(ALPHA, LOCAL, "work"), env.backing(LOCAL) / "work")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_posix(env, case):
    """SPEC S35 (and S32/S33 where a case says so): one POSIX behaviour
    inside a granted read-write folder; see the case's docstring."""
    case.fn(make_ctx(env, case.allow_other))


# ---------------------------------------------------------------------------
# the table


@posix_case("rename-over-existing")
def _(ctx):
    """SPEC S35: rename(a, b) over an existing b replaces it atomically."""
    got = ctx.app("""
        w = sys.argv[1]
        write_text(w + "/a", "new"); write_text(w + "/b", "old")
        os.rename(w + "/a", w + "/b")
        emit({"b": read_text(w + "/b"), "a": attempt(os.stat, w + "/a"), "list": listing(w)})
    """)
    assert got == {"b": "new", "a": "ENOENT", "list": ["b"]}
    assert (ctx.host / "b").read_text() == "new" and not (ctx.host / "a").exists()


@posix_case("fstat-after-unlink")
def _(ctx):
    """SPEC S35: an unlinked open file keeps working through its fd and
    leaves no hidden placeholder (e.g. .fuse_hidden*) behind."""
    got = ctx.app("""
        w = sys.argv[1]; p = w + "/gone"
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"still here")
        os.unlink(p)
        st = os.fstat(fd)
        emit({"nlink": st.st_nlink, "size": st.st_size, "read": os.pread(fd, 64, 0).decode(),
              "write": attempt(os.pwrite, fd, b"!", 10), "lookup": attempt(os.stat, p),
              "list": listing(w)})
        os.close(fd)
    """)
    assert got == {"nlink": 0, "size": 10, "read": "still here", "write": "OK", "lookup": "ENOENT", "list": []}
    assert list(ctx.host.iterdir()) == []


@posix_case("fchmod-futimens-after-unlink")
def _(ctx):
    """SPEC S35: fchmod, futimens and ftruncate on an open file whose name is
    gone act on the file, as on the host (they reach it through the open
    descriptor, not by name)."""
    got = ctx.app("""
        p = sys.argv[1] + "/unnamed"
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"0123456789")
        os.unlink(p)
        res = {"ftruncate": attempt(os.ftruncate, fd, 4), "fchmod": attempt(os.fchmod, fd, 0o600),
               "futimens": attempt(os.utime, fd, ns=(1_000_000_000, 2_000_000_000))}
        st = os.fstat(fd)
        res.update(mode=oct(st.st_mode & 0o7777), atime=st.st_atime_ns, mtime=st.st_mtime_ns, size=st.st_size)
        emit(res)
        os.close(fd)
    """)
    assert got == {
        "fchmod": "OK",
        "futimens": "OK",
        "ftruncate": "OK",
        "mode": "0o600",
        "atime": 1_000_000_000,
        "mtime": 2_000_000_000,
        "size": 4,
    }


@posix_case("readdir-while-mutating")
def _(ctx):
    """SPEC S35: entries untouched while a directory is read (with creates
    and deletes in between) are returned exactly once."""
    got = ctx.app("""
        w = sys.argv[1] + "/busy"; os.mkdir(w)
        for i in range(100):
            write_text(f"{w}/f{i:03d}", "x")
        seen = []
        with os.scandir(w) as it:
            for n, entry in enumerate(it):
                seen.append(entry.name)
                if n < 50:
                    os.unlink(f"{w}/f{n:03d}")
                    write_text(f"{w}/n{n:03d}", "y")
        emit({"seen": seen, "final": listing(w)})
    """)
    untouched = [f"f{i:03d}" for i in range(50, 100)]
    counts = {name: got["seen"].count(name) for name in untouched}
    assert counts == {name: 1 for name in untouched}
    assert len(got["seen"]) == len(set(got["seen"])), "readdir returned duplicates"
    assert got["final"] == sorted(untouched + [f"n{i:03d}" for i in range(50)])


@posix_case("truncate-with-open-fd")
def _(ctx):
    """SPEC S35: ftruncate and truncate(path) on a file that is open; the fd
    sees the new size and zero-filled extension."""
    got = ctx.app("""
        p = sys.argv[1] + "/t"
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"0123456789")
        os.ftruncate(fd, 4)
        shrunk = [os.fstat(fd).st_size, os.pread(fd, 64, 0).hex()]
        os.truncate(p, 8)
        grown = [os.fstat(fd).st_size, os.stat(p).st_size, os.pread(fd, 64, 0).hex()]
        os.close(fd)
        emit({"shrunk": shrunk, "grown": grown})
    """)
    assert got == {"shrunk": [4, b"0123".hex()], "grown": [8, 8, b"0123\0\0\0\0".hex()]}
    assert (ctx.host / "t").read_bytes() == b"0123\0\0\0\0"


@posix_case("hard-link")
def _(ctx):
    """SPEC S35, S33: link() inside the grant: link count 2, same st_ino for
    both names, content shared; unlink of one name leaves the other."""
    got = ctx.app("""
        w = sys.argv[1]; a = w + "/orig"; b = w + "/alias"
        write_text(a, "shared")
        os.link(a, b)
        sa, sb = os.stat(a), os.stat(b)
        write_text(b, "+more", "a")
        content_a = read_text(a)
        size_a = os.stat(a).st_size
        os.unlink(a)
        emit({"nlink": [sa.st_nlink, sb.st_nlink], "same_ino": sa.st_ino == sb.st_ino,
              "content_a": content_a, "size_a": size_a,
              "after_unlink": [os.stat(b).st_nlink, read_text(b)]})
    """)
    assert got == {
        "nlink": [2, 2],
        "same_ino": True,
        "content_a": "shared+more",
        "size_a": 11,
        "after_unlink": [1, "shared+more"],
    }
    assert os.stat(ctx.host / "alias").st_nlink == 1


@posix_case("hard-link-chain-unlink")
def _(ctx):
    """SPEC S35: three names of one file; unlinking the name last looked up
    and then another leaves the remaining name reachable with the right link
    count (pjdfstest link/00.t, link/03.t)."""
    got = ctx.app("""
        w = sys.argv[1]; os.chdir(w)
        write_text("a", "x"); os.link("a", "b"); os.link("b", "c")
        os.chmod("b", 0o640)
        os.unlink("a"); first = os.lstat("b").st_nlink
        os.unlink("c"); second = os.lstat("b").st_nlink
        os.rename("b", "d"); os.link("d", "e"); os.unlink("d")
        emit({"nlink": [first, second, os.lstat("e").st_nlink], "mode": oct(os.lstat("e").st_mode & 0o777)})
    """)
    assert got == {"nlink": [2, 1, 1], "mode": "0o640"}


@posix_case("host-hard-link-then-unlink")
def _(ctx):
    """SPEC S35: a second name made on the host while the app holds the
    file's node (the node's names are indexed only from then on):
    unlinking the first name through the mount leaves the second one
    reachable, with its content, link count and attributes; a rename over
    a name whose node has one name leaves the new file there."""
    got = ctx.app(
        """
        w, host = sys.argv[1], sys.argv[2]; os.chdir(w)
        write_text("a", "one"); write_text("x", "old"); write_text("y", "new")
        before = os.lstat("a").st_nlink; os.lstat("x")
        os.link(host + "/a", host + "/b")
        linked = [os.lstat("b").st_nlink, os.lstat("a").st_ino == os.lstat("b").st_ino]
        os.unlink("a")
        after = [os.lstat("b").st_nlink, read_text("b"), os.path.exists("a")]
        os.chmod("b", 0o600)
        os.rename("y", "x")
        emit({"before": before, "linked": linked, "after": after,
              "mode": oct(os.lstat("b").st_mode & 0o777), "x": read_text("x"), "y": os.path.exists("y")})
    """,
        str(ctx.host),
    )
    assert got == {
        "before": 1,
        "linked": [2, True],
        "after": [1, "one", False],
        "mode": "0o600",
        "x": "new",
        "y": False,
    }
    assert (ctx.host / "b").read_text() == "one" and not (ctx.host / "a").exists()


@posix_case("symlink-inside-grant")
def _(ctx):
    """SPEC S35, S33: a relative symlink to a file inside the grant can be
    created, read with readlink and followed."""
    got = ctx.app("""
        w = sys.argv[1]
        os.mkdir(w + "/sub")
        write_text(w + "/sub/target.txt", "via link")
        os.symlink("sub/target.txt", w + "/link")
        emit({"readlink": os.readlink(w + "/link"), "is_link": stat.S_ISLNK(os.lstat(w + "/link").st_mode),
              "content": read_text(w + "/link")})
    """)
    assert got == {"readlink": "sub/target.txt", "is_link": True, "content": "via link"}
    assert os.readlink(ctx.host / "link") == "sub/target.txt"


@posix_case("symlink-out-of-grant-not-followed")
def _(ctx):
    """SPEC S33: symlinks inside the grant (made on the host or by the app)
    that point via ../ at an ungranted sibling are not followed into it:
    ENOENT or EPERM, never its content."""
    os.symlink("../docs/secret.txt", ctx.host / "host-link")
    os.symlink("../docs", ctx.host / "host-dir-link")
    got = ctx.app("""
        w = sys.argv[1]
        os.symlink("../docs/secret.txt", w + "/app-link")
        emit({name: {"open": outcome(lambda: read_text(w + "/" + name)),
                     "list": listing(w + "/" + name) if name.endswith("dir-link") else None}
              for name in ("host-link", "host-dir-link", "app-link")})
    """)
    for name, res in got.items():
        assert res["open"].get("errno") in ("ENOENT", "EPERM"), (name, res)
    assert got["host-dir-link"]["list"] in ("ENOENT", "EPERM"), got


def _rename_exdev(ctx, dest_dir):
    got = ctx.app(
        """
        src = sys.argv[1] + "/moving.txt"; dst = sys.argv[2] + "/moving.txt"
        write_text(src, "stay")
        emit({"rename": attempt(os.rename, src, dst), "src": attempt(os.stat, src),
              "dst": attempt(os.stat, dst)})
    """,
        dest_dir,
    )
    assert got == {"rename": "EXDEV", "src": "OK", "dst": "ENOENT"}


@posix_case("rename-across-grants-exdev")
def _(ctx):
    """SPEC S32: rename between two different grants fails with EXDEV."""
    _rename_exdev(ctx, ctx.env.prov(ALPHA, LOCAL, "work2"))
    assert not (ctx.env.backing(LOCAL) / "work2/moving.txt").exists()


@posix_case("rename-across-providers-exdev")
def _(ctx):
    """SPEC S32: rename between two providers fails with EXDEV."""
    _rename_exdev(ctx, ctx.env.prov(ALPHA, DRIVE, "inbox"))
    assert not (ctx.env.backing(DRIVE) / "inbox/moving.txt").exists()


@posix_case("xattr-round-trip")
def _(ctx):
    """SPEC S35: user.* xattrs set, get, list and remove, stored on the
    backing file."""
    got = ctx.app("""
        p = sys.argv[1] + "/x"
        write_text(p, "x")
        os.setxattr(p, "user.test", b"value1")
        got = os.getxattr(p, "user.test").decode()
        listed = "user.test" in os.listxattr(p)
        os.removexattr(p, "user.test")
        os.setxattr(p, "user.keep", b"kept")
        emit({"get": got, "listed": listed, "after_remove": attempt(os.getxattr, p, "user.test"),
              "list": sorted(n for n in os.listxattr(p) if n.startswith("user.test") or n == "user.keep")})
    """)
    assert got == {"get": "value1", "listed": True, "after_remove": "ENODATA", "list": ["user.keep"]}
    assert os.getxattr(ctx.host / "x", "user.keep") == b"kept"
    assert "user.test" not in os.listxattr(ctx.host / "x")


@posix_case("xattr-selinux-label-not-supported")
def _(ctx):
    """SPEC S35, issue 21: the one exception to xattrs passing through.
    `security.selinux` is the kernel's (where SELinux runs it answers
    without asking the daemon): the mount says it does not support it, even
    for a host file that carries one, and does not list it. Other names
    still pass through. `ls -l`, which asks each file for the label, then
    asks this device once (coreutils caches "not supported"), where it
    asked every file before."""
    for i in range(20):
        (ctx.host / f"f{i}").write_text("x")
    os.setxattr(ctx.host / "f0", "security.selinux", b"system_u:object_r:tmp_t:s0\0")
    os.setxattr(ctx.host / "f0", "user.keep", b"kept")
    got = ctx.app("""
        import subprocess
        p = sys.argv[1] + "/f0"
        ls = subprocess.run(["strace", "-f", "-qq", "-e", "trace=getxattr,lgetxattr", "-o", "/dev/stdout",
                             "ls", "-l", sys.argv[1]], capture_output=True, text=True)
        emit({"get": attempt(os.getxattr, p, "security.selinux"),
              "set": attempt(os.setxattr, p, "security.selinux", b"x"),
              "remove": attempt(os.removexattr, p, "security.selinux"),
              "list": sorted(os.listxattr(p)), "user": os.getxattr(p, "user.keep").decode(),
              "ls": ls.returncode, "label-asks": ls.stdout.count('"security.selinux"')})
    """)
    # errno 95: Python names it ENOTSUP (the same number as EOPNOTSUPP).
    assert got["get"] == got["set"] == got["remove"] == "ENOTSUP", got
    assert got["list"] == ["user.keep"] and got["user"] == "kept", got
    assert got["ls"] == 0 and got["label-asks"] == 1, got
    assert os.getxattr(ctx.host / "f0", "security.selinux") == b"system_u:object_r:tmp_t:s0\0"


@posix_case("xattr-of-open-file")
def _(ctx):
    """SPEC S35: an open file's xattrs read the same by name and through the
    descriptor, a host-side change shows at once, and fgetxattr still works
    once the name is gone."""
    (ctx.host / "open").write_text("x")
    os.setxattr(ctx.host / "open", "user.v", b"one")
    app = ctx.env.app_session(
        ALPHA,
        """
        p = sys.argv[1] + "/open"
        fd = os.open(p, os.O_RDWR)
        os.write(fd, b"y")
        step({"by-name": os.getxattr(p, "user.v").decode(), "by-fd": os.getxattr(fd, "user.v").decode(),
              "missing": attempt(os.getxattr, fd, "user.none")})
        res = {"changed": os.getxattr(p, "user.v").decode()}
        os.unlink(p)
        res["after-unlink"] = os.getxattr(fd, "user.v").decode()
        os.close(fd)
        emit(res)
    """,
        ctx.work,
    )
    assert app.recv() == {"by-name": "one", "by-fd": "one", "missing": "ENODATA"}
    os.setxattr(ctx.host / "open", "user.v", b"two")
    app.send()
    assert app.recv() == {"changed": "two", "after-unlink": "two"}
    assert app.finish() == 0, app.stderr()


@posix_case("o-direct")
def _(ctx):
    """SPEC S35: O_DIRECT write and read back with page-aligned buffers."""
    got = ctx.app("""
        p = sys.argv[1] + "/direct"
        out = mmap.mmap(-1, 8192); out.write(bytes(range(256)) * 32)
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
        written = os.pwritev(fd, [out], 0)
        back = mmap.mmap(-1, 8192)
        read = os.preadv(fd, [back], 0)
        os.close(fd)
        emit({"written": written, "read": read, "same": back[:] == out[:]})
    """)
    assert got == {"written": 8192, "read": 8192, "same": True}
    assert (ctx.host / "direct").read_bytes() == bytes(range(256)) * 32


@posix_case("posix-fallocate")
def _(ctx):
    """SPEC S35: posix_fallocate extends the file and reserves blocks."""
    got = ctx.app("""
        p = sys.argv[1] + "/alloc"
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        os.posix_fallocate(fd, 0, 1 << 20)
        size = os.fstat(fd).st_size
        os.pwrite(fd, b"head", 0)
        os.close(fd)
        emit({"size": size, "head": read_bytes(p)[:8].hex()})
    """)
    assert got == {"size": 1 << 20, "head": (b"head" + b"\0" * 4).hex()}
    st = os.stat(ctx.host / "alloc")
    assert st.st_size == 1 << 20 and st.st_blocks * 512 >= 1 << 20


@posix_case("copy-file-range")
def _(ctx):
    """SPEC S9, S35: copy_file_range between two files of the grant."""
    got = ctx.app("""
        w = sys.argv[1]
        data = bytes(range(256)) * 400
        with open(w + "/src", "wb") as f:
            f.write(data)
        s = os.open(w + "/src", os.O_RDONLY)
        d = os.open(w + "/dst", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        total = 0
        while total < len(data):
            n = os.copy_file_range(s, d, len(data) - total)
            if n == 0:
                break
            total += n
        os.close(s); os.close(d)
        emit({"copied": total, "same": read_bytes(w + "/dst") == data})
    """)
    assert got == {"copied": 102400, "same": True}
    assert (ctx.host / "dst").read_bytes() == (ctx.host / "src").read_bytes()


@posix_case("utime-chmod-round-trip")
def _(ctx):
    """SPEC S35: utimensat with nanoseconds and chmod are stored and read back."""
    atime, mtime = 1_000_000_000_123_456_789, 1_200_000_000_987_654_321
    got = ctx.app(
        """
        p = sys.argv[1] + "/times"
        write_text(p, "t")
        os.utime(p, ns=(int(sys.argv[2]), int(sys.argv[3])))
        os.chmod(p, 0o640)
        st = os.stat(p)
        emit({"atime": st.st_atime_ns, "mtime": st.st_mtime_ns, "mode": stat.S_IMODE(st.st_mode)})
    """,
        atime,
        mtime,
    )
    assert got == {"atime": atime, "mtime": mtime, "mode": 0o640}
    st = os.stat(ctx.host / "times")
    assert (st.st_atime_ns, st.st_mtime_ns, stat.S_IMODE(st.st_mode)) == (atime, mtime, 0o640)


@posix_case("fsync")
def _(ctx):
    """SPEC S35: after write + fsync/fdatasync (file and directory), the data
    is in the backing file while the fd is still open."""
    app = ctx.env.app_session(
        ALPHA,
        """
        p = sys.argv[1] + "/durable"
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"durable bytes")
        res = {"fsync": attempt(os.fsync, fd), "fdatasync": attempt(os.fdatasync, fd)}
        dfd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
        res["dir-fsync"] = attempt(os.fsync, dfd)
        os.close(dfd)
        step(res)
        os.close(fd)
    """,
        ctx.work,
    )
    assert app.recv() == {"fsync": "OK", "fdatasync": "OK", "dir-fsync": "OK"}
    assert (ctx.host / "durable").read_bytes() == b"durable bytes"
    app.send()
    assert app.finish() == 0, app.stderr()


@posix_case("mmap-write-msync")
def _(ctx):
    """SPEC S35: a MAP_SHARED writable mapping, msync, then read back through
    a new open and on the host."""
    got = ctx.app("""
        p = sys.argv[1] + "/mapped"
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.ftruncate(fd, 8192)
        m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        m[0:5] = b"hello"; m[4096:4101] = b"world"
        m.flush()
        m.close(); os.close(fd)
        data = read_bytes(p)
        emit({"size": len(data), "head": data[:5].decode(), "second": data[4096:4101].decode()})
    """)
    assert got == {"size": 8192, "head": "hello", "second": "world"}
    data = (ctx.host / "mapped").read_bytes()
    assert data[:5] == b"hello" and data[4096:4101] == b"world"


@posix_case("owner-of-new-files", allow_other=True)
def _(ctx):
    """SPEC S35: files and folders that an app process running as uid/gid
    65534 creates in a world-writable granted folder belong to 65534 on the
    backing filesystem."""
    (ctx.host / "pub").mkdir()
    os.chmod(ctx.host / "pub", 0o777)
    got = ctx.app(
        """
        pub = sys.argv[1] + "/pub"
        def create():
            write_text(pub + "/owned.txt", "mine")
            os.mkdir(pub + "/owned-dir")
            st = os.stat(pub + "/owned.txt")
            return [st.st_uid, st.st_gid]
        emit(as_user(%d, %d, create))
    """
        % (NOBODY, NOBODY)
    )
    assert got == {"value": [NOBODY, NOBODY]}
    for name in ("owned.txt", "owned-dir"):
        st = os.stat(ctx.host / "pub" / name)
        assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY), name


@posix_case("set-id-bits-cleared-on-change", allow_other=True)
def _(ctx):
    """SPEC S35: as on the backing filesystem, a write, a truncate or an
    O_TRUNC open by a process without CAP_FSETID (uid 65534) clears the
    file's setuid bit, and its setgid bit when the group may execute it or
    the writer is not in the file's group;
    the same changes by root keep both, and a chown clears both even for
    root. The daemon clears them itself on writes and truncates: it
    negotiates FUSE_HANDLE_KILLPRIV_V2, and its own writes, made with
    CAP_FSETID, would not."""
    pub = ctx.host / "pub"
    pub.mkdir()
    os.chmod(pub, 0o777)
    modes = {
        "write": 0o6775,
        "truncate": 0o6775,
        "otrunc": 0o6775,
        "setgid-no-gx": 0o2764,
        "root-write": 0o6775,
        "root-truncate": 0o6775,
        "root-chown": 0o6775,
    }
    modes["setgid-other-group"] = 0o2766  # group root, writable by others
    for name, mode in modes.items():
        (pub / name).write_bytes(b"x" * 100)
        os.chown(pub / name, NOBODY, 0 if name == "setgid-other-group" else NOBODY)
        os.chmod(pub / name, mode)
    got = ctx.app(
        """
        pub = sys.argv[1] + "/pub/"
        def append(path):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            os.write(fd, b"more"); os.write(fd, b"again")
            os.close(fd)
        def change():
            append(pub + "write")
            os.truncate(pub + "truncate", 10)
            os.close(os.open(pub + "otrunc", os.O_WRONLY | os.O_TRUNC))
            append(pub + "setgid-no-gx")
            append(pub + "setgid-other-group")
            return oct(stat.S_IMODE(os.stat(pub + "write").st_mode))
        seen = as_user(%d, %d, change)
        append(pub + "root-write")
        os.truncate(pub + "root-truncate", 10)
        os.chown(pub + "root-chown", %d, %d)
        emit(seen)
    """
        % (NOBODY, NOBODY, NOBODY, NOBODY)
    )
    assert got == {"value": oct(0o775)}, got
    expected = {
        "write": 0o775,
        "truncate": 0o775,
        "otrunc": 0o775,
        "setgid-no-gx": 0o2764,
        "setgid-other-group": 0o766,
        "root-write": 0o6775,
        "root-truncate": 0o6775,
        "root-chown": 0o775,
    }
    on_host = {name: stat.S_IMODE(os.stat(pub / name).st_mode) for name in modes}
    assert on_host == expected
    assert os.path.getsize(pub / "write") == 109 and os.path.getsize(pub / "otrunc") == 0


@posix_case("eacces-for-other-user", allow_other=True)
def _(ctx):
    """SPEC S32, S35: uid 65534 cannot open a root-owned 0600 file: EACCES
    from the backing permissions, passed through (not EPERM)."""
    (ctx.host / "private.txt").write_text("root only")
    os.chmod(ctx.host / "private.txt", 0o600)
    got = ctx.app(
        """
        p = sys.argv[1] + "/private.txt"
        emit(as_user(%d, %d, lambda: {"read": attempt(open_close, p, os.O_RDONLY),
                                      "write": attempt(open_close, p, os.O_WRONLY)}))
    """
        % (NOBODY, NOBODY)
    )
    assert got == {"value": {"read": "EACCES", "write": "EACCES"}}


@posix_case("sticky-directory", allow_other=True)
def _(ctx):
    """SPEC S35: in a 1777 directory uid 65534 cannot delete or rename root's
    file (EPERM or EACCES, as the backing filesystem says)."""
    sticky = ctx.host / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    (sticky / "rootfile").write_text("root's")
    got = ctx.app(
        """
        d = sys.argv[1] + "/sticky"
        emit(as_user(%d, %d, lambda: {"unlink": attempt(os.unlink, d + "/rootfile"),
                                      "rename": attempt(os.rename, d + "/rootfile", d + "/stolen")}))
    """
        % (NOBODY, NOBODY)
    )
    assert got["value"]["unlink"] in ("EPERM", "EACCES"), got
    assert got["value"]["rename"] in ("EPERM", "EACCES"), got
    assert (sticky / "rootfile").read_text() == "root's"


@posix_case("setgid-directory")
def _(ctx):
    """SPEC S35: new files and folders in a setgid directory inherit the
    directory's group (and new folders the setgid bit)."""
    sg = ctx.host / "sgid"
    sg.mkdir()
    os.chown(sg, -1, 12345)
    os.chmod(sg, 0o2775)
    got = ctx.app("""
        d = sys.argv[1] + "/sgid"
        write_text(d + "/new.txt", "n")
        os.mkdir(d + "/newdir")
        emit({"file_gid": os.stat(d + "/new.txt").st_gid, "dir_gid": os.stat(d + "/newdir").st_gid})
    """)
    assert got == {"file_gid": 12345, "dir_gid": 12345}
    assert os.stat(sg / "new.txt").st_gid == 12345
    st = os.stat(sg / "newdir")
    assert st.st_gid == 12345 and st.st_mode & stat.S_ISGID


# ---------------------------------------------------------------------------
# SQLite, locks, statfs


SQLITE = """
import sqlite3
db, mode = sys.argv[1] + "/app.db", sys.argv[2]
con = sqlite3.connect(db)
journal = con.execute(f"PRAGMA journal_mode={mode}").fetchone()[0]
con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
with con:
    con.executemany("INSERT INTO t(v) VALUES (?)", [(f"row{i}",) for i in range(1000)])
con.close()
con = sqlite3.connect(db)
emit({"journal": journal, "count": con.execute("SELECT count(*) FROM t").fetchone()[0],
      "integrity": con.execute("PRAGMA integrity_check").fetchone()[0]})
con.close()
"""


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_sqlite_in_granted_folder(env, journal):
    """SPEC S35: an SQLite database inside a granted read-write folder works
    from an app process (rollback journal and WAL with its shared-memory
    mapping): 1000 rows in a transaction, reopened and counted."""
    ctx = make_ctx(env)
    got = ctx.app(SQLITE, journal)
    assert got == {"journal": journal, "count": 1000, "integrity": "ok"}
    con = sqlite3.connect(ctx.host / "app.db")
    try:
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1000
    finally:
        con.close()


LOCK_HOLDER = """
kind, path = sys.argv[2], sys.argv[1] + "/lockfile"
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
lock(kind, fd)
step({"locked": True})
unlock(kind, fd)
step({"released": True})
os.close(fd)
"""

LOCK_PROBE = """
kind, path = sys.argv[2], sys.argv[1] + "/lockfile"
fd = os.open(path, os.O_RDWR)
emit({"try": attempt(lock, kind, fd, False)})
os.close(fd)
"""


@pytest.mark.parametrize("kind", ["flock", "fcntl"])
def test_locks_between_app_processes(env, kind):
    """SPEC S35: while one app process holds an exclusive flock/fcntl lock,
    another's non-blocking attempt fails with EWOULDBLOCK (EAGAIN; EACCES
    is POSIX-allowed for F_SETLK); after release it succeeds."""
    ctx = make_ctx(env)
    holder = env.app_session(ALPHA, LOCK_HOLDER, ctx.work, kind)
    assert holder.recv() == {"locked": True}
    busy = ctx.app(LOCK_PROBE, kind)["try"]
    assert busy in (("EAGAIN",) if kind == "flock" else ("EAGAIN", "EACCES")), busy
    holder.send()
    assert holder.recv() == {"released": True}
    assert ctx.app(LOCK_PROBE, kind) == {"try": "OK"}
    holder.send()
    assert holder.finish() == 0, holder.stderr()


def test_statfs_and_df(env):
    """SPEC S35: statfs works on a granted folder: `df` exits 0 inside an app
    process and os.statvfs reports nonzero f_blocks."""
    ctx = make_ctx(env)
    got = ctx.app("""
        import subprocess
        p = subprocess.run(["df", sys.argv[1]], capture_output=True, text=True, timeout=30)
        st = os.statvfs(sys.argv[1])
        emit({"df": p.returncode, "df_err": p.stderr, "f_blocks": st.f_blocks, "f_bsize": st.f_bsize})
    """)
    assert got["df"] == 0, got["df_err"]
    assert got["f_blocks"] > 0 and got["f_bsize"] > 0, got


HOST_CHANGES = """
view, host = sys.argv[1], sys.argv[2]
start_accessing(view)
a, b = os.path.join(view, "s.txt"), os.path.join(host, "s.txt")
write_text(a, "one")
os.stat(a)                                   # the kernel now caches the entry (1 s)
os.unlink(b)                                 # deleted on the host
created = outcome(lambda: write_text(a, "two"))
after_create = read_text(b)
os.rename(b, os.path.join(host, "t.txt"))    # replaced on the host
write_text(b, "three")
replaced = outcome(lambda: read_text(a))
os.unlink(b)
deleted = attempt(open_close, a, os.O_RDONLY)
emit({"create": created, "host": after_create, "replaced": replaced, "deleted": deleted})
"""


def test_host_changes_show_through_cached_names(env):
    """SPEC S35, S1: a file deleted or replaced on the host right after the
    app looked it up (its entry still in the kernel's cache) behaves as on
    the host: open(O_CREAT) creates it anew, a read gets the new file, a
    read after the delete gets ENOENT. The daemon answers an open of a name
    that now names another file, or none, with ESTALE, which makes the
    kernel look the name up again."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    got = env.app_json(ALPHA, HOST_CHANGES, env.prov(ALPHA, LOCAL, "docs"), env.backing(LOCAL) / "docs")
    assert got == {"create": {"ok": None}, "host": "two", "replaced": {"ok": "three"}, "deleted": "ENOENT"}


def test_many_files_and_folders_open_at_once(env):
    """SPEC S35 (as on the host), S37: an app keeps 1,500 files and 300 folders
    open at the same time. The daemon holds a descriptor for each, so it must
    not be bound by the usual soft limit of 1,024 descriptors: it is started
    here under a soft limit of 256 and raises its own."""
    folder = env.backing(LOCAL) / "many"
    folder.mkdir()
    for i in range(1500):
        (folder / f"file-{i:04d}").touch()
    for i in range(300):
        (folder / f"dir-{i:03d}").mkdir()
    env.grant(ALPHA, f"{LOCAL}:many")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard >= 4096, f"this machine's hard limit ({hard}) is too low for the test"
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        env.mount()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    # The descriptor table was grown at start, not by the requests below:
    # each growth of a shared table waits for an RCU grace period (~10 ms).
    status = Path(f"/proc/{env.daemon_pid()}/status").read_text()
    table_size = int(next(line.split()[1] for line in status.splitlines() if line.startswith("FDSize:")))
    assert table_size >= 4096, status
    got = env.app_json(
        ALPHA,
        """
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        base = sys.argv[1]
        start_accessing(base)
        files, dirs, errors = [], [], {}
        for name in sorted(os.listdir(base)):
            try:
                if name.startswith("dir-"):
                    dirs.append(os.open(os.path.join(base, name), os.O_RDONLY | os.O_DIRECTORY))
                else:
                    files.append(os.open(os.path.join(base, name), os.O_RDONLY))
            except OSError as exc:
                errors[ename(exc)] = errors.get(ename(exc), 0) + 1
        reads = sum(1 for fd in files if os.read(fd, 1) == b"")
        for fd in files + dirs:
            os.close(fd)
        emit({"files": len(files), "dirs": len(dirs), "errors": errors, "reads": reads})
    """,
        env.prov(ALPHA, LOCAL, "many"),
    )
    assert got == {"files": 1500, "dirs": 300, "errors": {}, "reads": 1500}
