"""Attacks by a hostile app process, one test per finding of issue 14 (and
SPEC S33's matrix in test_attacks_matrix.py). An app process is assumed
hostile: it runs code of its own choosing, with the owner's uid.

Findings: an app changing its own grants (1), the sandbox confining nothing
outside the mount (2), a process leaving its app tree (3), a thread's
identity outliving its exec (4), another app writing through a stolen
descriptor (5), a folder moved out of a grant on the host staying reachable
(6), and the audit trail flushed and forged (7).
SPEC S5 (amended), S29 (amended), S33.

The app attacks where users run it: the default mount (strict scopes,
SPEC S9) and the default sandbox (S5); like a real app it starts accessing
a granted item (S6, S12) before it uses it, so each denial comes from the
check the test is about, not from a missing scope. A test that also runs
with `--no-sandbox` says why in its docstring: a hostile process with the
owner's access to the host (that mode is no boundary, but its attribution
and the owner's control socket must still hold).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from doc_scope_helpers import wait_events
from scopefs_harness import ALPHA, BETA, LOCAL, REPORT_BYTES, describe, snippet, wait_for
from test_container_passthrough import app_host_pid

SECRET = "docs/secret.txt"
REPORT = "docs/report.txt"


def libraries_outside_usr(binary: Path) -> list[str]:
    """Folders of the shared libraries `binary` needs that the sandbox does
    not show (the Swift runtime under /opt), so it can be --expose'd."""
    p = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=20)
    folders = set()
    for line in p.stdout.splitlines():
        parts = line.split("=>")
        path = (parts[1] if len(parts) == 2 else parts[0]).strip().split(" ")[0]
        if path.startswith("/") and not path.startswith(("/usr/", "/lib")):
            folders.add(str(Path(path).parent))
    return sorted(folders)


def run_in_sandbox(env, app: str, cmd: list[str], expose: list[str] = ()) -> subprocess.CompletedProcess:
    extra = tuple(a for path in expose for a in ("--expose", path))
    argv = env.run_argv(app, cmd, sandbox=True, extra=extra)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env.base_env)


# --- Finding 1: an app changes its own grants --------------------------------

CHANGES = [
    ("grant", ["grant", ALPHA, f"{LOCAL}:{SECRET}"]),
    ("restore", ["restore", ALPHA, "--all"]),
    ("provider-add", ["provider", "add", "evil", "/"]),
    ("app-add", ["app", "add", "com.example.evil"]),
    ("open", ["open", ALPHA, f"{LOCAL}:{SECRET}"]),
    ("import", ["import", ALPHA, f"{LOCAL}:{SECRET}"]),
    ("revoke", ["revoke", BETA, "--all"]),
    ("unmount", ["unmount", "MOUNTPOINT"]),
    # Issue 16: removing grants for good, and session grants, are the owner's too.
    ("forget", ["forget", BETA, "--all"]),
    ("grant-session", ["grant", ALPHA, f"{LOCAL}:{SECRET}", "--session"]),
    ("open-session", ["open", ALPHA, f"{LOCAL}:{SECRET}", "--session"]),
]

# argv: the scopefs binary, the state directory ("" for the sandbox's
# $SCOPEFS_STATE), the changes.
RUN_CHANGES = """
import subprocess
binary, state, changes = sys.argv[1], sys.argv[2] or os.environ["SCOPEFS_STATE"], json.loads(sys.argv[3])
codes = {}
for name, args in changes:
    p = subprocess.run([binary, "--state", state, *args], capture_output=True, text=True, timeout=30)
    codes[name] = [p.returncode, p.stderr.strip()[-160:]]
emit(codes)
"""


def policy(env) -> dict:
    return {
        "privacy": json.loads(env.cli("privacy", "--json").stdout),
        "providers": env.cli("provider", "list").stdout,
        "apps": env.cli("app", "list").stdout,
    }


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandbox", "no-sandbox"])
def test_an_app_process_cannot_change_the_isolation_layer(env, sandbox):
    """Finding 1, SPEC S5: inside `scopefs run --app A`, grant, restore
    (after the owner revoked), provider add, app add, open, import, revoke,
    unmount, forget and session grants each exit 77 with a message, and the
    isolation layer is unchanged (and still mounted): in the default
    sandbox with the `scopefs` on its PATH, and with `--no-sandbox`, where
    the app reaches the owner's binary and real state directory (the
    attack this finding was seen with).
    Seen failing on the old main: every command exited 0."""
    grant = env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    env.grant(BETA, f"{LOCAL}:docs")
    env.revoke(ALPHA, grant)
    env.mount()
    before = policy(env)
    changes = [(name, [str(env.mnt) if a == "MOUNTPOINT" else a for a in args]) for name, args in CHANGES]
    binary, state = ("scopefs", "") if sandbox else (env.bin, env.state)
    got = env.app_json(ALPHA, RUN_CHANGES, binary, state, json.dumps(changes), sandbox=sandbox)
    for name, (code, message) in got.items():
        assert code == 77, f"{name}: exit {code}: {message}"
        assert "app process" in message, f"{name}: {message}"
    assert policy(env) == before
    assert env.daemon_pid() == env.daemon.pid


