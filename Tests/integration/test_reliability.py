"""An app must not be able to crash or stall the daemon (issue 15; SPEC S34),
and renames and extended attributes inside granted folders behave as on
the backing file system (SPEC S35, S33).

Every test runs ALPHA's app processes in a read-write grant on local:work
and compares what they see with the backing directory on the host. The
crash test runs the app under a short deadline and then checks that the
daemon is still alive, so a daemon that loops or dies fails it in seconds
(a looping daemon is killed: it would otherwise grow to gigabytes).
"""

from __future__ import annotations

import os
import random
import stat
import time

import pytest
from scopefs_harness import ALPHA, LOCAL, _proc_stat, describe, last_json_line, snippet

RENAME_EXCHANGE = 2

# renameat2 through ctypes, for app snippets (Python has no binding).
RENAMEAT2 = """
import ctypes
_libc = ctypes.CDLL(None, use_errno=True)
def renameat2(old, new, flags):
    if _libc.renameat2(-100, os.fsencode(old), -100, os.fsencode(new), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
"""


def granted_work(env) -> tuple[str, os.PathLike]:
    """Grant ALPHA local:work read-write and mount; (app path, host path)."""
    env.grant(ALPHA, f"{LOCAL}:work")
    env.mount()
    return env.prov(ALPHA, LOCAL, "work"), env.backing(LOCAL) / "work"


def daemon_alive(pid: int) -> bool:
    st = _proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def run_bounded_app(env, code: str, *args, timeout: float):
    """Run an ALPHA snippet with a deadline; (JSON result or None, what went wrong or None)."""
    try:
        p = env.run_app(ALPHA, ["python3", "-c", snippet(code), *map(str, args)], timeout=timeout)
    except AssertionError:  # run_bounded killed it at the deadline
        return None, f"the app did not finish within {timeout}s"
    if p.returncode != 0:
        return None, "app snippet failed\n" + describe(p)
    return last_json_line(p), None


def require_daemon_alive(env, pid: int, problem: str | None) -> None:
    """Fail when the daemon died, or the app hung (the daemon is then killed)."""
    if daemon_alive(pid) and problem is None:
        return
    if daemon_alive(pid):
        env.kill_daemon()  # a looping daemon eats memory until it aborts
        pytest.fail(f"the app hung and the daemon stopped answering (killed it): {problem}")
    pytest.fail(f"the daemon (pid {pid}) died: {problem}")


EXCHANGE_THEN_MOVE = (
    RENAMEAT2
    + """
w = sys.argv[1]
start_accessing(w)
os.chdir(w)
os.makedirs("p1/a"); os.makedirs("p2/b")
write_text("p1/a/from-a", "A"); write_text("p2/b/from-b", "B")
subprocess.run(["ls", "-R"], stdout=subprocess.DEVNULL, check=True)
res = {"exchange": attempt(renameat2, "p1/a", "p2/b", RENAME_EXCHANGE)}
res["mv"] = attempt(os.rename, "p2", "p1/a/p2moved")
res["cat"] = outcome(read_text, "p1/a/p2moved/x")
res["from-a"] = outcome(read_text, "p1/a/p2moved/b/from-a")
res["tree"] = sorted(os.path.relpath(os.path.join(d, n), ".") for d, ds, fs in os.walk(".") for n in ds + fs)
res["paths"] = {p: os.getxattr(p, "user.scopefs.path").decode() for p in res["tree"]}
emit(res)
"""
)


