"""The systems under test. Each one exposes the same backing directory.

A system has a `root` (where the benchmark's working folder BACKING/work
appears through it) and `wrap(argv)`, which turns a workload command into
the command that runs it as a client of that system (for ScopeFS: as an
app process, in scope). `setup()` raises Skip only for the document
portal, the one system that may be missing.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import dbus_wire
from deps import PORTAL_BIN, log

WORKDIR = "work"  # the folder under the backing directory that all systems share

# Every daemon runs in a session of its own, as `scopefs mount` puts
# ScopeFS's (and as a service manager would): with the kernel's automatic
# process groups (/proc/sys/kernel/sched_autogroup_enabled), a session is
# one scheduling group, and a daemon in the bench's own session shares its
# CPU share with the workload process it serves. On a busy machine that
# made passthrough_ll and the portal answer a 600-file untar several times
# faster than a daemon in its own session: the workload process waited
# 0.05-0.14 s on the run queue against 1.0-1.4 s (docs/PERFORMANCE.md).
DAEMON_SESSION = {"start_new_session": True}


class Skip(Exception):
    """The system cannot run here; the message says why."""


class SetupError(Exception):
    """The system failed to start (a failure, not a skip)."""


def mountpoints():
    """Mount points of this mount namespace, unescaped."""
    out = []
    with open("/proc/self/mountinfo", errors="surrogateescape") as f:
        for line in f:
            field = line.split()[4]
            out.append(field.encode().decode("unicode_escape"))
    return out


def is_mounted(path):
    return os.path.realpath(path) in mountpoints()


def wait_until(predicate, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def fusermount_u(path):
    """Unmounts PATH with bounded retries; returns True once it is unmounted."""
    for _ in range(20):
        if not is_mounted(path):
            return True
        subprocess.run(["fusermount3", "-u", path], stderr=subprocess.DEVNULL)
        if wait_until(lambda: not is_mounted(path), 0.5):
            return True
    # Still busy after 10 s: detach it lazily rather than leave it mounted.
    log(f"bench: {path} stays busy; lazy unmount (fusermount3 -uz)")
    subprocess.run(["fusermount3", "-uz", path], stderr=subprocess.DEVNULL)
    return not is_mounted(path)


def stop_process(proc, timeout=10):
    """Waits for a process we started, then SIGTERM, then SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.wait(timeout=timeout)
        return
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def alive(pid):
    """True while PID runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _tail(path, n=800):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:].strip()
    except OSError:
        return ""


def start_session_bus(base, env):
    """A private session bus in the foreground of our own child process:
    the process and its address ("" when it did not start)."""
    bus = subprocess.Popen(
        [
            "dbus-daemon",
            "--session",
            "--nofork",
            "--print-address=1",
            "--address=unix:path=" + os.path.join(base, "bus"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
        **DAEMON_SESSION,
    )
    return bus, bus.stdout.readline().strip()


class System:
    name = "?"
    label = "?"
    # True for a system whose phases leave work for the machine after they
    # end: it runs last in each repetition (run.run_all).
    leaves_work_behind = False
    # True for a system shown for comparison only: a workload it cannot run
    # is reported in its row, not as the run's failure.
    comparison_only = False

    def __init__(self, ctx):
        self.ctx = ctx
        self.root = None
        # Where the workloads' set-up puts files on the host, for the
        # system to show at `root`: the shared backing folder, except for
        # a system that keeps its files elsewhere (an app's container).
        self.host_workdir = os.path.join(ctx.backing, WORKDIR)

    def setup(self):
        pass

    def wrap(self, argv):
        return list(argv)

    def teardown(self):
        pass

    def pids(self):
        """The processes that serve this system (its daemons)."""
        return []

    def info(self):
        return {}


class Native(System):
    name, label = "native", "native"

    def setup(self):
        self.root = os.path.join(self.ctx.backing, WORKDIR)

    def info(self):
        return {"path": "BACKING/work itself, no FUSE"}


class PassthroughLL(System):
    name, label = "passthrough_ll", "passthrough_ll (C)"

    def setup(self):
        self.mnt = os.path.join(self.ctx.tmp, "mnt-passthrough_ll")
        os.makedirs(self.mnt)
        self.logfile = os.path.join(self.ctx.tmp, "passthrough_ll.log")
        # -f keeps it in the foreground of our child process so that we own its pid;
        # default options: multithreaded, cache=normal, timeout=1.0.
        with open(self.logfile, "w") as logf:
            self.proc = subprocess.Popen(
                [self.ctx.passthrough_ll, "-f", "-o", "source=" + self.ctx.backing, self.mnt],
                stdout=logf,
                stderr=logf,
                stdin=subprocess.DEVNULL,
                **DAEMON_SESSION,
            )
        if not wait_until(lambda: is_mounted(self.mnt) or self.proc.poll() is not None, 20):
            raise SetupError("passthrough_ll did not mount within 20 s")
        if not is_mounted(self.mnt):
            raise SetupError("passthrough_ll exited: " + _tail(self.logfile))
        self.root = os.path.join(self.mnt, WORKDIR)

    def teardown(self):
        if hasattr(self, "mnt"):
            fusermount_u(self.mnt)
        stop_process(getattr(self, "proc", None))

    def pids(self):
        return [self.proc.pid]

    def info(self):
        return {"options": "-o source=BACKING (defaults: multithreaded, cache=normal, timeout=1.0)"}


class DocumentPortal(System):
    name, label = "portal", "xdg-document-portal"
    # Its phases leave work behind that its own CPU time does not show (the
    # kernel freeing a deleted tree's inodes and pages): see run_all.
    leaves_work_behind = True
    # It cannot host a SQLite database in WAL mode ("disk I/O error").
    comparison_only = True

    def setup(self):
        for need in (PORTAL_BIN, shutil.which("dbus-daemon")):
            if not need or not os.path.exists(need):
                raise Skip(f"{need or 'dbus-daemon'} is not installed (apt packages xdg-desktop-portal, dbus-daemon)")
        base = os.path.join(self.ctx.tmp, "portal")
        self.runtime = os.path.join(base, "runtime")
        os.makedirs(self.runtime, mode=0o700)
        self.env = dict(os.environ)
        for var, sub in (
            ("XDG_RUNTIME_DIR", "runtime"),
            ("XDG_DATA_HOME", "data"),
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_CACHE_HOME", "cache"),
        ):
            self.env[var] = os.path.join(base, sub)
            os.makedirs(self.env[var], mode=0o700, exist_ok=True)
        self._start_bus(base)
        self._start_portal(base)
        try:
            docid = dbus_wire.add_folder_document(self.address, os.path.join(self.ctx.backing, WORKDIR))
        except (OSError, dbus_wire.DBusError) as e:
            raise Skip(f"adding the folder document failed: {e}")
        self.root = os.path.join(self.doc, docid, WORKDIR)
        if not os.path.isdir(self.root):
            raise Skip(f"document {docid} does not appear at {self.root}")

    def _start_bus(self, base):
        self.bus, self.address = start_session_bus(base, self.env)
        if not self.address:
            raise Skip("dbus-daemon --session did not start")
        self.env["DBUS_SESSION_BUS_ADDRESS"] = self.address

    def _start_portal(self, base):
        self.doc = os.path.join(self.runtime, "doc")
        self.logfile = os.path.join(base, "portal.log")
        with open(self.logfile, "w") as logf:
            self.proc = subprocess.Popen(
                [PORTAL_BIN, "--replace"],
                env=self.env,
                stdout=logf,
                stderr=logf,
                stdin=subprocess.DEVNULL,
                **DAEMON_SESSION,
            )
        ok = wait_until(lambda: is_mounted(self.doc) or self.proc.poll() is not None, 20)
        if not ok or not is_mounted(self.doc):
            raise Skip(
                "xdg-document-portal did not mount $XDG_RUNTIME_DIR/doc: " + (_tail(self.logfile) or "no output")
            )

    def teardown(self):
        if hasattr(self, "doc"):
            fusermount_u(self.doc)
        stop_process(getattr(self, "proc", None), timeout=0)
        stop_process(getattr(self, "bus", None), timeout=0)

    def pids(self):
        return [self.proc.pid, self.bus.pid]

    def info(self):
        r = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", "xdg-desktop-portal"], capture_output=True, text=True
        )
        return {
            "version": r.stdout.strip(),
            "binary": PORTAL_BIN,
            "documents": "one folder document (AddFull with the DIRECTORY flag) for BACKING/work",
        }


class ScopeFS(System):
    name, label = "scopefs", "ScopeFS (strict, app view)"
    APP, PROVIDER = "bench.app", "bench"

    def cli(self, *args):
        return [self.ctx.scopefs, "--state", self.state, *args]

    def run_cli(self, *args, timeout=60):
        r = subprocess.run(
            self.cli(*args), capture_output=True, text=True, timeout=timeout, env=self.env, stdin=subprocess.DEVNULL
        )
        if r.returncode != 0:
            raise SetupError(f"scopefs {' '.join(args)} exited {r.returncode}: {(r.stderr or r.stdout).strip()[-500:]}")
        return r.stdout

    def setup(self):
        self.state = os.path.join(self.ctx.tmp, self.name + "-state")
        self.mnt = os.path.join(self.ctx.tmp, "mnt-" + self.name)
        os.makedirs(self.mnt)
        self.env = dict(os.environ, SCOPEFS_STATE=self.state)
        self.run_cli("init")
        self.run_cli("provider", "add", self.PROVIDER, self.ctx.backing)
        self.run_cli("app", "add", self.APP)
        out = self.run_cli("grant", self.APP, f"{self.PROVIDER}:{WORKDIR}").strip()
        self.grant = out.split()[-1] if out else ""
        self.mount_and_probe([])

    def mount_and_probe(self, extra):
        """Mounts (EXTRA: more `scopefs mount` arguments) and learns what the binary offers."""
        self.run_cli("mount", *self.ctx.mount_args, *extra, self.mnt, timeout=120)
        if not is_mounted(self.mnt):
            raise SetupError("scopefs mount returned but nothing is mounted at " + self.mnt)
        self.mounted = True
        self.root = os.path.join(self.mnt, self.APP, "Providers", self.PROVIDER, WORKDIR)
        # An unknown subcommand followed by --help prints the root help and exits 0
        # (swift-argument-parser), so look for the subcommand's own usage line too.
        r = subprocess.run(self.cli("scope", "--help"), capture_output=True, text=True, env=self.env)
        self.has_scope = r.returncode == 0 and "scopefs scope" in r.stdout
        if not self.has_scope:
            log("bench: `scopefs scope` does not exist yet: workloads run without scope exec")
        self.options = self.run_options()

    # `scopefs run` view options: the default is the app view (as root).
    # Workloads read the bench's own files (tarball, fsops) from the host,
    # so they run with --no-sandbox where the binary confines by default
    # (SPEC S5): the sandbox changes process start-up, not the requests.
    VIEW = []

    def run_options(self):
        r = subprocess.run(self.cli("run", "--help"), capture_output=True, text=True, env=self.env)
        return (["--no-sandbox"] if "--no-sandbox" in r.stdout else []) + self.VIEW

    def wrap(self, argv):
        cmd = self.cli("run", "--app", self.APP, *self.options, "--")
        if self.has_scope:
            cmd += self.cli("scope", "exec", self.root, "--")
        return cmd + list(argv)

    def pids(self):
        pid = self.daemon_pid()
        return [pid] if pid else []

    def daemon_pid(self):
        """The daemon's pid from `scopefs status --json`, or None."""
        r = subprocess.run(self.cli("status", "--json"), capture_output=True, text=True, env=self.env, timeout=30)
        try:
            return int(json.loads(r.stdout)["daemon"]["pid"])
        except (ValueError, KeyError, TypeError):
            return None

    def daemon_nodes(self):
        """The nodes the daemon holds for the kernel (`status --json`), or None."""
        r = subprocess.run(self.cli("status", "--json"), capture_output=True, text=True, env=self.env, timeout=30)
        try:
            return int(json.loads(r.stdout)["daemon"]["inodes"])
        except (ValueError, KeyError, TypeError):
            return None

    def unmount(self):
        """Unmounts with the CLI (which waits for the daemon), then makes sure."""
        if not getattr(self, "mounted", False) and not is_mounted(getattr(self, "mnt", "/-")):
            return
        try:
            subprocess.run(self.cli("unmount", self.mnt), capture_output=True, env=self.env, timeout=60)
        except subprocess.TimeoutExpired:
            log("bench: scopefs unmount timed out")
        fusermount_u(self.mnt)
        self.mounted = False

    def teardown(self):
        pid = None
        if getattr(self, "mounted", False):
            try:
                pid = self.daemon_pid()
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.unmount()
        # The daemon we started must be gone once unmounted; stop it if not.
        if pid and not wait_until(lambda: not alive(pid), 10):
            log(f"bench: scopefs daemon {pid} still runs after unmount; sending SIGTERM")
            os.kill(pid, signal.SIGTERM)

    def info(self):
        r = subprocess.run([self.ctx.scopefs, "--version"], capture_output=True, text=True)
        options = getattr(self, "options", self.VIEW)
        run = f"scopefs run --app bench.app {' '.join(options)}{' ' if options else ''}-- " + (
            "scopefs scope exec WORKDIR -- CMD"
            if getattr(self, "has_scope", False)
            else "CMD (no `scopefs scope` subcommand yet, so no scope exec)"
        )
        return {
            "binary": self.ctx.scopefs,
            "version": r.stdout.strip(),
            "mode": "strict (default)",
            "workloads run as": run,
            "mount": "scopefs mount " + " ".join(self.ctx.mount_args + ["MNT"]),
        }


