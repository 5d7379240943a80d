"""Harness for ScopeFS real-mount integration tests.

Everything here drives the real `scopefs` binary through subprocesses and a
real FUSE mount (/dev/fuse). Filesystem accesses to the mount are always made
from child processes with a timeout, never from the pytest process itself, so
a wedged daemon makes a test fail instead of hanging the whole session.

Layout of one test world (see `Env`):

    ROOT/state/                 --state directory
    ROOT/backing/local/...      backing directory of provider "local"
    ROOT/backing/drive/...      backing directory of provider "drive"
    ROOT/backing/escape/        a sibling of the providers (for `../` tests)
    ROOT/mnt/                   the mountpoint
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
DEFAULT_BIN = REPO_ROOT / ".build" / "debug" / "scopefs"
FUSE_DEVICE = "/dev/fuse"

ALPHA = "com.example.alpha"
BETA = "com.example.beta"
LOCAL = "local"
DRIVE = "drive"
NOBODY = 65534

# 8 KiB so that mmap tests span two pages; a recognisable, non-repeating pattern.
REPORT_BYTES = b"".join(b"report line %05d\n" % i for i in range(482))[:8192]

MOUNT_TIMEOUT = 20  # `scopefs mount` must return once the mount is ready
CLI_TIMEOUT = 30
APP_TIMEOUT = 60
DAEMON_EXIT_TIMEOUT = 10
FD_SLACK = 8

CRASH_MARKERS = (
    "Fatal error",
    "Stack dump",
    "Current stack trace",
    "Program crashed",
    "Segmentation fault",
    "Illegal instruction",
)

# The isolation layer the test worlds are initialised on (issue 34): the
# state directory's SQLite file (the default), or "postgresql", the fleet's
# store: each world its own database on one throwaway server, logged in as
# the owner's role, so that `scopefs grant` and the rest write there and
# the daemon serves what it reads from there (`make test-integration-postgresql`).
STORE = os.environ.get("SCOPEFS_IT_STORE", "sqlite")
if STORE not in ("sqlite", "postgresql"):
    raise SystemExit(f"SCOPEFS_IT_STORE={STORE}: expected sqlite or postgresql")
_postgres = None

# Why a test is about the SQLite store alone: the `sqlite_store` marker's
# reasons, which a run on the fleet's store prints as it skips the test.
ON_THE_FILE = "about the SQLite file itself (its loss, corruption or direct writes)"
ITEMS_MOVE = "items are relocated (renames, deletions) in the SQLite store only; on a fleet only the owner's role may change items"
GRANTS_NAME_PATHS = (
    "on a fleet a grant covers what is at its path: items are not checked by device and inode (decision 62)"
)
EXTENSIONS = (
    "the tests' extension is a command of their own with --writable, which a fleet refuses (decision 63);"
    " Tests/fleet/test_fleet_extensions.py and test_extension_remotes.py run built-in extensions on a fleet"
)
RUNNERS = "`scopefs test` and `chaos` are refused on a fleet: their events and daemon commands are one host's"


# The start of a shell session of a non-root owner (uid 65534), run as root
# in a private mount namespace (`unshare --mount --propagation private`),
# with $root (owned by 65534) set: /dev/fuse there is 0666, as Debian's
# udev leaves it (some machines, this one among them, have it 0600, and
# libfuse does not fall back to fusermount3 on EACCES), and `as_owner CMD`
# runs CMD as the owner. The mount and the daemon stay in that namespace.
NON_ROOT_OWNER_PRELUDE = r"""
set -e
mount -t tmpfs -o mode=755 tmpfs "$root/dev"
mknod -m 666 "$root/dev/fuse" c 10 229
mount --bind "$root/dev/fuse" /dev/fuse
as_owner() { setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$root" XDG_RUNTIME_DIR= "$@"; }
"""

# After NON_ROOT_OWNER_PRELUDE with $binary set: `s ARGS` runs scopefs as
# the owner on $root/state, made here with the provider `local` on
# $root/provider and the app com.example.alpha.
NON_ROOT_OWNER_STATE = r"""
s() { as_owner "$binary" --state "$root/state" "$@"; }
s init >/dev/null
s provider add local "$root/provider" >/dev/null
s app add com.example.alpha >/dev/null
"""


@contextlib.contextmanager
def non_root_owner_root(prefix: str, folders: tuple[str, ...], files: dict[str, bytes] | None = None) -> Iterator[Path]:
    """A folder in /tmp for a NON_ROOT_OWNER_PRELUDE session: `folders`,
    `dev` (the prelude's) and `files` in it, all owned by the owner (uid
    65534); removed at the end unless a mount still lives in it."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        os.chmod(root, 0o755)
        for folder in (*folders, "dev"):
            (root / folder).mkdir(parents=True, exist_ok=True)
        for name, data in (files or {}).items():
            (root / name).write_bytes(data)
        for path in [root, *root.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        yield root
    finally:
        safe_rmtree(root)


def run_non_root_session(session: str, root: Path, *args: str, what: str = "a non-root owner's session"):
    """Runs `session` (a shell script that starts with NON_ROOT_OWNER_PRELUDE
    and reads `$1` = root, `$2` = the scopefs binary, then `args`) as root
    in a private mount namespace, within 90 s."""
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", session, "session"]
    return run_bounded([*argv, str(root), str(scopefs_bin().resolve()), *args], 90, dict(os.environ), what=what)


def postgres_server():
    """The session's PostgreSQL server, started on first use and stopped at exit."""
    global _postgres
    if _postgres is None:
        import atexit

        from postgres_server import PostgresServer

        _postgres = PostgresServer()
        atexit.register(_postgres.close)
    return _postgres


APPSIDE_SOURCE = (HERE / "appside.py").read_text()
SNIPPET_MARKER = "\n# ---- snippet ----\n"
PRELUDE_LINES = (APPSIDE_SOURCE + SNIPPET_MARKER).count("\n")


# ---------------------------------------------------------------------------
# waiting for a condition

WAIT_TIMEOUT = 5.0  # what the daemon does asynchronously (events, exits, host changes) is seen within 1-2 s
WAIT_INTERVAL = 0.1  # each probe may start a CLI process: do not spin on a 2-core machine

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """wait_for() gave up: the message names what was awaited and the last value seen."""

    def __init__(self, message: str, last):
        super().__init__(message)
        self.last = last


def wait_for(
    what: str | Callable[[], str],
    probe: Callable[[], T],
    done: Callable[[T], bool] = bool,
    timeout: float = WAIT_TIMEOUT,
    interval: float = WAIT_INTERVAL,
) -> T:
    """Call probe() until done(value) holds and return that value; after
    `timeout` seconds fail with WaitTimeout, naming `what` and the last value
    (`what` may be a function, for details only worth reading on failure).

    The one way these tests wait for something to happen (issue 30): on the
    state they need, never for a fixed time, so a slow machine only makes
    them slower and a fast one does not wait for nothing. A `time.sleep`
    elsewhere is the point of its test (nothing happens for N s, a load's
    pace) and says so in a comment."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value):
            return value
        if time.monotonic() >= deadline:
            shown = repr(value)
            if len(shown) > 2000:
                shown = shown[:2000] + "…"
            awaited = what() if callable(what) else what
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {awaited}; last value seen: {shown}", value)
        time.sleep(interval)


# ---------------------------------------------------------------------------
# binary / environment discovery


def scopefs_bin() -> Path:
    """SCOPEFS_BIN, else REPO/.build/debug/scopefs."""
    return Path(os.environ.get("SCOPEFS_BIN", str(DEFAULT_BIN)))


def binary_problem() -> str | None:
    """Why the binary cannot be used, or None."""
    b = scopefs_bin()
    if not b.exists():
        return f"scopefs binary not found at {b} (build it, or set SCOPEFS_BIN)"
    if not os.access(b, os.X_OK):
        return f"scopefs binary at {b} is not executable"
    return None


_help_cache: dict[str, str] = {}


def subcommand_help(sub: str) -> str:
    """Text of `scopefs SUB --help` (stdout + stderr), cached."""
    if sub not in _help_cache:
        try:
            p = subprocess.run([str(scopefs_bin()), sub, "--help"], capture_output=True, text=True, timeout=CLI_TIMEOUT)
            _help_cache[sub] = p.stdout + p.stderr
        except (OSError, subprocess.TimeoutExpired):
            _help_cache[sub] = ""
    return _help_cache[sub]


def confines_by_default() -> bool:
    """`scopefs run` confines unless told --no-sandbox (SPEC S5, amended);
    a binary from before that (the baseline a regression test is first seen
    failing on) has no such flag."""
    return "--no-sandbox" in subcommand_help("run")


def supports_lenient_scopes() -> bool:
    """Strict scopes arrive later; mount lenient when `mount --help` offers --scopes."""
    return "--scopes" in subcommand_help("mount")


# ---------------------------------------------------------------------------
# mounts, processes


def _unescape_mount_field(field: str) -> str:
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mountinfo_entries() -> list[tuple[str, str]]:
    """(mount point, fstype) pairs from /proc/self/mountinfo."""
    entries = []
    # Mount points are bytes: any mount on the machine may have a name that
    # is not UTF-8; surrogateescape keeps it as os.fsdecode would.
    with open("/proc/self/mountinfo", errors="surrogateescape") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            entries.append((_unescape_mount_field(fields[4]), right.split()[0]))
    return entries


def proc_mounts_points() -> list[str]:
    with open("/proc/mounts", errors="surrogateescape") as f:
        return [_unescape_mount_field(line.split()[1]) for line in f]


def mount_count(path: Path) -> int:
    return proc_mounts_points().count(str(path))


def mounts_under(root: Path) -> list[str]:
    r = str(root)
    return [m for m in proc_mounts_points() if m == r or m.startswith(r + "/")]


def safe_rmtree(root: Path) -> bool:
    """rm -rf root unless a mount still lives inside it."""
    if mounts_under(root):
        return False
    shutil.rmtree(root, ignore_errors=True)
    return True


def set_child_subreaper() -> bool:
    """Make this process the reaper of orphaned descendants, so the daemon
    that `scopefs mount` leaves behind becomes our child and its exit status
    can be read with waitpid()."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_CHILD_SUBREAPER = 36
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except OSError:
        return False


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, ppid) of pid, or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rindex(")") + 2 :].split()
    return rest[0], int(rest[1])