# argv[1]: the socket ("" for the sandbox's app endpoint).
RAW_CONTROL = """
import socket
path, ops = sys.argv[1] or os.path.join(os.environ["SCOPEFS_STATE"], "control.sock"), sys.argv[2].split(",")
answers = {}
for op in ops:
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(json.dumps({"op": op, "app": sys.argv[3]}).encode() + b"\\n")
    answers[op] = json.loads(s.makefile().readline())
emit(answers)
"""


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandbox", "no-sandbox"])
def test_the_control_socket_refuses_changes_from_an_app_process(env, sandbox):
    """Finding 1, SPEC S5: a hostile app skips the CLI and writes requests
    to a control socket itself — in the default sandbox its app endpoint,
    with `--no-sandbox` the owner's own socket in the state directory (what
    the finding was seen with): register (start another app), reload,
    status, servedPolicy (what the portal reads, decision 65), revoke (the
    daemon's own revocation path for an unusable
    database) and restore (the daemon writes it for the CLI, issue 15) are
    refused with code 77; whoami names its app. Seen failing on the old
    main: status answered with every app's processes."""
    env.mount()
    socket_path = "" if sandbox else env.state / "control.sock"
    got = env.app_json(
        ALPHA, RAW_CONTROL, socket_path, "status,servedPolicy,reload,register,revoke,restore,whoami", BETA,
        sandbox=sandbox,
    )  # fmt: skip
    for op in ("status", "servedPolicy", "reload", "register", "revoke", "restore"):
        assert got[op]["ok"] is False and got[op]["code"] == 77, (op, got[op])
    assert got["whoami"] == {"ok": True, "app": ALPHA}


def test_a_sandboxed_app_cannot_change_the_isolation_layer(env):
    """Finding 1, SPEC S5: even with the scopefs binary (and its runtime)
    exposed to the sandbox, `scopefs grant` there exits 77: the run's cgroup
    marks it as an app process, whatever state directory it names."""
    env.mount()
    binary = Path(env.bin).resolve()
    expose = [str(binary.parent), *libraries_outside_usr(binary)]
    p = run_in_sandbox(
        env, ALPHA, [str(binary), "--state", "/tmp/elsewhere", "grant", ALPHA, f"{LOCAL}:{SECRET}"], expose
    )
    assert p.returncode == 77, describe(p)
    assert "app process" in p.stderr, describe(p)


# --- Finding 2: the sandbox confines nothing outside the mount --------------

SANDBOX_PROBE = """
import ctypes, termios
state, backing, other_container, daemon, owner = sys.argv[1:6]
libc = ctypes.CDLL(None, use_errno=True)

def errno_of(result):
    return "OK" if result == 0 else errno.errorcode[ctypes.get_errno()]

def status_field(name):
    for line in open("/proc/self/status"):
        if line.startswith(name + ":"):
            return line.split()[1]

def tiocsti():
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSTI, b"x")

emit({
    "state": attempt(os.stat, state),
    "database": attempt(os.stat, os.path.join(state, "scopefs.sqlite")),
    "key": attempt(os.stat, os.path.join(state, "bookmark.key")),
    "backing": attempt(os.listdir, backing),
    "other-container": attempt(os.listdir, other_container),
    "shadow": attempt(os.stat, "/etc/shadow"),
    "owner-home": attempt(os.listdir, os.path.expanduser("~root")),
    "repository": attempt(os.stat, __file__ if "__file__" in globals() else "/work"),
    "cgroupfs": attempt(os.listdir, "/sys/fs/cgroup"),
    "signal-daemon": attempt(os.kill, int(daemon), 0),
    "signal-owner": attempt(os.kill, int(owner), 0),
    "ptrace-daemon": errno_of(libc.ptrace(16, int(daemon), 0, 0)),
    "capabilities": status_field("CapEff"),
    "no-new-privs": status_field("NoNewPrivs"),
    "seccomp": status_field("Seccomp"),
    "tiocsti": attempt(tiocsti),
    "user-namespace": errno_of(libc.unshare(0x10000000)),
    "mount-namespace": errno_of(libc.unshare(0x20000)),
    "io_uring": errno_of(libc.syscall(425, 8, 0)),
    "open_by_handle_at": errno_of(libc.syscall(304, -100, 0, 0)),
})
"""


def test_the_sandbox_shows_nothing_of_the_host_it_does_not_need(env):
    """Finding 2, SPEC S5: in the default sandbox the app cannot see the state
    directory (database, bookmark key), the providers' backing folders, other
    apps' containers on the host, /etc/shadow, the owner's home or the cgroup
    file system; it cannot signal or ptrace the daemon or the owner's
    processes; it holds no capabilities, has no_new_privs and a seccomp
    filter that refuses TIOCSTI and new user namespaces. Seen failing on the
    old main: the state directory, key and backing folders were readable."""
    env.mount()
    daemon = env.daemon_pid()
    got = env.app_json(
        ALPHA,
        SANDBOX_PROBE,
        env.state,
        env.backing(LOCAL),
        env.state / "containers" / BETA,
        daemon,
        os.getpid(),
        sandbox=True,
    )
    for path in ("state", "database", "key", "backing", "other-container", "shadow", "owner-home", "cgroupfs"):
        assert got[path] == "ENOENT", (path, got)
    assert got["signal-daemon"] == "ESRCH" and got["signal-owner"] == "ESRCH", got
    assert got["ptrace-daemon"] == "ESRCH", got
    assert got["capabilities"] == "0000000000000000" and got["no-new-privs"] == "1", got
    assert got["seccomp"] == "2", got
    assert got["tiocsti"] == "EPERM" and got["user-namespace"] == "EPERM", got
    assert got["mount-namespace"] == got["io_uring"] == got["open_by_handle_at"] == "EPERM", got