class ScopeFSPortal(ScopeFS):
    """`scopefs portal`'s document layout (SPEC S45, issue 52), beside the
    reference portal on the same workloads: the working folder exported
    as one folder document to an app (AddFull with the directory flag and
    the app's id, as a file chooser's folder pick gives an app), and the
    workloads run under `by-app/APP/DOCID/work`, where every lookup, open,
    read and write is checked against the app's grant (a revoke cuts open
    descriptors, S14; the reference's do not). A ScopeFS daemon serves the
    state directory, as on a desktop with a mount, so the layout reads the
    policy version the daemon publishes. The workloads run as the owner's
    processes, as the reference portal's do."""

    name, label = "scopefs-portal", "ScopeFS portal layout (by-app, folder document)"
    # It refuses symbolic and hard links inside a folder document (EPERM),
    # which some workloads make: those show in its row, not as a failure.
    comparison_only = True

    def setup(self):
        if not shutil.which("dbus-daemon"):
            raise SetupError("dbus-daemon is not installed (apt package dbus-daemon)")
        self.state = os.path.join(self.ctx.tmp, self.name + "-state")
        self.mnt = os.path.join(self.ctx.tmp, "mnt-" + self.name)
        os.makedirs(self.mnt)
        base = os.path.join(self.ctx.tmp, self.name)
        os.makedirs(base)
        self.env = dict(os.environ, SCOPEFS_STATE=self.state)
        self.run_cli("init")
        self.run_cli("provider", "add", self.PROVIDER, self.ctx.backing)
        self.run_cli("app", "add", self.APP)
        self.mount_and_probe([])
        self.bus, address = start_session_bus(base, self.env)
        if not address:
            raise SetupError("dbus-daemon --session did not start")
        self.env["DBUS_SESSION_BUS_ADDRESS"] = address
        self.doc = os.path.join(base, "doc")
        self.logfile = os.path.join(base, "portal.log")
        with open(self.logfile, "w") as logf:
            self.portal = subprocess.Popen(
                self.cli("portal", "--mountpoint", self.doc),
                env=self.env,
                stdout=logf,
                stderr=logf,
                stdin=subprocess.DEVNULL,
                **DAEMON_SESSION,
            )
        ok = wait_until(lambda: is_mounted(self.doc) or self.portal.poll() is not None, 20)
        if not ok or not is_mounted(self.doc):
            raise SetupError("scopefs portal did not mount its layout: " + (_tail(self.logfile) or "no output"))
        try:
            docid = dbus_wire.add_folder_document(address, os.path.join(self.ctx.backing, WORKDIR), app_id=self.APP)
        except (OSError, dbus_wire.DBusError) as e:
            raise SetupError(f"adding the folder document failed: {e}") from e
        self.root = os.path.join(self.doc, "by-app", self.APP, docid, WORKDIR)
        if not os.path.isdir(self.root):
            raise SetupError(f"document {docid} does not appear at {self.root}")

    def wrap(self, argv):
        return list(argv)

    def pids(self):
        return [self.portal.pid] + super().pids()

    def teardown(self):
        portal = getattr(self, "portal", None)
        if portal is not None and portal.poll() is None:
            portal.send_signal(signal.SIGTERM)  # it unmounts its layout and exits
        stop_process(portal, timeout=10)
        if hasattr(self, "doc"):
            fusermount_u(self.doc)
        stop_process(getattr(self, "bus", None), timeout=0)
        super().teardown()

    def info(self):
        r = subprocess.run([self.ctx.scopefs, "--version"], capture_output=True, text=True)
        return {
            "binary": self.ctx.scopefs,
            "version": r.stdout.strip(),
            "documents": f"one folder document (AddFull with the DIRECTORY flag) for BACKING/work, granted to "
            f"{self.APP}; workloads under DOC/by-app/{self.APP}/DOCID/work, as the owner's processes",
            "daemon": "scopefs mount MNT on the same state directory (SQLite store)",
        }