def wait_for_exit(pid: int, timeout: float) -> tuple[str, int | None]:
    """Wait until pid is gone. Returns ("exited", waitstatus) when it was our
    child (reaped here), ("gone", None) when it vanished without us being
    able to reap it, or ("alive", None) on timeout."""

    def state() -> tuple[str, int | None]:
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
            if got == pid:
                return "exited", status
        except ChildProcessError:
            st = _proc_stat(pid)
            if st is None or (st[0] in ("Z", "X") and st[1] != os.getpid()):
                return "gone", None
        return "alive", None

    try:
        return wait_for(f"process {pid} to exit", state, lambda got: got[0] != "alive", timeout, interval=0.05)
    except WaitTimeout:
        return "alive", None


def sleeping(pid: int) -> bool:
    """Whether pid's main thread sleeps in nanosleep (usleep, Thread.sleep):
    a CLI that polls (`events --follow`, `query --follow`) sleeps only once
    it has taken its starting point, so a test can wait for that."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() == "hrtimer_nanosleep"
    except OSError:
        return False


def reading_a_socket(pid: int) -> bool:
    """Whether a thread of pid is blocked reading a Unix stream socket: an
    agent (`scopefs agent`, `scopefs test`) has sent the daemon its "next
    pick request" and waits for one, so an app's pick finds it present.
    (The daemon takes the request in microseconds; an app process takes
    far longer to start and ask.)"""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            if Path(f"/proc/{pid}/task/{task}/wchan").read_text() == "unix_stream_read_generic":
                return True
        except OSError:
            pass
    return False


def wait_for_agent(pid: int, timeout: float = 20) -> None:
    """Until the agent process pid waits for pick requests (reading_a_socket)."""
    wait_for(
        f"agent {pid} to ask the daemon for pick requests",
        lambda: reading_a_socket(pid),
        timeout=timeout,
        interval=0.02,
    )


def reap_orphan_zombies() -> None:
    """Reap zombies that were reparented to us (we are a subreaper)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        st = _proc_stat(int(entry))
        if st and st[1] == me and st[0] == "Z":
            try:
                os.waitpid(int(entry), os.WNOHANG)
            except ChildProcessError:
                pass