RESOLVE_IN_SANDBOX = """
import socket
path = sys.argv[1]
os.setxattr(path, "user.scopefs.start", b"")
token = os.getxattr(path, "user.scopefs.bookmark").decode()
def ask(request):
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.path.join(os.environ["SCOPEFS_STATE"], "control.sock"))
    s.sendall(json.dumps(request).encode() + b"\\n")
    return json.loads(s.makefile().readline())
emit({"resolve": ask({"op": "resolve", "bookmark": token}), "status": ask({"op": "status"}),
      "content": read_bytes(path).decode()})
"""


def test_the_sandbox_reaches_only_the_app_endpoint(env):
    """Finding 2, SPEC S5, S27: the sandbox's $SCOPEFS_STATE/control.sock is
    the app endpoint: it resolves the app's bookmarks to paths that work
    inside, and refuses the owner's requests (status) with code 77."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    got = env.app_json(ALPHA, RESOLVE_IN_SANDBOX, env.prov(ALPHA, LOCAL, REPORT), sandbox=True)
    assert got["resolve"]["ok"] is True and got["resolve"]["path"] == env.prov(ALPHA, LOCAL, REPORT), got
    assert got["status"]["ok"] is False and got["status"]["code"] == 77, got
    assert got["content"].startswith("report line 00000"), got


FLOOD_THE_APP_ENDPOINT = """
import socket, time
endpoint = os.path.join(os.environ["SCOPEFS_STATE"], "control.sock")
def ask(sock, request):
    try:
        sock.sendall(json.dumps(request).encode() + b"\\n")
    except BrokenPipeError:
        pass  # a busy endpoint answers and closes without reading
    return json.loads(sock.makefile().readline() or "null")
held = []
for _ in range(100):
    s = socket.socket(socket.AF_UNIX)
    s.connect(endpoint)
    held.append(s)          # connected, never sends a line
time.sleep(0.5)  # a wait with nothing to watch: the daemon accepts the held connections (no app sees that)
extra = socket.socket(socket.AF_UNIX)
extra.connect(endpoint)
extra.settimeout(5)
started = time.monotonic()
busy = ask(extra, {"op": "whoami"})
busy_seconds = time.monotonic() - started
step({"busy": busy, "busy_seconds": busy_seconds})
for s in held:
    s.close()
for attempt in range(50):  # the daemon's threads see the closes
    again = socket.socket(socket.AF_UNIX)
    again.connect(endpoint)
    whoami = ask(again, {"op": "whoami"})
    if whoami.get("ok"):
        break
    time.sleep(0.1)
garbage = socket.socket(socket.AF_UNIX)
garbage.connect(endpoint)
garbage.sendall(b"x" * 100000)
garbage_answer = garbage.makefile().readline()
emit({"whoami": whoami, "garbage": json.loads(garbage_answer)})
"""


def test_an_app_cannot_exhaust_the_control_sockets(env):
    """SPEC S5, S34: a sandboxed app holds 100 idle connections to its app
    endpoint: the daemon answers further app connections at once with
    "busy" (75) instead of a thread each, the owner's `scopefs status` is
    still served, and once the app lets go the endpoint works again; an
    oversized request line gets a usage error, not a crash."""
    env.mount()
    session = env.app_session(ALPHA, FLOOD_THE_APP_ENDPOINT, sandbox=True)
    got = session.recv(timeout=30)
    assert got["busy"]["ok"] is False and got["busy"]["code"] == 75, got
    assert got["busy_seconds"] < 2, got
    status = env.cli("status", "--json", timeout=10)
    assert json.loads(status.stdout)["daemon"]["pid"] == env.daemon.pid
    session.send()
    final = session.recv(timeout=30)
    assert final["whoami"] == {"ok": True, "app": ALPHA}, final
    assert final["garbage"]["ok"] is False and final["garbage"]["code"] == 64, final
    assert session.finish() == 0


def run_cgroups(daemon_pid: int) -> list[str]:
    root = (
        Path("/sys/fs/cgroup/unified")
        if Path("/sys/fs/cgroup/unified/cgroup.procs").exists()
        else Path("/sys/fs/cgroup")
    )
    return sorted(p.name for p in root.rglob(f"scopefs-run-{daemon_pid}-*"))


def test_each_run_has_a_cgroup_that_goes_with_it(env):
    """SPEC S5: a run's processes are in a cgroup of the run's own (what
    `status` reports as the attribution), and the cgroup is removed once the
    run has ended, so runs leave nothing behind on the host."""
    env.mount()
    p = env.run_app(ALPHA, ["cat", "/proc/self/cgroup"], sandbox=True)
    assert p.returncode == 0, describe(p)
    line = next(row for row in p.stdout.splitlines() if row.startswith("0::"))
    assert f"scopefs-run-{env.daemon.pid}-" in line, line
    status = json.loads(env.cli("status", "--json").stdout)["daemon"]
    assert status["attribution"].startswith("cgroup v2"), status
    wait_for("the run's cgroup to go", lambda: run_cgroups(env.daemon.pid), lambda left: left == [])


# --- Finding 3: a process leaves its app tree -------------------------------

# What the escaped process checks: as an app process of ALPHA it must meet
# ENOENT at BETA's directory, EPERM on a granted file without a scope
# (strict mode), be able to write its own container, and be refused (77)
# when it tries to start BETA (state "": the sandbox's $SCOPEFS_STATE).
ESCAPED_PROBE = """
out, mnt, alpha, beta, granted, binary, state = sys.argv[1:8]
state = state or os.environ["SCOPEFS_STATE"]
import subprocess
run_beta = subprocess.run([binary, "--state", state, "run", "--no-sandbox", "--shared-view", "--app", beta, "--", "true"],
                          capture_output=True, timeout=30).returncode