@pytest.mark.scopefs_timeout(60)
def test_exchange_then_move_keeps_daemon_alive(env):
    """Issue 15 finding 1, SPEC S34, S35: RENAME_EXCHANGE of p1/a and p2/b,
    then `mv p2 p1/a/p2moved`, then `cat p1/a/p2moved/x`: the daemon stays
    alive and answers, cat gets ENOENT, and every name has its host path
    (user.scopefs.path is the node table's path of each node)."""
    work, host = granted_work(env)
    pid = env.daemon.pid
    code = "import subprocess\nRENAME_EXCHANGE = %d\n" % RENAME_EXCHANGE + EXCHANGE_THEN_MOVE
    got, problem = run_bounded_app(env, code, work, timeout=20)
    require_daemon_alive(env, pid, problem)
    assert got is not None, problem
    tree = ["p1", "p1/a", "p1/a/from-b", "p1/a/p2moved", "p1/a/p2moved/b", "p1/a/p2moved/b/from-a"]
    assert {k: got[k] for k in ("exchange", "mv", "cat", "from-a", "tree")} == {
        "exchange": "OK",
        "mv": "OK",
        "cat": {"errno": "ENOENT"},
        "from-a": {"ok": "A"},
        "tree": tree,
    }
    assert got["paths"] == {p: "work/" + p for p in tree}
    host_tree = sorted(str(p.relative_to(host)) for p in host.rglob("*"))
    assert host_tree == tree
    # The mount still answers another process.
    again = env.app_json(ALPHA, "start_accessing(sys.argv[1])\nemit(listing(sys.argv[1]))", work + "/p1/a")
    assert again == ["from-b", "p2moved"]


EXCHANGE_NON_DIRECTORIES = (
    RENAMEAT2
    + """
w, kind = sys.argv[1], sys.argv[2]
start_accessing(w)
a, b = w + "/a", w + "/b"
write_text(a, "0123456789")
if kind == "file": write_text(b, "xy")
elif kind == "symlink": os.symlink("nowhere", b)
else: os.mkfifo(b)
os.lstat(a); os.lstat(b)                   # both names are in the kernel's cache now
renameat2(a, b, 2)                          # RENAME_EXCHANGE
def kind_of(p):
    m = os.lstat(p).st_mode
    return "file" if stat.S_ISREG(m) else "symlink" if stat.S_ISLNK(m) else "fifo" if stat.S_ISFIFO(m) else "?"
res = {"lstat a": outcome(kind_of, a), "lstat b": outcome(lambda: [kind_of(b), os.lstat(b).st_size]),
       "lchown a": attempt(os.lchown, a, os.getuid(), os.getgid()),
       "lchown b": attempt(os.lchown, b, os.getuid(), os.getgid()),
       "chmod b": attempt(os.chmod, b, 0o600), "truncate b": attempt(os.truncate, b, 3)}
if kind != "symlink": res["chmod a"] = attempt(os.chmod, a, 0o640)     # chmod follows a symlink
if kind == "file": res["truncate a"] = attempt(os.truncate, a, 1)
res["after"] = {n: outcome(lambda: [oct(os.lstat(p).st_mode), os.lstat(p).st_size]) for n, p in (("a", a), ("b", b))}
emit(res)
"""
)


@pytest.mark.parametrize("kind", ["file", "symlink", "fifo"])
def test_exchange_non_directories_keeps_both_names(env, kind):
    """Issue 15 finding 2, SPEC S35: after RENAME_EXCHANGE of a file `a`
    with a file / symlink / FIFO `b`, lstat, lchown, chmod and truncate on
    both names act on the object now under that name, with no fresh lookup
    (the names stay in the kernel's cache), and the host agrees."""
    work, host = granted_work(env)
    got = env.app_json(ALPHA, EXCHANGE_NON_DIRECTORIES, work, kind)
    want = {
        "lstat a": {"ok": kind},
        "lstat b": {"ok": ["file", 10]},
        "lchown a": "OK",
        "lchown b": "OK",
        "chmod b": "OK",
        "truncate b": "OK",
    }
    if kind != "symlink":
        want["chmod a"] = "OK"
    if kind == "file":
        want["truncate a"] = "OK"
    assert {k: v for k, v in got.items() if k != "after"} == want
    ha, hb = os.lstat(host / "a"), os.lstat(host / "b")
    assert stat.S_ISREG(hb.st_mode) and hb.st_size == 3 and stat.S_IMODE(hb.st_mode) == 0o600
    if kind != "symlink":
        assert stat.S_IMODE(ha.st_mode) == 0o640
    if kind == "file":
        assert ha.st_size == 1
    assert got["after"] == {"a": {"ok": [oct(ha.st_mode), ha.st_size]}, "b": {"ok": [oct(hb.st_mode), hb.st_size]}}


