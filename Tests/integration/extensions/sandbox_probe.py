"""What a process learns of the sandbox it runs in, as an attacker would
look (issue 46, finding 1 and 4): its identity and capabilities, whether
the kernel's knobs open for writing, /dev/shm and /tmp, /sys, and its
seccomp status. Opened for writing, a knob is never written: a success is
the finding. Run as an app (`python3 sandbox_probe.py`) or imported by
the reporting extension."""

import errno
import json
import os

# Each changes the kernel for the whole machine and is guarded by its mode.
KERNEL_KNOBS = [
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/vm/drop_caches",
    "/proc/sys/kernel/hostname",
    "/proc/sys/fs/protected_symlinks",
    "/proc/sysrq-trigger",
]


def _errno_of(action) -> str:
    try:
        action()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))


def _open_for_writing(path: str) -> None:
    os.close(os.open(path, os.O_WRONLY))


def _shared_memory_lock() -> None:
    import multiprocessing

    multiprocessing.Lock()


def _write_in(folder: str) -> None:
    path = os.path.join(folder, f"probe-{os.getpid()}")
    with open(path, "w") as f:
        f.write("x")
    os.unlink(path)


def _new_user_namespace() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        raise OSError(ctypes.get_errno(), "unshare")


def _knob(path: str) -> str:
    result = _errno_of(lambda: _open_for_writing(path))
    return "WRITABLE" if result == "ok" else result


def probe() -> dict:
    status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
    return {
        "uid": os.getuid(),
        "uid_map": open("/proc/self/uid_map").read(),
        "status": {key: status[key].strip() for key in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp")},
        "knobs": {path: _knob(path) for path in KERNEL_KNOBS},
        "shm_lock": _errno_of(_shared_memory_lock),
        "shm_write": _errno_of(lambda: _write_in("/dev/shm")),
        "tmp_write": _errno_of(lambda: _write_in("/tmp")),
        "sys": os.path.exists("/sys/kernel"),
        "unshare_user": _errno_of(_new_user_namespace),
    }


if __name__ == "__main__":
    print(json.dumps(probe()))