result = {"other-app": attempt(os.listdir, os.path.join(mnt, beta)),
          "granted-without-scope": attempt(read_bytes, granted),
          "own-container": attempt(write_text, os.path.join(mnt, alpha, "Container/Documents/escaped.txt"), "x"),
          "run-other-app": run_beta}
with open(out + ".tmp", "w") as f:
    json.dump(result, f)
os.rename(out + ".tmp", out)
"""

ESCAPE = """
import ctypes, threading, time
out, how, probe = sys.argv[1], sys.argv[2], sys.argv[3]
probe_argv = [sys.executable, "-c", probe, out, *sys.argv[4:]]
libc = ctypes.CDLL(None, use_errno=True)
first = os.fork()
if first == 0:
    os.setsid()
    middle = os.getpid()
    if os.fork() != 0:
        os._exit(0)
    while os.getppid() == middle:  # until the middle process is gone and this one was reparented
        time.sleep(0.01)
    if how == "clone-parent":
        # Raw clone(CLONE_PARENT | SIGCHLD): the child's parent is the
        # caller's parent (not an app process), as the fork event says.
        if libc.syscall(56, 0x8000 | 17, 0, 0, 0, 0) == 0:
            os.execv(sys.executable, probe_argv)
    else:
        # execve from a second thread: the kernel reports the old leader's
        # exit while the process lives on.
        threading.Thread(target=os.execv, args=(sys.executable, probe_argv)).start()
        time.sleep(30)  # not a wait: the leader thread idles; the exec replaces the process
    os._exit(0)
os.waitpid(first, 0)
deadline = time.time() + 40
while not os.path.exists(out) and time.time() < deadline:
    time.sleep(0.05)
emit(json.load(open(out)))
"""


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandbox", "shared-view"])
@pytest.mark.parametrize("how", ["clone-parent", "thread-exec"])
def test_no_clone_flag_reparenting_or_exec_leaves_the_app(env, how, sandbox):
    """Finding 3, SPEC S5: after a double fork and setsid, a raw
    clone(CLONE_PARENT) child (3a) or an execve from a non-leader thread (3b)
    is still an app process of ALPHA: BETA's directory is ENOENT, a granted
    file needs a scope (EPERM), its own container is writable, and starting
    BETA exits 77. In the default sandbox, and with `--no-sandbox
    --shared-view`, where an escaped process would be the owner's inspector
    seeing every app (what the finding was seen with). Seen failing on the
    old main: the process was the owner's inspector (BETA listed, the file
    read, EROFS in the container, BETA started)."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    if not sandbox:
        env.view = "shared"
    env.mount()
    # The escaped process reports through a file: the sandbox's private /tmp.
    out = f"/tmp/escaped-{how}.json" if sandbox else env.root / f"escaped-{how}.json"
    binary, state = ("scopefs", "") if sandbox else (env.bin, env.state)
    got = env.app_json(
        ALPHA,
        ESCAPE,
        out,
        how,
        snippet(ESCAPED_PROBE),
        env.mnt,
        ALPHA,
        BETA,
        env.prov(ALPHA, LOCAL, REPORT),
        binary,
        state,
        sandbox=sandbox,
    )
    assert got == {
        "other-app": "ENOENT",
        "granted-without-scope": "EPERM",
        "own-container": "OK",
        "run-other-app": 77,
    }, got


# --- Finding 4: a thread's identity outlives its exec -----------------------

# Reports the thread's id (in a sandbox: in its pid namespace) and waits
# for the test to take note before the exec.
THREAD_THEN_EXEC = """
import threading
probe = sys.argv[1]
def run():
    try:
        os.stat(probe)  # a request from this thread: its identity is cached
    except OSError:
        pass
    step({"tid": threading.get_native_id()})
    os.execv("/bin/true", ["/bin/true"])  # from a non-leader thread: its ID is freed
threading.Thread(target=run).start()
threading.Event().wait(30)
"""