DIRECTORY_XATTRS = """
import subprocess
d = sys.argv[1]
start_accessing(d)  # the granted folder holding it (SPEC S9)
res = {"set": attempt(os.setxattr, d, "user.x", b"1"),
       "setfattr": subprocess.run(["setfattr", "-n", "user.y", "-v", "2", d], capture_output=True, text=True).returncode,
       "get host": outcome(lambda: os.getxattr(d, "user.h").decode()),
       "get own": outcome(lambda: os.getxattr(d, "user.x").decode())}
res["getfattr"] = subprocess.run(["getfattr", "--absolute-names", "-d", d], capture_output=True, text=True).stdout
res["list"] = outcome(lambda: sorted(os.listxattr(d)))
res["remove"] = attempt(os.removexattr, d, "user.x")
res["setfattr -x"] = subprocess.run(["setfattr", "-x", "user.h", d], capture_output=True, text=True).returncode
res["list after"] = outcome(lambda: sorted(os.listxattr(d)))
emit(res)
"""


def test_directory_xattrs_match_backing_directory(env):
    """Issue 15 finding 3, SPEC S35: setxattr / setfattr, getxattr /
    getfattr, listxattr and removexattr / setfattr -x on a folder inside a
    granted folder act on the backing folder, as they do on files."""
    work, host = granted_work(env)
    backing = host / "xd"
    backing.mkdir()
    os.setxattr(backing, "user.h", b"host")
    got = env.app_json(ALPHA, DIRECTORY_XATTRS, work + "/xd")
    assert {k: v for k, v in got.items() if k != "getfattr"} == {
        "set": "OK",
        "setfattr": 0,
        "get host": {"ok": "host"},
        "get own": {"ok": "1"},
        "list": {"ok": ["user.h", "user.x", "user.y"]},
        "remove": "OK",
        "setfattr -x": 0,
        "list after": {"ok": ["user.y"]},
    }
    assert 'user.h="host"' in got["getfattr"] and 'user.x="1"' in got["getfattr"], got["getfattr"]
    assert os.listxattr(backing) == ["user.y"] and os.getxattr(backing, "user.y") == b"2"


# ---------------------------------------------------------------------------
# random operations from several app processes at once (a small fsstress)

STRESS = (
    RENAMEAT2
    + """
import random, time
w, seed, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rng = random.Random(seed)
NAMES = ["a", "b", "c", "d"]
known = []     # paths seen by the last walk: most operations aim at existing names
def rpath():
    if known and rng.random() < 0.6:
        return rng.choice(known)
    return w + "/" + "/".join(rng.choice(NAMES) for _ in range(rng.randint(1, 3)))
def create(p):
    with open(p, "wb") as f: f.write(os.urandom(rng.randint(0, 3000)))
def walk():
    known.clear()
    for d, ds, fs in os.walk(w):
        for n in ds + fs:
            known.append(os.path.join(d, n))
            os.lstat(known[-1])
OPS = [
    ("create", lambda: create(rpath())), ("mkdir", lambda: os.mkdir(rpath())),
    ("rmdir", lambda: os.rmdir(rpath())), ("unlink", lambda: os.unlink(rpath())),
    ("link", lambda: os.link(rpath(), rpath())), ("rename", lambda: os.rename(rpath(), rpath())),
    ("noreplace", lambda: renameat2(rpath(), rpath(), 1)), ("exchange", lambda: renameat2(rpath(), rpath(), 2)),
    ("exchange", lambda: renameat2(rpath(), rpath(), 2)), ("whiteout", lambda: renameat2(rpath(), rpath(), 4)),
    ("truncate", lambda: os.truncate(rpath(), rng.randint(0, 5000))), ("stat", lambda: os.lstat(rpath())),
    ("walk", walk),
]
errors, ops, deadline = {}, 0, time.monotonic() + seconds
while time.monotonic() < deadline:
    name, op = rng.choice(OPS)
    ops += 1
    try:
        op()
    except OSError as exc:
        key = name + ":" + ename(exc)
        errors[key] = errors.get(key, 0) + 1
emit({"ops": ops, "errors": errors})
"""
)