def fd_count(pid: int) -> int | None:
    """Open fds of pid, not counting pipes: libfuse keeps a splice pipe pair
    per worker thread, which comes and goes with the thread pool, not with
    open files."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    count = 0
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:"):
                continue
        except OSError:
            continue
        count += 1
    return count


def sample_peak(pid: int, stop: threading.Event, peak: list[int]) -> None:
    """Keeps in peak[0] the most descriptors `pid` held, sampled every
    50 ms until `stop` is set (run it on a thread)."""
    while not stop.is_set():
        count = fd_count(pid)
        if count is not None and count > peak[0]:
            peak[0] = count
        time.sleep(0.05)  # the sampling rate of a measurement, not a wait


def drop_dentry_caches() -> None:
    """Ask the kernel to drop unused dentries and inodes, so that FUSE sends
    FORGET for every node no process uses any more (a daemon may hold an fd
    per remembered node; that is not a leak)."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")
    except OSError:
        pass


def _short_arg(arg) -> str:
    """Command-line argument for messages: a snippet without its prelude."""
    text = str(arg)
    if SNIPPET_MARKER in text:
        return "<snippet: " + text.split(SNIPPET_MARKER, 1)[1].strip()[:800] + ">"
    return text


def _snippet_lines(text: str) -> str:
    """Rewrite traceback lines of `python3 -c` snippets to snippet line numbers."""
    return re.sub(
        r'File "<string>", line (\d+)', lambda m: f'File "<snippet>", line {int(m.group(1)) - PRELUDE_LINES}', text
    )