def host_thread_id(tid: int, marker: str) -> int:
    """The host's id of thread `tid` (an id in its sandbox's pid namespace)
    of the sandboxed python whose command line holds `marker`: the id the
    daemon sees in its requests."""
    pid = app_host_pid(marker)
    for task in os.listdir(f"/proc/{pid}/task"):
        status = Path(f"/proc/{pid}/task/{task}/status").read_text()
        nspid = next(line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:"))
        if int(nspid[-1]) == tid:
            return int(task)
    raise AssertionError(f"no thread {tid} in the sandboxed process {pid}")


def fork_with_pid(target: int, body) -> int | None:
    """Runs `body` in a child whose pid is `target` (through ns_last_pid);
    returns its exit code, or None when another process took the pid first."""
    for _ in range(200):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(target - 1))
        pid = os.fork()
        if pid == 0:
            code = 99
            try:
                if os.getpid() == target:
                    code = body()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 99:
            return code
    return None


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandbox", "shared-view"])
@pytest.mark.parametrize("who", ["owner", "nobody"])
def test_a_reused_thread_id_is_not_served_as_the_app(env, who, sandbox):
    """Finding 4, SPEC S5, S36, S3, S4: a thread of ALPHA makes a request, then
    execs; a later process that gets that thread id (forced here through
    ns_last_pid instead of 32k forks) is not ALPHA. As the owner it is the
    inspector, whose writes get EROFS; as `nobody` on an --allow-other mount
    it meets ENOENT at ALPHA's directory. In the default sandbox (the
    thread's host id taken from its NSpid), and with `--no-sandbox
    --shared-view` (what the finding was seen with). Seen failing on the
    old main: the owner's process created a file in ALPHA's container as
    ALPHA, and nobody's read ALPHA's container."""
    if not sandbox:
        env.view = "shared"
    env.mount(allow_other=(who == "nobody"))
    private = env.state / "containers" / ALPHA / "Documents" / "private.txt"
    private.write_text("ALPHA's own")
    os.chmod(private, 0o644)
    target = Path(env.container(ALPHA, "Documents/written-by-reused-tid.txt"))

    def as_reused_thread() -> int:
        try:
            if who == "nobody":
                os.setgid(65534)
                os.setuid(65534)
                Path(env.container(ALPHA, "Documents/private.txt")).read_text()
            else:
                target.write_text("not ALPHA")
            return 0
        except OSError as exc:
            return {30: 30, 2: 2}.get(exc.errno, 100 + exc.errno)  # EROFS, ENOENT, or 100 + another errno

    # Another process of the machine may take the freed id first: then try
    # again with a new one.
    for attempt in range(3):
        probe = env.container(ALPHA, f"Documents/probe-does-not-exist-{attempt}")
        app = env.app_session(ALPHA, THREAD_THEN_EXEC, probe, sandbox=sandbox)
        tid = app.recv()["tid"]
        if sandbox:
            tid = host_thread_id(tid, probe)
        app.send()
        assert app.finish() == 0, app.stderr()
        code = fork_with_pid(tid, as_reused_thread)
        if code is not None:
            break
    assert code is not None, f"could not get thread id {tid} again"
    assert code == (2 if who == "nobody" else 30), f"exit {code}: the process with ALPHA's old thread id was served"
    assert not (env.state / "containers" / ALPHA / "Documents" / target.name).exists()


# --- Findings 5 and 6: stolen descriptors, folders moved on the host -------
# SPEC S33 (amended): "A folder moved out of a grant on the host stops being
# reachable through descriptors and working directories held on it within
# 1 s. An open file answers only processes of the app that opened it."
# Finding 5: another app takes app A's O_RDWR descriptor (here passed over an
# AF_UNIX socket, as `pidfd_getfd` would hand it too) and writes through it.
# Finding 6: the owner moves a granted folder's subfolder (or an ancestor of
# a granted folder) to an ungranted place on the host while an app holds a
# descriptor and its working directory in it.

# App A: in scope of the file, opens it O_RDWR, hands the descriptor to
# every process that connects to the socket (BETA's process, then an
# inspector), and finally lets a forked child of its own use it.
OWNER_SHARES_DESCRIPTOR = """
import socket
path, sock_path, clients = sys.argv[1], sys.argv[2], int(sys.argv[3])
start_accessing(path)
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


def shared_folder(env) -> tuple:
    """A host folder that sandboxed apps and the owner's processes all see
    (`--expose DIR:rw`, as a user may give two apps the same folder): where
    a descriptor is handed over a unix socket. Returns (folder, the `run`
    options that show it)."""
    folder = env.root / "shared"
    folder.mkdir()
    os.chmod(folder, 0o777)  # the app account (scopefs-app, for a root owner) binds its socket there
    return folder, ("--expose", f"{folder}:rw")


def test_stolen_descriptor_answers_only_its_app(env):
    """SPEC S33 (amended), issue 14 finding 5: a descriptor app A opened
    O_RDWR on a granted file, handed to a process of app B (over a unix
    socket, as pidfd_getfd would) or to an inspector (the owner's process,
    SPEC S4), refuses read, pwrite, fallocate, fsync, ftruncate and
    copy_file_range with EPERM (fsetxattr, which the kernel sends without the
    descriptor, meets the gate of the node: ENOENT for another app, EROFS for
    the inspect view); the host file is unchanged. A's own forked child still reads and writes.
    Both apps are sandboxed; the socket is in a folder shown to both."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    host_file = env.backing(LOCAL) / "docs" / "report.txt"
    folder, expose = shared_folder(env)
    sock_path = str(folder / "share.sock")
    owner = env.app_session(
        ALPHA,
        OWNER_SHARES_DESCRIPTOR,
        env.prov(ALPHA, LOCAL, "docs/report.txt"),
        sock_path,
        2,
        sandbox=True,
        extra=expose,
    )
    assert owner.recv() == {"ready": True}

    # BETA's sink is its own container file: copy_file_range into it would
    # copy A's data out.
    by_other_app = env.app_json(BETA, THIEF, sock_path, env.container(BETA, "loot.txt"), sandbox=True, extra=expose)
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
    refused = wait_events(
        env,
        lambda e: e.get("operation") in ("read", "write") and e.get("errnoName") == "EPERM",
        kind="denial",
        app=BETA,
        count=2,
    )
    assert {e["operation"] for e in refused} == {"read", "write"}, refused

    owner.send()
    assert owner.recv() == {"child-status": 0}, "the owning app's own child lost the descriptor"
    assert host_file.read_bytes()[:5] == b"child"