FINAL_TREE = """
w = sys.argv[1]
tree = {}
for d, ds, fs in os.walk(w):
    for n in ds + fs:
        p = os.path.join(d, n)
        st = os.lstat(p)
        kind = "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else "other"
        tree[os.path.relpath(p, w)] = [kind, st.st_size if kind == "file" else 0, st.st_nlink if kind == "file" else 0,
                                       outcome(lambda: os.getxattr(p, "user.scopefs.path", follow_symlinks=False).decode())]
emit(tree)
"""

# Errors that only a broken or dead daemon gives.
DAEMON_TROUBLE = ("EIO", "ENOTCONN", "ECONNABORTED")


@pytest.mark.scopefs_timeout(60)
def test_random_operations_from_several_apps(env):
    """Issue 15, SPEC S34, S35: three app processes run random creates,
    links, renames (plain, RENAME_NOREPLACE, RENAME_EXCHANGE,
    RENAME_WHITEOUT), mkdir/rmdir, unlinks, truncates and walks over a few
    names in one granted folder for 8 s. The daemon survives, no call gets
    EIO or ENOTCONN, and the final tree seen by the app (names, kinds,
    sizes, link counts, and each node's path in the daemon's table) is the
    backing tree. The seed is printed; SCOPEFS_STRESS_SEED replays it."""
    seed = int(os.environ.get("SCOPEFS_STRESS_SEED") or random.randrange(1 << 30))
    print(f"stress seed {seed} (replay with SCOPEFS_STRESS_SEED={seed})")
    work, host = granted_work(env)
    pid = env.daemon.pid
    apps = [env.app_session(ALPHA, STRESS, work, seed * 10 + i, 8) for i in range(3)]
    results, problem, deadline = [], None, time.monotonic() + 20  # 8 s of work, 12 s of slack
    for app in apps:
        try:
            results.append(app.recv(timeout=max(0.1, deadline - time.monotonic())))
        except AssertionError as exc:
            problem = problem or str(exc).splitlines()[0]
    require_daemon_alive(env, pid, problem and f"seed {seed}: {problem}")
    for app in apps:
        assert app.finish() == 0, app.stderr()
    trouble = {k: n for r in results for k, n in r["errors"].items() if k.split(":")[1] in DAEMON_TROUBLE}
    assert not trouble, f"seed {seed}: {trouble}; all results: {results}"
    print(f"results: {results}")
    assert sum(r["ops"] for r in results) > 300, results
    seen, problem = run_bounded_app(env, FINAL_TREE, work, timeout=15)
    require_daemon_alive(env, pid, problem and f"seed {seed}: {problem}")
    assert seen is not None, f"seed {seed}: {problem}"
    names_of: dict[int, set[str]] = {}
    expected = {}
    for p in sorted(host.rglob("*")):
        rel, st = str(p.relative_to(host)), os.lstat(p)
        kind = "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else "other"
        expected[rel] = [kind, st.st_size if kind == "file" else 0, st.st_nlink if kind == "file" else 0]
        names_of.setdefault(st.st_ino, set()).add("work/" + rel)
    assert {rel: v[:3] for rel, v in seen.items()} == expected, f"seed {seed}"
    for rel, (kind, _, _, path) in seen.items():
        if kind == "other":
            continue  # a whiteout device: user.* attributes are refused on it
        ino = os.lstat(host / rel).st_ino
        assert path.get("ok") in names_of[ino], f"seed {seed}: {rel} has table path {path}"
