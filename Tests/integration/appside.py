"""App-side prelude for ScopeFS integration tests.

This file is NOT imported by pytest. Its source text is prepended to every
snippet that the harness runs with ``python3 -c`` (as an app process through
``scopefs run --app``, or as a plain host process for the inspect view), so
snippets can report results as JSON with errno *names* (EPERM, ENOENT, ...)
instead of tracebacks. It must stay dependency-free (standard library only)
and must not touch the filesystem at import time.
"""

import errno
import fcntl
import json
import mmap
import os
import signal
import stat
import sys


def ename(exc):
    """Errno name of an OSError, e.g. 'EPERM'."""
    return errno.errorcode.get(exc.errno, str(exc.errno))


def attempt(fn, *args, **kwargs):
    """Run fn; return 'OK' or the errno name of the OSError it raised."""
    try:
        fn(*args, **kwargs)
        return "OK"
    except OSError as exc:
        return ename(exc)


def outcome(fn, *args, **kwargs):
    """Run fn; return {'ok': value} or {'errno': NAME}."""
    try:
        return {"ok": fn(*args, **kwargs)}
    except OSError as exc:
        return {"errno": ename(exc)}


def emit(obj):
    """Print one JSON line and flush (the harness parses the last line)."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def step(obj):
    """Emit obj, then block until the test sends the next line on stdin."""
    emit(obj)
    line = sys.stdin.readline()
    if not line:
        raise SystemExit(0)
    return line.strip()


def start_accessing(*paths):
    """Start accessing each path's security scope (SPEC S6, S12), as an app
    must before content operations in the default, strict, mount (S9);
    empty paths are skipped. The scopes last until the process exits."""
    for path in paths:
        if path:
            os.setxattr(path, "user.scopefs.start", b"")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_text(path):
    return read_bytes(path).decode("utf-8", "replace")


def write_text(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)


def listing(path):
    """Sorted directory listing, or the errno name."""
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        return ename(exc)


def open_close(path, flags, mode=0o644):
    os.close(os.open(path, flags, mode))


def _write_result(fd, obj):
    data = json.dumps(obj).encode()
    while data:
        data = data[os.write(fd, data) :]


def in_child(fn):
    """Run fn in a forked child; return {'value': ...}, {'errno': NAME},
    {'exception': repr} or {'signal': 'SIGBUS'} if the child was killed."""
    sys.stdout.flush()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            result = {"value": fn()}
        except OSError as exc:
            result = {"errno": ename(exc)}
        except BaseException as exc:  # report anything, never unwind into the parent's code
            result = {"exception": repr(exc)}
        _write_result(wfd, result)
        os._exit(0)
    os.close(wfd)
    chunks = []
    while True:
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(rfd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return {"signal": signal.Signals(os.WTERMSIG(status)).name}
    if chunks:
        return json.loads(b"".join(chunks))
    return {"exit": os.waitstatus_to_exitcode(status)}


def drop_to(uid, gid):
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def as_user(uid, gid, fn):
    """Run fn in a forked child that dropped to uid/gid (no supplementary groups)."""

    def child():
        drop_to(uid, gid)
        return fn()

    return in_child(child)


def lock(kind, fd, blocking=True):
    """Take an exclusive 'flock' or 'fcntl' (F_SETLK[W]) lock on fd."""
    nb = 0 if blocking else fcntl.LOCK_NB
    if kind == "flock":
        fcntl.flock(fd, fcntl.LOCK_EX | nb)
    else:
        fcntl.lockf(fd, fcntl.LOCK_EX | nb)


def unlock(kind, fd):
    if kind == "flock":
        fcntl.flock(fd, fcntl.LOCK_UN)
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