APP_READS_INSPECTOR_DESCRIPTOR = """
import socket
sock_path = sys.argv[1]
start_accessing(sys.argv[2])
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect(sock_path)
_, fds, _, _ = socket.recv_fds(conn, 16, 1)
emit({"read": attempt(os.pread, fds[0], 16, 0)})
"""


def test_app_cannot_read_through_an_inspector_descriptor(env):
    """SPEC S33 (amended), S4, issue 14 finding 5: a descriptor the owner's
    inspector opened (read-only, in the inspect view) answers no app
    process, even one in scope of the file (sandboxed, the socket in a
    folder shown to it)."""
    import socket

    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    fd = os.open(env.prov(ALPHA, LOCAL, "docs/report.txt"), os.O_RDONLY)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        folder, expose = shared_folder(env)
        sock_path = str(folder / "inspector.sock")
        server.bind(sock_path)
        os.chmod(sock_path, 0o777)
        server.listen(1)
        app = env.app_session(
            ALPHA,
            APP_READS_INSPECTOR_DESCRIPTOR,
            sock_path,
            env.prov(ALPHA, LOCAL, "docs/report.txt"),
            sandbox=True,
            extra=expose,
        )
        server.settimeout(20)
        conn, _ = server.accept()
        socket.send_fds(conn, [b"fd"], [fd])
        conn.close()
        assert app.recv() == {"read": "EPERM"}
        assert os.pread(fd, 16, 0) == REPORT_BYTES[:16], "the inspector's own read failed"
    finally:
        server.close()
        os.close(fd)