def describe(p: subprocess.CompletedProcess) -> str:
    args = p.args if isinstance(p.args, str) else " ".join(map(_short_arg, p.args))
    return (
        f"command: {args[:1500]}\nexit: {p.returncode}\n"
        f"stdout: {(p.stdout or '')[-3000:]}\nstderr: {_snippet_lines((p.stderr or '')[-3000:])}"
    )


def crash_markers(text: str) -> list[str]:
    return [m for m in CRASH_MARKERS if m in text]


def last_json_line(p: subprocess.CompletedProcess):
    lines = [ln for ln in (p.stdout or "").splitlines() if ln.strip()]
    if not lines:
        raise AssertionError("expected a JSON line on stdout\n" + describe(p))
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise AssertionError(f"last stdout line is not JSON ({exc})\n" + describe(p))


def snippet(code: str) -> str:
    """The app-side prelude followed by the dedented snippet."""
    return APPSIDE_SOURCE + SNIPPET_MARKER + textwrap.dedent(code).lstrip("\n")


def kill_group(pid: int) -> None:
    """SIGKILL the process group we created for pid (start_new_session)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def run_bounded(
    argv: list, timeout: float, env: dict, out_dir: Path | None = None, what: str = "command"
) -> subprocess.CompletedProcess:
    """Run argv in its own session with a deadline; on timeout kill its whole
    process group and fail. With out_dir, stdout/stderr go to files there
    (a daemon that inherits them cannot keep us waiting for EOF); without,
    they are pipes read to EOF (so output of double-forked descendants is
    collected too)."""
    argv = [str(a) for a in argv]
    if out_dir is None:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            try:
                out, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                # a descendant that left the group (setsid) still holds the pipes
                proc.stdout.close()
                proc.stderr.close()
                proc.wait(timeout=10)
                out, err = b"", b"(pipes still held by a descendant outside the process group)"
            p = subprocess.CompletedProcess(
                argv, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
            )
            raise AssertionError(f"{what} hung for {timeout}s and was killed\n" + describe(p))
        return subprocess.CompletedProcess(
            argv, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
        )
    fo = tempfile.TemporaryFile(dir=out_dir)
    fe = tempfile.TemporaryFile(dir=out_dir)
    with fo, fe:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, env=env, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc.pid)
            proc.wait()
        fo.seek(0)
        fe.seek(0)
        p = subprocess.CompletedProcess(
            argv, proc.returncode, fo.read().decode(errors="replace"), fe.read().decode(errors="replace")
        )
    if timed_out:
        raise AssertionError(f"{what} hung for {timeout}s and was killed\n" + describe(p))
    return p


# ---------------------------------------------------------------------------
# a step-by-step app process


class AppSession:
    """An app process driven line by line: the snippet calls step(obj) to
    report and wait; the test calls recv() to read that report and send()
    to let it continue."""

    def __init__(self, popen: subprocess.Popen, stderr_path: Path):
        self.popen = popen
        self.stderr_path = stderr_path
        self._buf = b""

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def recv(self, timeout: float = 20):
        """Next JSON line from the app (fails on timeout or EOF)."""
        fd = self.popen.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"app process sent nothing within {timeout}s; stderr: {self.stderr()}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    rc = self.popen.wait(timeout=10)
                    raise AssertionError(
                        f"app process ended (exit {rc}) before reporting; "
                        f"partial stdout: {self._buf!r}; stderr: {self.stderr()}"
                    )
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"app sent non-JSON line {line!r}; stderr: {self.stderr()}")

    def send(self, text: str = "go") -> None:
        self.popen.stdin.write((text + "\n").encode())
        self.popen.stdin.flush()

    def finish(self, timeout: float = 20) -> int:
        """Close stdin and wait for the app to exit; returns its exit status."""
        try:
            self.popen.stdin.close()
        except OSError:
            pass
        return self.popen.wait(timeout=timeout)

    def kill(self) -> None:
        """Let the app end on stdin EOF; after 2 s SIGKILL its process group
        (only while its leader is unreaped, so the group id is still ours)."""
        try:
            self.popen.stdin.close()
        except OSError:
            pass
        try:
            self.popen.wait(timeout=2)
        except subprocess.TimeoutExpired:
            kill_group(self.popen.pid)  # the session we created for it, children included
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            self.popen.stdout.close()
        except OSError:
            pass


# ---------------------------------------------------------------------------
# one test world


@dataclass
class Daemon:
    pid: int
    fd_baseline: int | None


class Env:
    """A fresh ScopeFS world in its own temp dir: state dir, two providers,
    two apps, a mountpoint. Tests grant, mount and run app processes through
    it; `teardown()` unmounts and checks the daemon exited cleanly."""

    created: list[Path] = []  # every root made in this process, for the session check

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="scopefs-it-", dir="/tmp"))
        Env.created.append(self.root)
        # Other users (uid 65534 cases) must be able to traverse to the mount.
        os.chmod(self.root, 0o755)
        self.state = self.root / "state"
        self.mnt = self.root / "mnt"
        self.mnt.mkdir(mode=0o755)
        self.bin = scopefs_bin()
        self.mounted = False
        self.daemon: Daemon | None = None
        self.daemon_problem: str | None = None
        self.sessions: list[AppSession] = []
        self.database: str | None = None  # its own on the PostgreSQL server (STORE)
        # How app processes see the mount (`scopefs run`): "app" is the
        # default (a namespace showing only MOUNT/<app>, as root), "shared"
        # passes --shared-view (what users without CAP_SYS_ADMIN get).
        self.view = "app"
        # Whether env.mount() adds `--scopes lenient`: only for a test that
        # asks (`lenient=True`, a file-system suite that is no app); every
        # other mount is the one users get, with strict scopes (SPEC S9).
        self.lenient_scopes = False
        self.base_env = dict(os.environ)
        self.base_env.pop("PYTHONFAULTHANDLER", None)
        self.base_env.pop("SCOPEFS_STATE", None)
        self.base_env.update(XDG_STATE_HOME=str(self.root / "xdg-state"), PYTHONDONTWRITEBYTECODE="1", LC_ALL="C.UTF-8")
        # The daemon keeps previews for the owner's file manager in the
        # owner's freedesktop cache (S50): the test's own, not the machine's.
        self.base_env["XDG_CACHE_HOME"] = str(self.root / "xdg-cache")

    # -- paths -------------------------------------------------------------

    def backing(self, provider: str = LOCAL) -> Path:
        return self.root / "backing" / provider

    def app_dir(self, app: str) -> str:
        """MOUNT/<app> (SPEC S2)."""
        return str(self.mnt / app)

    def prov(self, app: str, provider: str = LOCAL, rel: str = "") -> str:
        """MOUNT/<app>/Providers/<provider>/<rel> (SPEC S2)."""
        p = self.mnt / app / "Providers" / provider
        return str(p / rel) if rel else str(p)

    def container(self, app: str, rel: str = "") -> str:
        p = self.mnt / app / "Container"
        return str(p / rel) if rel else str(p)

    # -- CLI ---------------------------------------------------------------

    def cli_argv(self, *args, state: Path | None = None) -> list[str]:
        return [str(self.bin), "--state", str(state or self.state), *map(str, args)]

    def cli(
        self, *args, expect: int | None = 0, state: Path | None = None, timeout: float = CLI_TIMEOUT
    ) -> subprocess.CompletedProcess:
        """Run `scopefs --state STATE ARGS...`; assert the exit code unless expect is None."""
        p = run_bounded(
            self.cli_argv(*args, state=state),
            timeout,
            self.base_env,
            out_dir=self.root,
            what=f"scopefs {' '.join(map(str, args))[:200]}",
        )
        if expect is not None:
            assert p.returncode == expect, f"expected exit {expect}\n" + describe(p)
        return p

    def init_world(self) -> None:
        """init + the standard providers, apps and backing files."""
        self.init_store()
        self._make_backing_tree()
        self.cli("provider", "add", LOCAL, self.backing(LOCAL), "--name", "On My Laptop")
        self.cli("provider", "add", DRIVE, self.backing(DRIVE), "--name", "Example Drive")
        self.cli("app", "add", ALPHA, "--name", "Alpha")
        self.cli("app", "add", BETA, "--name", "Beta")

    def init_store(self) -> None:
        """`scopefs init` on the suite's store (STORE): on PostgreSQL, a
        database of this world's own, which teardown drops."""
        if STORE == "sqlite":
            self.cli("init")
            return
        server = postgres_server()
        self.database = "scopefs_it_" + os.urandom(6).hex()
        server.create_database(self.database)
        self.cli(
            "init", "--database", server.url(database=self.database), "--password-file",
            self.owner_password_file(server.password_file), "--host-name", "it-host",
        )  # fmt: skip

    def owner_password_file(self, server_file: Path) -> Path:
        """The owner role's password file as this world's owner reads it:
        the server's own, for root."""
        return server_file

    def _make_backing_tree(self) -> None:
        files = {
            "local/docs/report.txt": REPORT_BYTES,
            "local/docs/secret.txt": b"top secret\n",
            "local/deep/a/b/target.txt": b"deep target\n",
            "local/deep/a/b/sibling.txt": b"deep sibling\n",
            "local/deep/a/other.txt": b"other\n",
            "local/deep/hidden/x.txt": b"x\n",
            "local/photos/p.jpg": b"\xff\xd8 not really a jpeg",
            "drive/archive/old.txt": b"old\n",
            "escape/outside.txt": b"outside every provider\n",
        }
        for rel, data in files.items():
            p = self.root / "backing" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        for rel in ("local/work", "local/work2", "drive/inbox"):
            (self.root / "backing" / rel).mkdir(parents=True, exist_ok=True)
        for dirpath, _, _ in os.walk(self.root / "backing"):
            os.chmod(dirpath, 0o755)

    def grant(self, app: str, spec: str, read_only: bool = False) -> str:
        """`scopefs grant APP PROVIDER:REL [--read-only]`; returns the grant id."""
        args = ["grant", app, spec] + (["--read-only"] if read_only else [])
        p = self.cli(*args)
        tokens = p.stdout.split()
        assert tokens, "grant printed no grant id\n" + describe(p)
        return tokens[-1]

    def revoke(self, app: str, grant_id: str) -> None:
        self.cli("revoke", app, grant_id)

    def restore(self, app: str, grant_id: str) -> None:
        self.cli("restore", app, grant_id)

    # -- mount ---------------------------------------------------------------

    def mount_args(self, open_files: str | None = None, allow_other: bool = False) -> list:
        """Arguments of `scopefs mount MNT ...`; adds `--scopes lenient`
        when the test asked for it (see `lenient_scopes`), and only while
        the binary offers it (a baseline from before strict scopes, SPEC S9,
        has no such option)."""
        args = ["mount", self.mnt]
        if self.lenient_scopes and supports_lenient_scopes():
            args += ["--scopes", "lenient"]
        if open_files:
            args += ["--open-files", open_files]
        if allow_other:
            args += ["--allow-other"]
        return args

    def mount(self, open_files: str | None = None, allow_other: bool = False, lenient: bool = False) -> None:
        """`scopefs mount MNT` in background mode: it must return, within
        MOUNT_TIMEOUT, once the mount is ready (CLI.md); then the mount must
        be in /proc/self/mountinfo and `status --json` must name the daemon.
        Without `lenient`, no scope option: the mount users get, whose
        scopes must be strict (SPEC S9). `lenient` holds for every later
        mount of this Env (a remount)."""
        if lenient:
            self.lenient_scopes = True
        args = [str(arg) for arg in self.mount_args(open_files, allow_other)]
        try:
            self.cli(*args, timeout=MOUNT_TIMEOUT)
        finally:
            self.mounted = self.mounted or bool(mount_count(self.mnt))
        assert any(mp == str(self.mnt) and fs.startswith("fuse") for mp, fs in mountinfo_entries()), (
            f"`scopefs mount` returned 0 but {self.mnt} is not a fuse mount in /proc/self/mountinfo"
        )
        self.mounted = True
        self._record_daemon()
        # Unless a scope option was given (a test's own `mount_args`).
        if "--scopes" not in args and supports_lenient_scopes():
            self._check_default_scopes()
        if self.database:
            self._check_fleet_store()

    def _check_default_scopes(self) -> None:
        """A mount without a scope option is strict (SPEC S9: the default)."""
        p = self.cli("status", "--json")
        scopes = json.loads(p.stdout).get("daemon", {}).get("scopes")
        assert scopes == "strict", "a mount with the defaults is not strict\n" + describe(p)

    def _check_fleet_store(self) -> None:
        """On the fleet's store (STORE), the daemon serves the policy it read there."""
        p = self.cli("status", "--json")
        daemon = json.loads(p.stdout).get("daemon", {})
        assert daemon.get("fleetHost") == "it-host" and self.database in daemon.get("fleetDatabase", ""), (
            "the daemon does not serve the fleet's store\n" + describe(p)
        )

    def _record_daemon(self) -> None:
        self.daemon, self.daemon_problem = None, None
        try:
            pid = self.daemon_pid()
        except AssertionError as exc:
            # Keep the test body running; teardown reports the problem.
            self.daemon_problem = str(exc)
            return
        self.daemon = Daemon(pid, fd_count(pid))

    def daemon_pid(self) -> int:
        """`scopefs status --json` -> daemon.pid (SPEC S30)."""
        p = self.cli("status", "--json")
        try:
            pid = int(json.loads(p.stdout)["daemon"]["pid"])
        except (ValueError, KeyError, TypeError) as exc:
            raise AssertionError(f"status --json has no daemon.pid ({exc!r})\n" + describe(p))
        assert os.path.exists(f"/proc/{pid}"), f"status --json names pid {pid}, which does not exist"
        return pid

    def kill_daemon(self) -> int:
        """SIGKILL the daemon (pid from status --json) and reap it; returns the pid."""
        pid = self.daemon.pid if self.daemon else self.daemon_pid()
        os.kill(pid, signal.SIGKILL)
        how, _ = wait_for_exit(pid, DAEMON_EXIT_TIMEOUT)
        assert how != "alive", f"daemon {pid} survived SIGKILL"
        self.daemon = None
        return pid

    # -- processes ------------------------------------------------------------

    def run_argv(self, app: str, cmd: list, sandbox: bool = False, extra: tuple = ()) -> list[str]:
        """`scopefs run` confines by default (SPEC S5); ordinary tests run
        their snippets (this checkout's python, temp dirs) with --no-sandbox,
        and `sandbox=True` runs CMD in the sandbox, where only the system's
        programs exist (python3 is Debian's /usr/bin/python3)."""
        if sandbox:
            view = [] if confines_by_default() else ["--sandbox"]
        else:
            view = (["--no-sandbox"] if confines_by_default() else []) + (
                ["--shared-view"] if self.view == "shared" else []
            )
        return self.cli_argv("run", "--app", app, *view, *extra, "--", *cmd)

    def run_app(
        self, app: str, cmd: list[str], sandbox: bool = False, timeout: float = APP_TIMEOUT, extra: tuple = ()
    ) -> subprocess.CompletedProcess:
        """`scopefs run --app APP [--no-sandbox] [EXTRA...] -- CMD...` (SPEC S5)."""
        return run_bounded(
            self.run_argv(app, cmd, sandbox, extra),
            timeout,
            self.base_env,
            what=f"app process {' '.join(map(str, cmd))[:80]}",
        )

    def app_py(
        self, app: str, code: str, *args, sandbox: bool = False, check: bool = True, extra: tuple = ()
    ) -> subprocess.CompletedProcess:
        """Run a Python snippet (with the appside prelude) as an app process;
        `extra` are more `scopefs run` options."""
        p = self.run_app(app, ["python3", "-c", snippet(code), *map(str, args)], sandbox, extra=extra)
        if check:
            assert p.returncode == 0, "app snippet failed\n" + describe(p)
        return p

    def app_json(self, app: str, code: str, *args, sandbox: bool = False, extra: tuple = ()):
        """app_py() and parse the last stdout line as JSON."""
        return last_json_line(self.app_py(app, code, *args, sandbox=sandbox, extra=extra))

    def host_json(self, code: str, *args):
        """Run a snippet as a plain process of the mount owner (not an app
        process: the inspect view, SPEC S4) and parse its JSON result."""
        p = run_bounded(["python3", "-c", snippet(code), *args], APP_TIMEOUT, self.base_env, what="host snippet")
        assert p.returncode == 0, "host snippet failed\n" + describe(p)
        return last_json_line(p)

    def app_session(self, app: str, code: str, *args, sandbox: bool = False, extra: tuple = ()) -> AppSession:
        """Start a snippet as an app process with stdin/stdout pipes (see AppSession);
        `extra` are more `scopefs run` options."""
        argv = self.run_argv(app, ["python3", "-c", snippet(code), *map(str, args)], sandbox, extra)
        err = self.root / f"session-{len(self.sessions)}.err"
        with open(err, "w") as fe:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=fe,
                env=self.base_env,
                start_new_session=True,
            )
        s = AppSession(popen, err)
        self.sessions.append(s)
        return s

    # -- teardown -------------------------------------------------------------

    def _unmount(self, problems: list[str]) -> None:
        """`scopefs unmount` with bounded retries, then fusermount3 -u, then -uz."""
        failures = []
        for _attempt in range(3):
            p = self.cli("unmount", self.mnt, expect=None, timeout=20)
            if not mount_count(self.mnt):
                if p.returncode != 0:
                    problems.append("`scopefs unmount` unmounted but exited nonzero\n" + describe(p))
                return
            failures.append(describe(p))
            time.sleep(0.5)  # a pause between retries of a failed unmount, not a wait for a state
        problems.append("`scopefs unmount` failed 3 times:\n" + "\n".join(failures))
        for extra in (["-u"], ["-uz"]):
            subprocess.run(["fusermount3", *extra, str(self.mnt)], capture_output=True, timeout=20)
            if not mount_count(self.mnt):
                problems.append(f"mount was only removed by `fusermount3 {' '.join(extra)}`")
                return
        problems.append(f"LEFTOVER MOUNT at {self.mnt}")

    def _check_fds(self, problems: list[str]) -> None:
        """Fail when the daemon holds more fds than right after mount (+slack),
        once all app processes are gone and the kernel forgot unused nodes."""
        d = self.daemon
        if not d or d.fd_baseline is None:
            return
        limit = d.fd_baseline + FD_SLACK
        started, dropped = time.monotonic(), [False]

        def count() -> int | None:
            if not dropped[0] and time.monotonic() - started > 1:
                drop_dentry_caches()
                dropped[0] = True
            return fd_count(d.pid)

        try:  # releases arrive asynchronously after app exit
            now = wait_for("the daemon's descriptors to settle", count, lambda n: n is None or n <= limit, timeout=4)
        except WaitTimeout as settled:
            now = settled.last
        if now is not None and now > limit:
            targets = []
            for fd in sorted(os.listdir(f"/proc/{d.pid}/fd"), key=int):
                try:
                    targets.append(os.readlink(f"/proc/{d.pid}/fd/{fd}"))
                except OSError:
                    pass
            targets = [t for t in targets if not t.startswith("pipe:")]
            problems.append(
                f"daemon fd leak: {d.fd_baseline} fds (pipes not counted) after mount, "
                f"{now} before unmount (slack {FD_SLACK}); newest: {targets[-20:]}"
            )

    def _check_daemon_exit(self, problems: list[str]) -> None:
        d = self.daemon
        if not d:
            return
        how, status = wait_for_exit(d.pid, DAEMON_EXIT_TIMEOUT)
        if how == "alive":
            problems.append(f"daemon {d.pid} still running {DAEMON_EXIT_TIMEOUT}s after unmount; killed it")
            os.kill(d.pid, signal.SIGKILL)
            wait_for_exit(d.pid, 5)
        elif how == "exited" and not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            problems.append(f"daemon {d.pid} exited with status {os.waitstatus_to_exitcode(status)} (want 0)")
        self.daemon = None

    def teardown(self) -> list[str]:
        """Stop app sessions, unmount, verify the daemon exited 0 and leaked no
        fds, remove the temp dir. Returns a list of problems (empty = clean)."""
        problems: list[str] = []
        for s in self.sessions:
            s.kill()
        if self.daemon_problem:
            problems.append("could not get the daemon pid: " + self.daemon_problem)
        if self.mounted or mount_count(self.mnt):
            if self.daemon and not os.path.exists(f"/proc/{self.daemon.pid}"):
                problems.append(f"daemon {self.daemon.pid} died during the test")
            self._check_fds(problems)
            self._unmount(problems)
            self._check_daemon_exit(problems)
            self.mounted = False
        reap_orphan_zombies()
        if self.database:
            postgres_server().drop_database(self.database)
        if mount_count(self.mnt):
            problems.append(f"{self.mnt} still in /proc/mounts after teardown")
        if not safe_rmtree(self.root):
            problems.append(f"not removing {self.root}: mounts still inside: {mounts_under(self.root)}")
        return problems


def fresh_world():
    """The body of the `env` fixture (Tests/integration, Tests/settings): a
    fresh, initialised world (SPEC S1): state dir, providers `local` and
    `drive`, apps ALPHA and BETA, nothing granted, not mounted. Teardown
    unmounts with bounded retries, fails on a leftover mount, checks that
    the daemon exited with status 0 and did not leak file descriptors."""
    import pytest  # the harness itself runs outside pytest too (bench, scripts)

    problem = binary_problem()
    if problem:
        pytest.fail(problem)
    world = Env()
    try:
        world.init_world()
    except BaseException:
        world.teardown()
        raise
    yield world
    problems = world.teardown()
    if problems:
        pytest.fail("teardown problems:\n- " + "\n- ".join(problems), pytrace=False)