class ScopeFSShared(ScopeFS):
    """ScopeFS as users without CAP_SYS_ADMIN run it: the app uses the
    shared mount, where MOUNT/<app> is looked up on every path walk."""

    name, label = "scopefs-shared", "ScopeFS (strict, shared view)"
    VIEW = ["--shared-view"]


class ScopeFSContainer(ScopeFS):
    """The app's own container (issue 33): never revoked, so the kernel
    reads, writes and maps its files through FUSE passthrough where it can
    (decision 56), and the rows say what an app pays for its own data. Its
    host folder is STATE/containers/APP, on the same file system as the
    backing folder (the bench's temporary folder)."""

    name, label = "scopefs-container", "ScopeFS (app's own container)"

    def setup(self):
        super().setup()
        self.host_workdir = os.path.join(self.state, "containers", self.APP, WORKDIR)
        os.makedirs(self.host_workdir, exist_ok=True)
        self.root = os.path.join(self.mnt, self.APP, "Container", WORKDIR)
        status = json.loads(self.run_cli("status", "--json"))
        self.passthrough = json.dumps(status.get("containerPassthrough", status.get("passthrough", "?")))

    def info(self):
        return {**super().info(), "container passthrough (status)": getattr(self, "passthrough", "?")}


class ScopeFSFleet(ScopeFS):
    """ScopeFS on a fleet's shared isolation layer (issue 34, SPEC S44): a
    throwaway PostgreSQL 15 server (Tests/integration/postgres_server.py) holds
    the policy; the owner's state directory sets it up (`init --database`,
    `fleet add-provider/add-app/grant`), and the mounted host joins with
    `scopefs mount --database` and a host role of its own, as a second
    machine would. The FUSE path is the same code as `scopefs`'s (the
    snapshot in memory, S36), and this row shows it. Opt-in (`--systems`):
    it starts a database server."""

    name, label = "scopefs-fleet", "ScopeFS (strict, app view, fleet's PostgreSQL)"
    opt_in = True
    HOST_ROLE = "scopefs_host_bench"

    def setup(self):
        sys.path.insert(
            0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Tests", "integration")
        )
        from postgres_server import PostgresServer

        try:
            self.server = PostgresServer()
        except (RuntimeError, subprocess.SubprocessError) as e:
            raise SetupError(f"the PostgreSQL server did not start: {e}") from e
        self.state = os.path.join(self.ctx.tmp, self.name + "-owner")
        self.env = dict(os.environ, SCOPEFS_STATE=self.state)
        url, password = self.server.url(), str(self.server.password_file)
        self.run_cli("init", "--database", url, "--password-file", password, "--host-name", "bench-owner")
        self.run_cli("fleet", "add-provider", self.PROVIDER, self.ctx.backing)
        self.run_cli("fleet", "add-app", self.APP)
        out = self.run_cli("fleet", "grant", self.APP, f"{self.PROVIDER}:{WORKDIR}", "--read-write")
        self.grant = out.split()[1].rstrip(":")
        host_password = os.path.join(self.ctx.tmp, self.name + "-host.pw")
        with open(host_password, "w") as f:
            f.write("host-" + os.urandom(8).hex() + "\n")
        os.chmod(host_password, 0o600)
        self.run_cli("fleet", "add-host", self.HOST_ROLE, "--password-file", host_password)
        # The mounted host: a state directory of its own, joined at mount.
        self.state = os.path.join(self.ctx.tmp, self.name + "-state")
        self.env = dict(os.environ, SCOPEFS_STATE=self.state)
        self.mnt = os.path.join(self.ctx.tmp, "mnt-" + self.name)
        os.makedirs(self.mnt)
        self.database_args = ["--database", self.server.url(self.HOST_ROLE), "--password-file", host_password,
                              "--host-name", "bench-host"]  # fmt: skip
        self.mount_and_probe(self.database_args)

    def teardown(self):
        super().teardown()
        if hasattr(self, "server"):
            self.server.close()

    def info(self):
        return {
            **super().info(),
            "store": "PostgreSQL 15 (throwaway, loopback TCP, scram-sha-256), the host with a host role",
            "mount": "scopefs mount --database postgresql://scopefs_host_bench@127.0.0.1:PORT/scopefs "
            + "--password-file FILE --host-name bench-host "
            + " ".join(self.ctx.mount_args + ["MNT"]),
        }


ALL = [Native, PassthroughLL, DocumentPortal, ScopeFS, ScopeFSShared, ScopeFSContainer, ScopeFSPortal, ScopeFSFleet]
# What runs without --systems: every system but the opt-in ones.
DEFAULT = [c for c in ALL if not getattr(c, "opt_in", False)]