# In scope of the folder, holds a descriptor on it and its working
# directory in it (or below it); after the test moved the folder on the
# host, tries to list, open and create through both.
HOLDS_FOLDER = """
folder, cwd = sys.argv[1], sys.argv[2]
start_accessing(folder)
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

MOVED_OPERATIONS = (
    "list-fd",
    "open-fd",
    "stat-fd",
    "create-fd",
    "mkdir-fd",
    "list-cwd",
    "open-cwd",
    "create-cwd",
    "mkdir-cwd",
)
CREATED_NAMES = ("via-fd.txt", "dir-via-fd", "via-cwd.txt", "dir-via-cwd")


def _held_folder_cut_after_host_move(env, folder_rel, cwd_rel, moved_rel, destination):
    """Common body: the app holds `folder_rel` (fd) and `cwd_rel` (cwd); the
    owner renames `moved_rel` to `destination` on the host; 1.5 s later every
    operation through the descriptor and the working directory fails with
    ENOENT or EPERM, and nothing appears in the new host location. The app
    is sandboxed and still holds its scope: the move is what cuts it."""
    backing = env.backing(LOCAL)
    (backing / cwd_rel).mkdir(parents=True, exist_ok=True)
    (backing / folder_rel / "f.txt").write_bytes(b"f\n")
    (backing / cwd_rel / "g.txt").write_bytes(b"g\n")
    app = env.app_session(
        ALPHA, HOLDS_FOLDER, env.prov(ALPHA, LOCAL, folder_rel), env.prov(ALPHA, LOCAL, cwd_rel), sandbox=True
    )
    before = app.recv()
    assert "f.txt" in before["before"] and "g.txt" in before["cwd"], before

    os.rename(backing / moved_rel, destination)
    moved_at = time.monotonic()
    time.sleep(1.5)  # not a wait: past the location check's age (1 s), so the check runs again
    app.send()
    after = app.recv()
    elapsed = time.monotonic() - moved_at
    for operation in MOVED_OPERATIONS:
        assert after[operation] in ("ENOENT", "EPERM"), (
            f"{operation} through a held folder {elapsed:.1f} s after it moved out of the grant: {after}"
        )
    created = [str(p) for p in destination.rglob("*") if p.name in CREATED_NAMES]
    assert not created, f"created in the ungranted host location: {created}"


def test_folder_moved_out_of_grant_is_cut(env):
    """SPEC S33 (amended), issue 14 finding 6: the owner moves `work/sub` on
    the host into an ungranted folder while an app holds a descriptor on it
    and its cwd in `work/sub/deep`: within 1.5 s listing, opening and creating
    through both fail (ENOENT/EPERM) and nothing is created there."""
    env.grant(ALPHA, f"{LOCAL}:work")
    env.mount()
    _held_folder_cut_after_host_move(env, "work/sub", "work/sub/deep", "work/sub", env.backing(LOCAL) / "work2" / "sub")


def test_ancestor_moved_out_of_provider_cuts_held_folder(env):
    """SPEC S33 (amended), issue 14 finding 6: the owner moves an ancestor of
    the granted folder `deep/a` out of the provider on the host: the app's
    descriptor on `deep/a/b` and its
    cwd in `deep/a/b` stop working within 1.5 s."""
    env.grant(ALPHA, f"{LOCAL}:deep/a")
    env.mount()
    _held_folder_cut_after_host_move(env, "deep/a/b", "deep/a/b", "deep", env.root / "backing" / "escape" / "deep")


HOLDS_FOLDER_STILL_GRANTED = """
folder = sys.argv[1]
start_accessing(folder)
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
    location check ran (1.5 s), and what it creates lands in the new place
    (sandboxed, in scope of the folder)."""
    env.grant(ALPHA, f"{LOCAL}:work")
    env.mount()
    backing = env.backing(LOCAL) / "work"
    (backing / "sub").mkdir()
    (backing / "sub" / "f.txt").write_bytes(b"f\n")
    app = env.app_session(ALPHA, HOLDS_FOLDER_STILL_GRANTED, env.prov(ALPHA, LOCAL, "work/sub"), sandbox=True)
    assert app.recv() == {"before": ["f.txt"]}
    os.rename(backing / "sub", backing / "renamed")
    time.sleep(1.5)  # not a wait: past the location check's age (1 s), so the check runs again
    app.send()
    after = app.recv()
    assert after == {
        "list-fd": {"ok": ["f.txt", "made-in-cwd.txt"]},
        "list-cwd": {"ok": ["f.txt", "made-in-cwd.txt"]},
    }, after
    assert (backing / "renamed" / "made-in-cwd.txt").exists()


# --- Finding 7: the audit trail ---
# SPEC S29 (amended): no app can flush the trail — repeated identical events
# are coalesced and rotation drops starts and stops before grants, revokes,
# restores, denials and leaks. S29/S33a: text output escapes control
# characters in names, JSON keeps them exact.

AUDIT_ITEM = "docs/report.txt"
FLOOD_STOPS = 100_001  # one more than the event log's capacity
IMPORTANT_KINDS = "grant,revoke,restore,denial"

# Issues FLOOD_STOPS unbalanced stops on argv[1] in one process, as fast as
# setxattr goes; reports how long it took.
FLOOD_SNIPPET = """
p, n = sys.argv[1], int(sys.argv[2])
started = time.monotonic()
for _ in range(n):
    os.setxattr(p, "user.scopefs.stop", b"")
emit({"seconds": time.monotonic() - started})
"""


# In scope of argv[1], reads it, waits for the test to revoke, reads again.
READ_THEN_READ_REVOKED = """
start_accessing(sys.argv[1])
step({"read": attempt(read_bytes, sys.argv[1])})
emit({"read": attempt(read_bytes, sys.argv[1])})
"""


def events_json(env, *args) -> list[dict]:
    """`scopefs events --json ARGS...`, one object per line."""
    p = env.cli("events", "--json", *args)
    try:
        return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise AssertionError(f"events --json printed a non-JSON line ({exc})\n" + describe(p))


def occurrences(event: dict) -> int:
    """How many identical events one row stands for (1 where not coalesced)."""
    return event.get("occurrences", 1)


def test_unbalanced_stop_flood_neither_evicts_nor_floods_the_trail(env):
    """SPEC S29 (amended), issue 14 finding 7: after a grant, a revoke, a
    denial (EPERM while revoked, to an app that was in scope) and a restore,
    one sandboxed app process issues 100,001 unbalanced stops — one more
    than the log's capacity. The grant, revoke, restore and denial events
    are all still in `scopefs events --json`, and the stops are there too,
    coalesced into a few rows whose `occurrences` add up to 100,001 (text
    output shows them as ×N)."""
    grant = env.grant(ALPHA, f"{LOCAL}:{AUDIT_ITEM}")
    env.mount()
    target = env.prov(ALPHA, LOCAL, AUDIT_ITEM)
    reader = env.app_session(ALPHA, READ_THEN_READ_REVOKED, target, sandbox=True)
    assert reader.recv() == {"read": "OK"}
    reader_pid = app_host_pid(target)  # what the daemon records: the host's pid, not the sandbox's
    env.revoke(ALPHA, grant)
    reader.send()
    assert reader.recv() == {"read": "EPERM"}
    assert reader.finish() == 0, reader.stderr()
    env.restore(ALPHA, grant)

    flood = env.app_json(ALPHA, "import time\n" + FLOOD_SNIPPET, target, FLOOD_STOPS, sandbox=True)

    # The recorder writes in batches every 100 ms: wait until the newest
    # stop row stops changing. (Only the newest: printing 100,000 rows as
    # JSON takes the old binary longer than the CLI timeout.)
    last = [None]

    def settled(newest: list[dict]) -> bool:
        done = bool(newest) and newest == last[0]
        last[0] = newest
        return done

    wait_for(
        "the newest unbalanced stop to stop changing",
        lambda: events_json(env, "--kind", "unbalanced-stop", "--limit", "1"),
        settled,
        timeout=15,
    )

    important = events_json(env, "--kind", IMPORTANT_KINDS, "--app", ALPHA)
    kinds = [e["kind"] for e in important if e.get("grant") == int(grant) or e["kind"] == "denial"]
    # The denial is written by the daemon's recorder (every 100 ms), the
    # others by the CLI at once: their rows' order may differ.
    assert sorted(kinds) == sorted(["grant", "revoke", "denial", "restore"]), (
        f"after {FLOOD_STOPS} unbalanced stops ({flood['seconds']:.1f} s) the log holds only "
        f"{kinds} of grant, revoke, denial, restore"
    )
    denial = next(e for e in important if e["kind"] == "denial")
    assert denial["pid"] == reader_pid and denial["errnoName"] == "EPERM", denial

    rows = events_json(env, "--kind", "unbalanced-stop", "--limit", "1000")
    assert len(rows) <= 100, f"{FLOOD_STOPS} identical unbalanced stops took {len(rows)}+ rows: not coalesced"
    recorded = sum(occurrences(e) for e in rows)
    assert recorded == FLOOD_STOPS, f"{recorded} of {FLOOD_STOPS} unbalanced stops recorded in {len(rows)} rows"
    assert all(e["path"].endswith(AUDIT_ITEM) and e["app"] == ALPHA for e in rows), rows[:3]

    text = env.cli("events", "--kind", "unbalanced-stop").stdout
    assert re.search(r"×\d{4,}", text), f"no ×N on coalesced stops in events text:\n{text[:2000]}"


# A name that, printed raw, forges a second event line (a newline, a fake
# timestamp, tabs between fake fields) and turns the terminal red.
FORGED_NAME = "x\n2030-01-01T00:00:00Z\tgrant\tcom.other.app\t-\tforged\x1b[31m"
FORGED_ESCAPED = r"x\n2030-01-01T00:00:00Z\tgrant\tcom.other.app\t-\tforged\x1b[31m"


def raw_controls(text: str) -> list[str]:
    """Control characters in text other than the newlines and tabs that
    separate lines and fields: C0, DEL, C1."""
    return sorted({repr(c) for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0})


def assert_escaped(what: str, text: str) -> None:
    assert FORGED_ESCAPED in text, f"{what}: the name is not shown escaped (as `ls -b` would):\n{text!r}"
    assert not raw_controls(text), f"{what}: raw control characters {raw_controls(text)} in:\n{text!r}"
    forged = [line for line in text.splitlines() if line.startswith("2030-01-01")]
    assert not forged, f"{what}: the name forged a line: {forged!r}\nwhole output: {text!r}"


def test_control_characters_in_names_are_escaped_in_text_and_exact_in_json(env):
    """SPEC S29 (amended), S33a, issue 14 finding 7: a provider file whose
    name holds a newline, tabs, a fake timestamp and an ESC sequence is
    opened for an app (grant + reference), the app starts accessing it and
    exits without stopping (a leak), and the grant is revoked. The text
    output of `events`, `status`, `privacy`, `query` and `revoke` shows the
    name escaped (`\\n`, `\\t`, `\\x1b`): no raw control character, no
    forged line. `--json` keeps the exact name."""
    (env.backing(LOCAL) / FORGED_NAME).write_bytes(b"forged\n")
    opened = env.cli("open", ALPHA, f"{LOCAL}:{FORGED_NAME}").stdout
    grant = re.search(r"grant (\d+)", opened).group(1)
    env.mount()
    leaked = env.app_json(
        ALPHA,
        "emit(outcome(lambda: os.getxattr(sys.argv[1], 'user.scopefs.start').decode()))",
        env.prov(ALPHA, LOCAL, FORGED_NAME),
        sandbox=True,
    )
    assert leaked == {"ok": "1"}, leaked
    wait_for("a leak event after the app exited in scope", lambda: events_json(env, "--kind", "leak"))

    outputs = {
        "events": env.cli("events").stdout,
        "status": env.cli("status").stdout,
        "privacy": env.cli("privacy", ALPHA).stdout,
        "query": env.cli("query", "--app", ALPHA).stdout,
        "revoke": env.cli("revoke", ALPHA, grant).stdout,
    }
    for what, text in outputs.items():
        assert_escaped(what, text)

    exact_path = f"/{ALPHA}/Providers/{LOCAL}/{FORGED_NAME}"
    logged = events_json(env, "--app", ALPHA)
    assert {e["kind"] for e in logged if e.get("path") == exact_path} >= {"grant", "leak", "revoke"}, logged
    privacy = json.loads(env.cli("privacy", ALPHA, "--json").stdout)
    assert [row["path"] for row in privacy] == [FORGED_NAME], privacy
    query = json.loads(env.cli("query", "--app", ALPHA, "--json").stdout)
    assert any(result["url"].endswith("/" + FORGED_NAME) for result in query), query
