"""Client libraries and their examples against a real strict-mode mount
(SPEC S31; the syscall contract of docs/API.md, SPEC S6-S12).

Each example (docs/examples: Swift, C, Python) runs as an app process of
com.example.app through `scopefs run`, like a user would run it, and its
output is asserted. The libraries' other calls (nested starts, unbalanced
stops, container paths, invisible paths, revocation, the budget, bookmarks
made, resolved, renamed, tampered with, deleted, revoked) are driven
per language: the Python module in an app snippet, the C library through
ctypes in an app snippet, the Swift library through a small check program
(Tests/integration/clients_swift).

Build products stay out of the default .build folder: the C library and the
C example build into a pytest temp dir; the Swift packages build into
REPO/.build-clients-example and REPO/.build-clients-check (git-ignored). Only
the Swift cases are skipped, with a reason, when no `swift` is found
(SWIFT=/path/to/swift overrides the PATH lookup).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from client_builds import (  # noqa: F401  (fixtures: the C library, the Swift check app)
    BUILD_TIMEOUT,
    C_CLIENT_DIR,
    CLIENTS,
    EXAMPLES,
    PYTHON_CLIENT_DIR,
    SWIFT_BUILD_TIMEOUT,
    SWIFT_EXAMPLE_PACKAGE,
    SWIFT_EXAMPLE_SCRATCH,
    _build_env,
    _swift,
    _swift_build,
    c_build,
    compile_c_example,
    swift_check,
)
from scopefs_harness import (
    ITEMS_MOVE,
    LOCAL,
    REPO_ROOT,
    Env,
    describe,
    last_json_line,
    run_bounded,
    snippet,
    subcommand_help,
    supports_lenient_scopes,
)

APP = "com.example.app"
FILE_TEXT = b"hello from ScopeFS\nsecond line\n"
NOTE_TEXT = b"container note\nmore\n"
BUDGET = 16

LANGUAGES = ["c", "python", "swift"]


@pytest.fixture(scope="session")
def c_example(c_build) -> list[str]:
    """docs/examples/example.c compiled and linked against libscopefs.so."""
    return [str(compile_c_example(EXAMPLES / "example.c", c_build / "example", c_build))]


@pytest.fixture(scope="session")
def python_example() -> list[str]:
    return [sys.executable, str(EXAMPLES / "example.py")]


@pytest.fixture(scope="session")
def swift_example() -> list[str]:
    return [str(_swift_build(SWIFT_EXAMPLE_PACKAGE, SWIFT_EXAMPLE_SCRATCH, "scopefs-example"))]


@dataclass
class Client:
    """One language's client, built: its example's argv prefix, and the C
    library or the Swift check program."""

    lang: str
    example: list[str]
    lib: Path | None = None  # C: libscopefs.so
    check: str | None = None  # Swift: scopefs-client-check


@pytest.fixture(params=LANGUAGES)
def client(request) -> Client:
    """Each language in turn, built during setup (before the mount, outside
    the per-test alarm); only the Swift case skips when there is no swift."""
    lang = request.param
    example = request.getfixturevalue(f"{lang}_example")
    if lang == "c":
        return Client(lang, example, lib=request.getfixturevalue("c_build") / "libscopefs.so")
    if lang == "swift":
        return Client(lang, example, check=request.getfixturevalue("swift_check"))
    return Client(lang, example)


# ---------------------------------------------------------------------------
# the world: the brief's setup on top of conftest's `env`


@dataclass
class World:
    env: Env
    file: str  # MOUNT/APP/Providers/local/docs/file.txt (granted folder)
    documents: str  # MOUNT/APP/Container/Documents
    note: str  # MOUNT/APP/Container/Documents/note.txt
    invisible: str  # MOUNT/APP/Providers/local/photos/p.jpg (never granted)
    grant_id: str

    def run(self, argv: list) -> subprocess.CompletedProcess:
        """`scopefs run --app APP -- ARGV...` (SPEC S5), bounded, with the
        Python client on PYTHONPATH and SCOPEFS_STATE naming the state dir
        (how the libraries find the control socket to resolve bookmarks)."""
        env = dict(self.env.base_env)
        env["PYTHONPATH"] = str(PYTHON_CLIENT_DIR)
        env["SCOPEFS_STATE"] = str(self.env.state)
        return run_bounded(
            self.env.run_argv(APP, [str(a) for a in argv]), 60, env, what=f"app process {Path(str(argv[0])).name}"
        )

    def snippet_json(self, code: str, *args):
        """Run a Python snippet (harness prelude + code) as an app process;
        returns its last JSON line."""
        p = self.run([sys.executable, "-c", snippet(code), *map(str, args)])
        assert p.returncode == 0, "app snippet failed\n" + describe(p)
        return last_json_line(p)


def make_world(env: Env, monkeypatch, budget: int | None = None) -> World:
    """The brief's setup: app com.example.app, provider `local` with
    docs/file.txt, grant local:docs, strict mount (the default; asked for
    explicitly when the binary has --scopes, since conftest mounts lenient)."""
    env.cli("app", "add", APP, "--name", "Example App")
    (env.backing(LOCAL) / "docs" / "file.txt").write_bytes(FILE_TEXT)
    grant_id = env.grant(APP, f"{LOCAL}:docs")
    args = ["mount", env.mnt]
    if supports_lenient_scopes():
        args += ["--scopes", "strict"]
    if budget is not None:
        assert "--scope-budget" in subcommand_help("mount"), "mount has no --scope-budget (SPEC S10)"
        args += ["--scope-budget", str(budget)]
    monkeypatch.setattr(env, "mount_args", lambda *a, **k: list(args))
    env.mount()
    world = World(
        env=env,
        file=env.prov(APP, LOCAL, "docs/file.txt"),
        documents=env.container(APP, "Documents"),
        note=env.container(APP, "Documents/note.txt"),
        invisible=env.prov(APP, LOCAL, "photos/p.jpg"),
        grant_id=grant_id,
    )
    # A file in the container, written by the app itself (no scope needed).
    p = world.run(["sh", "-c", 'printf "%s" "$1" > "$2"', "sh", NOTE_TEXT.decode(), world.note])
    assert p.returncode == 0, "writing the container note failed\n" + describe(p)
    return world


@pytest.fixture
def world(env, monkeypatch) -> World:
    return make_world(env, monkeypatch)


@pytest.fixture
def budget_world(env, monkeypatch) -> World:
    return make_world(env, monkeypatch, budget=BUDGET)


def example_output(p: subprocess.CompletedProcess) -> dict[str, str]:
    """The examples print `key: value` lines; returns them as a dict."""
    out: dict[str, str] = {}
    for line in p.stdout.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            assert key not in out, f"duplicate line {key!r}\n" + describe(p)
            out[key] = value
    return out


# ---------------------------------------------------------------------------
# the examples, as app processes


def test_example_reads_granted_file_only_in_scope(client, world):
    """SPEC S6-S9, S31: strict mode. Before start the read fails with EPERM
    and the count is 0; after start the read works and the count is 1; after
    stop the count is 0 again."""
    lang, argv = client.lang, client.example
    p = world.run(argv + [world.file])
    assert p.returncode == 0, f"{lang} example failed\n" + describe(p)
    assert example_output(p) == {
        "path": world.file,
        "scope count before": "0",
        "read before start": "EPERM",
        "start accessing": "true",
        "scope count during": "1",
        "first line": FILE_TEXT.decode().splitlines()[0],
        "stop accessing": "done",
        "scope count after": "0",
    }, f"{lang} example\n" + describe(p)


def test_example_container_needs_no_scope(client, world):
    """SPEC S9: a container path needs no scope: start returns not-needed
    (false / 0 / False), the count is "not-needed", reads work without a
    start, and no stop is made. Both the Documents folder and a file in it."""
    lang, argv = client.lang, client.example
    p = world.run(argv + [world.documents])
    assert p.returncode == 0, f"{lang} example failed on Container/Documents\n" + describe(p)
    assert example_output(p) == {
        "path": world.documents,
        "scope count before": "not-needed",
        "read before start": "ok",
        "start accessing": "false",
        "scope count during": "not-needed",
        "first entry": "note.txt",
        "scope count after": "not-needed",
    }, f"{lang} example\n" + describe(p)

    p = world.run(argv + [world.note])
    assert p.returncode == 0, f"{lang} example failed on a container file\n" + describe(p)
    out = example_output(p)
    assert (out["start accessing"], out["first line"], out["scope count after"]) == (
        "false",
        NOTE_TEXT.decode().splitlines()[0],
        "not-needed",
    ), describe(p)


# ---------------------------------------------------------------------------
# the libraries' calls, per language

PY_BASIC = """
import scopefs

file, documents, invisible = sys.argv[1:4]

def err(fn, *a):
    try:
        return {"ok": fn(*a)}
    except OSError as exc:
        return {"errno": ename(exc), "type": type(exc).__name__,
                "PermissionError": isinstance(exc, PermissionError)}

class Marker(Exception):
    pass

r = {}
r["count0"] = scopefs.scope_count(file)
r["read0"] = attempt(read_bytes, file)
r["starts"] = [scopefs.start_accessing(file), scopefs.start_accessing(file)]
r["count2"] = scopefs.scope_count(file)
r["read2"] = attempt(read_bytes, file)
r["stops"] = [scopefs.stop_accessing(file), scopefs.stop_accessing(file)]
r["count_after"] = scopefs.scope_count(file)
r["read_after"] = attempt(read_bytes, file)
r["unbalanced"] = err(scopefs.stop_accessing, file)
r["count_unbalanced"] = scopefs.scope_count(file)

with scopefs.accessing(file) as counted:
    r["with_counted"] = counted
    r["with_inside"] = [scopefs.scope_count(file), attempt(read_bytes, file)]
r["with_after"] = scopefs.scope_count(file)
try:
    with scopefs.accessing(file):
        r["with_raise_inside"] = scopefs.scope_count(file)
        raise Marker()
except Marker:
    r["with_raised"] = "Marker"
r["with_raise_after"] = scopefs.scope_count(file)

r["container_start"] = scopefs.start_accessing(documents)
r["container_count"] = scopefs.scope_count(documents)
r["container_stop"] = err(scopefs.stop_accessing, documents)
with scopefs.accessing(documents) as counted:
    r["container_with"] = counted

r["invisible_start"] = err(scopefs.start_accessing, invisible)
r["invisible_count"] = err(scopefs.scope_count, invisible)
r["pathlike"] = [scopefs.scope_count(__import__("pathlib").Path(file)), scopefs.scope_count(os.fsencode(file))]
emit(r)
"""

C_PRELUDE = """
import ctypes
lib = ctypes.CDLL(sys.argv[1], use_errno=True)
lib.scopefs_start_accessing.argtypes = [ctypes.c_char_p]
lib.scopefs_stop_accessing.argtypes = [ctypes.c_char_p]
lib.scopefs_scope_count.argtypes = [ctypes.c_char_p]
lib.scopefs_scope_count.restype = ctypes.c_long

def c(name, path):
    ctypes.set_errno(0)
    rc = getattr(lib, "scopefs_" + name)(None if path is None else path.encode())
    return [rc, errno.errorcode.get(ctypes.get_errno(), 0)] if rc == -1 else rc
"""

C_BASIC = (
    C_PRELUDE
    + """
file, documents, invisible = sys.argv[2:5]
r = {}
r["count0"] = c("scope_count", file)
r["read0"] = attempt(read_bytes, file)
r["starts"] = [c("start_accessing", file), c("start_accessing", file)]
r["count2"] = c("scope_count", file)
r["read2"] = attempt(read_bytes, file)
r["stops"] = [c("stop_accessing", file), c("stop_accessing", file)]
r["count_after"] = c("scope_count", file)
r["read_after"] = attempt(read_bytes, file)
r["unbalanced"] = c("stop_accessing", file)
r["count_unbalanced"] = c("scope_count", file)
r["container"] = [c("start_accessing", documents), c("scope_count", documents),
                  c("stop_accessing", documents)]
r["invisible"] = [c("start_accessing", invisible), c("stop_accessing", invisible),
                  c("scope_count", invisible)]
r["null"] = [c("start_accessing", None), c("stop_accessing", None), c("scope_count", None)]
emit(r)
"""
)


def test_python_module_calls(world):
    """SPEC S6-S9, S12: start/stop nest and balance, an extra stop is not an
    error, the context manager stops on every exit path, container paths
    are not-needed (False / None), invisible paths raise FileNotFoundError."""
    r = world.snippet_json(PY_BASIC, world.file, world.documents, world.invisible)
    assert (r["count0"], r["read0"]) == (0, "EPERM")
    assert (r["starts"], r["count2"], r["read2"]) == ([True, True], 2, "OK")
    assert (r["stops"], r["count_after"], r["read_after"]) == ([None, None], 0, "EPERM")
    assert (r["unbalanced"], r["count_unbalanced"]) == ({"ok": None}, 0)
    assert (r["with_counted"], r["with_inside"], r["with_after"]) == (True, [1, "OK"], 0)
    assert (r["with_raise_inside"], r["with_raised"], r["with_raise_after"]) == (1, "Marker", 0)
    assert (r["container_start"], r["container_count"], r["container_stop"], r["container_with"]) == (
        False,
        None,
        {"ok": None},
        False,
    )
    assert r["invisible_start"] == {"errno": "ENOENT", "type": "FileNotFoundError", "PermissionError": False}
    assert r["invisible_count"]["errno"] == "ENOENT"
    assert r["pathlike"] == [0, 0]


def test_c_library_calls(c_build, world):
    """SPEC S6-S9, S12 through libscopefs.so: 1 counted / 0 not needed /
    -1 + errno; stop 0; scope count >= 0, -2 not needed, -1 + errno."""
    r = world.snippet_json(C_BASIC, c_build / "libscopefs.so", world.file, world.documents, world.invisible)
    assert (r["count0"], r["read0"]) == (0, "EPERM")
    assert (r["starts"], r["count2"], r["read2"]) == ([1, 1], 2, "OK")
    assert (r["stops"], r["count_after"], r["read_after"]) == ([0, 0], 0, "EPERM")
    assert (r["unbalanced"], r["count_unbalanced"]) == (0, 0)
    assert r["container"] == [0, -2, 0]
    assert r["invisible"] == [[-1, "ENOENT"]] * 3
    assert r["null"] == [[-1, "EINVAL"]] * 3


def test_swift_library_calls(swift_check, world):
    """SPEC S6-S9, S12, S31 through ScopeFSClient: the throwing API with its
    typed error, Apple's Bool-returning names, `scopeCount`, and
    `withSecurityScopedAccess` stopping after a return and after a throw."""
    p = world.run([swift_check, "basic", world.file, world.documents, world.invisible])
    assert p.returncode == 0, describe(p)
    r = last_json_line(p)
    assert r == {
        "count0": "0",
        "read0": "false",
        "start1": "started 1",
        "start2": "started 2",
        "count2": "2",
        "property2": "2",
        "stop1": "stopped 1",
        "stop0": "stopped 0",
        "stopExtra": "unbalanced",
        "appleStart": "true",
        "appleCount": "1",
        "appleRead": "true",
        "appleCountAfter": "0",
        "appleReadAfter": "false",
        "withValue": "1 true",
        "withAfter": "0",
        "withInside": "1",
        "withThrow": "Marker",
        "withThrowAfter": "0",
        "containerStart": "not-needed",
        "containerApple": "false",
        "containerProperty": "nil",
        "containerStop": "not-needed",
        "containerWith": "ran",
        "invisibleStart": "error notVisible ENOENT",
        "invisibleApple": "false",
        "invisibleProperty": "nil",
        "invisibleWith": "error notVisible ENOENT",
        "httpStart": "error other EINVAL",
    }, describe(p)


# ---------------------------------------------------------------------------
# errors: revoked grant (EPERM), a caller that is no app process (EPERM),
# the start budget (EDQUOT)

PY_DENIED = """
import scopefs
file = sys.argv[1]
r = {}
try:
    scopefs.start_accessing(file)
    r["start"] = "no error"
except scopefs.ScopeDenied as exc:
    r["start"] = ["ScopeDenied", isinstance(exc, PermissionError), ename(exc), exc.filename == file]
try:
    with scopefs.accessing(file):
        r["accessing"] = "body ran"
except scopefs.ScopeDenied:
    r["accessing"] = "ScopeDenied"
emit(r)
"""

PY_BUDGET = """
import scopefs
file = sys.argv[1]
n = 0
while n < 100000:
    try:
        scopefs.start_accessing(file)
    except scopefs.BudgetExhausted as exc:
        failure = [type(exc).__name__, isinstance(exc, OSError), ename(exc)]
        break
    n += 1
scopefs.stop_accessing(file)
try:
    scopefs.start_accessing(file)
    again = "started"
except scopefs.BudgetExhausted:
    again = "BudgetExhausted"
emit({"successes": n, "failure": failure, "after_stop": again, "count": scopefs.scope_count(file)})
"""

C_BUDGET = (
    C_PRELUDE
    + """
file = sys.argv[2]
n = 0
while n < 100000:
    rc = c("start_accessing", file)
    if rc != 1:
        failure = rc
        break
    n += 1
emit({"successes": n, "failure": failure, "stop": c("stop_accessing", file),
      "after_stop": c("start_accessing", file)})
"""
)


def test_revoked_grant_denies_start(client, world):
    """SPEC S6, S14: after revoke, start fails with EPERM: ScopeDenied (a
    PermissionError) in Python, -1/EPERM in C, ScopeFSError.denied in Swift;
    the scoped helpers do not run their body, and the example exits 1.
    (What stop and the scope query answer on a revoked grant is the daemon's
    business: docs/API.md lists EPERM for "revoked" without saying which
    calls; the daemon answers them without error, with counter 0.)"""
    lang = client.lang
    world.env.revoke(APP, world.grant_id)
    if lang == "python":
        assert world.snippet_json(PY_DENIED, world.file) == {
            "start": ["ScopeDenied", True, "EPERM", True],
            "accessing": "ScopeDenied",
        }
    elif lang == "c":
        r = world.snippet_json(
            C_PRELUDE
            + """
emit(c("start_accessing", sys.argv[2]))
""",
            client.lib,
            world.file,
        )
        assert r == [-1, "EPERM"]
    else:
        p = world.run([client.check, "denied", world.file])
        assert p.returncode == 0, describe(p)
        assert last_json_line(p) == {"start": "error denied EPERM", "apple": "false", "with": "error denied EPERM"}
    p = world.run(client.example + [world.file])
    out = example_output(p)
    if lang == "swift":
        # Apple's Bool API: start returns false, the read then shows EPERM.
        assert p.returncode == 1, describe(p)
        assert (out["start accessing"], out["first line"]) == ("false", "error EPERM"), describe(p)
    else:
        assert p.returncode == 1, describe(p)
        assert out["start accessing"] == "error EPERM", describe(p)


def test_non_app_process_is_denied(world):
    """docs/API.md: a caller that is not an app process gets EPERM on start
    (the mount owner's inspect view, SPEC S4, needs no scope and gets none)."""
    r = world.env.host_json(
        f"sys.path.insert(0, {str(PYTHON_CLIENT_DIR)!r})\n"
        + """
import scopefs
try:
    scopefs.start_accessing(sys.argv[1])
    emit("started")
except OSError as exc:
    emit([type(exc).__name__, ename(exc)])
""",
        world.file,
    )
    assert r == ["ScopeDenied", "EPERM"]


def test_budget_exhausted(client, budget_world):
    """SPEC S10: after BUDGET outstanding starts, start fails with EDQUOT
    (BudgetExhausted / -1 EDQUOT / ScopeFSError.budgetExhausted) and stays so
    after a stop until the process exits; a fresh process has a full budget."""
    w, lang = budget_world, client.lang
    for _ in range(2):  # the second process starts with a full budget again
        if lang == "python":
            assert w.snippet_json(PY_BUDGET, w.file) == {
                "successes": BUDGET,
                "failure": ["BudgetExhausted", True, "EDQUOT"],
                "after_stop": "BudgetExhausted",
                "count": BUDGET - 1,
            }
        elif lang == "c":
            assert w.snippet_json(C_BUDGET, client.lib, w.file) == {
                "successes": BUDGET,
                "failure": [-1, "EDQUOT"],
                "stop": 0,
                "after_stop": [-1, "EDQUOT"],
            }
        else:
            p = w.run([client.check, "budget", w.file])
            assert p.returncode == 0, describe(p)
            assert last_json_line(p) == {
                "successes": str(BUDGET),
                "failure": "budgetExhausted EDQUOT",
                "apple": "false",
                "stop": f"stopped {BUDGET - 1}",
                "afterStop": "error budgetExhausted EDQUOT",
            }


# ---------------------------------------------------------------------------
# bookmarks (SPEC S25-S27)

PY_BOOKMARK_CREATE = """
import scopefs
def make(path, read_only=False):
    try:
        return scopefs.bookmark_data(path, read_only=read_only)
    except OSError as exc:
        return "error " + ename(exc)
emit({"rw": make(sys.argv[1]), "ro": make(sys.argv[1], True), "container": make(sys.argv[2])})
"""

PY_BOOKMARK_RESOLVE = """
import scopefs
out = []
for token in sys.argv[1:]:
    try:
        found = scopefs.resolve_bookmark(token)
        out.append({"path": found.path, "stale": found.is_stale, "access": found.access})
    except (scopefs.InvalidBookmark, scopefs.ScopeDenied, FileNotFoundError) as exc:
        out.append({"error": ename(exc)})
emit(out)
"""

C_BOOKMARK_CREATE = (
    C_PRELUDE
    + """
lib.scopefs_bookmark_create.restype = ctypes.c_void_p
lib.scopefs_bookmark_create.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc = ctypes.CDLL(None)
def make(path, read_only=0):
    ctypes.set_errno(0)
    p = lib.scopefs_bookmark_create(path.encode(), read_only)
    if not p:
        return "error " + errno.errorcode[ctypes.get_errno()]
    token = ctypes.string_at(p).decode()
    libc.free(ctypes.c_void_p(p))
    return token
emit({"rw": make(sys.argv[2]), "ro": make(sys.argv[2], 1), "container": make(sys.argv[3])})
"""
)

C_BOOKMARK_RESOLVE = (
    C_PRELUDE
    + """
lib.scopefs_bookmark_resolve.restype = ctypes.c_void_p
lib.scopefs_bookmark_resolve.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
libc = ctypes.CDLL(None)
out = []
for token in sys.argv[2:]:
    stale = ctypes.c_int(-1)
    ctypes.set_errno(0)
    p = lib.scopefs_bookmark_resolve(token.encode(), None, ctypes.byref(stale))
    if not p:
        out.append({"error": errno.errorcode[ctypes.get_errno()]})
        continue
    out.append({"path": ctypes.string_at(p).decode(), "stale": bool(stale.value)})
    libc.free(ctypes.c_void_p(p))
emit(out)
"""
)


def bookmark_create(world: World, client: Client, path: str, container: str) -> dict:
    """{"rw": token, "ro": token, "container": "error ERRNO"} in the client's language."""
    if client.lang == "python":
        return world.snippet_json(PY_BOOKMARK_CREATE, path, container)
    if client.lang == "c":
        return world.snippet_json(C_BOOKMARK_CREATE, client.lib, path, container)
    p = world.run([client.check, "bookmark-create", path, container])
    assert p.returncode == 0, describe(p)
    made = last_json_line(p)
    assert made.pop("typed") == "same", "ScopeFS.bookmark(for:) differs from bookmarkData(options:)"
    return made


def bookmark_resolve(world: World, client: Client, *tokens: str) -> list[dict]:
    """Each token resolved in a fresh app process of the client's language:
    {"path", "stale"[, "access"]} or {"error": ERRNO}. C has no access."""
    if client.lang == "python":
        return world.snippet_json(PY_BOOKMARK_RESOLVE, *tokens)
    if client.lang == "c":
        return world.snippet_json(C_BOOKMARK_RESOLVE, client.lib, *tokens)
    p = world.run([client.check, "bookmark-resolve", *tokens])
    assert p.returncode == 0, describe(p)
    out = []
    for line in last_json_line(p)["results"].split("\n"):
        if line.startswith("error "):
            out.append({"error": line.split(" ", 1)[1]})
        else:
            path, stale, access = line.rsplit(" ", 2)
            out.append({"path": path, "stale": stale == "true", "access": access})
    return out


def _found(path: str, stale: bool, access: str, lang: str) -> dict:
    return {"path": path, "stale": stale} | ({} if lang == "c" else {"access": access})


def _tamper(token: str) -> str:
    """Change one payload character (every bit of it is significant)."""
    i = 5
    return token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1 :]


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_bookmarks(client, world):
    """SPEC S25-S27 through each library: read-write and read-only bookmarks
    of a granted item; none for a container path (EINVAL); resolution gives
    the current path and isStale (false, then true after a rename); a
    tampered or foreign token is invalid (EBADMSG); a deleted item is ENOENT;
    a revoked grant is EPERM."""
    env, lang = world.env, client.lang
    (env.backing(LOCAL) / "docs" / "other.txt").write_bytes(b"other\n")
    other = env.prov(APP, LOCAL, "docs/other.txt")

    made = bookmark_create(world, client, world.file, world.documents)
    assert made["container"] == "error EINVAL", made
    rw, ro = made["rw"], made["ro"]
    assert rw and ro and rw != ro and not rw.startswith("error") and not ro.startswith("error"), made
    assert rw.isascii() and ro.isascii()
    other_token = bookmark_create(world, client, other, world.documents)["rw"]

    assert bookmark_resolve(world, client, rw, ro, _tamper(rw), "not-a-bookmark") == [
        _found(world.file, False, "read-write", lang),
        _found(world.file, False, "read", lang),
        {"error": "EBADMSG"},
        {"error": "EBADMSG"},
    ]

    (env.backing(LOCAL) / "docs" / "file.txt").rename(env.backing(LOCAL) / "docs" / "renamed.txt")
    renamed = env.prov(APP, LOCAL, "docs/renamed.txt")
    assert bookmark_resolve(world, client, rw) == [_found(renamed, True, "read-write", lang)]

    (env.backing(LOCAL) / "docs" / "renamed.txt").unlink()
    assert bookmark_resolve(world, client, rw) == [{"error": "ENOENT"}]

    env.revoke(APP, world.grant_id)
    assert bookmark_resolve(world, client, other_token) == [{"error": "EPERM"}]


PY_ERROR_KINDS = """
import scopefs
def kind(call):
    try:
        call()
        return "no error"
    except OSError as exc:
        return type(exc).__name__ + " " + ename(exc)
emit({"noDaemon": kind(lambda: scopefs.resolve_bookmark(sys.argv[1], state_dir=sys.argv[2])),
      "deleted": kind(lambda: scopefs.resolve_bookmark(sys.argv[1])),
      "outsideMount": kind(lambda: scopefs.start_accessing(sys.argv[3]))})
"""

C_NO_DAEMON = (
    C_PRELUDE
    + """
lib.scopefs_bookmark_resolve.restype = ctypes.c_void_p
lib.scopefs_bookmark_resolve.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
stale = ctypes.c_int(-1)
def resolve(state):
    ctypes.set_errno(0)
    p = lib.scopefs_bookmark_resolve(sys.argv[2].encode(), state, ctypes.byref(stale))
    return "no error" if p else errno.errorcode[ctypes.get_errno()]
emit({"noDaemon": resolve(sys.argv[3].encode()), "deleted": resolve(None)})
"""
)


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_clients_tell_no_daemon_from_a_deleted_item(world, c_build, tmp_path):
    """Issue 19, SPEC S26, S31: "no daemon" and "the item was deleted" were
    the same FileNotFoundError (Python) and ENOENT (C). Python raises
    NoDaemon, ItemDeleted and NotInsideMount; C sets ECONNREFUSED for no
    daemon and ENOENT for a deleted item."""
    env = world.env
    token = world.snippet_json(PY_BOOKMARK_CREATE, world.file, world.documents)["rw"]
    (env.backing(LOCAL) / "docs" / "file.txt").unlink()
    no_daemon = tmp_path / "no-daemon-state"
    no_daemon.mkdir()
    outside = tmp_path / "plain.txt"
    outside.write_text("not in a mount")
    got = world.snippet_json(PY_ERROR_KINDS, token, no_daemon, outside)
    assert got == {
        "noDaemon": "NoDaemon ECONNREFUSED",
        "deleted": "ItemDeleted ENOENT",
        "outsideMount": "NotInsideMount ENODATA",
    }, got
    got = world.snippet_json(C_NO_DAEMON, c_build / "libscopefs.so", token, no_daemon)
    assert got == {"noDaemon": "ECONNREFUSED", "deleted": "ENOENT"}, got


# ---------------------------------------------------------------------------
# the C library's packaging


def test_c_library_install_and_header(tmp_path, c_build):
    """clients/c/Makefile: `install` puts lib and header under PREFIX; the
    header compiles as C99 and as C++; only the API's functions are exported."""
    dest = tmp_path / "dest"
    p = run_bounded(
        ["make", "-C", C_CLIENT_DIR, f"BUILD={c_build}", f"DESTDIR={dest}", "PREFIX=/usr/local", "install"],
        BUILD_TIMEOUT,
        _build_env(),
        what="make install",
    )
    assert p.returncode == 0, describe(p)
    assert (dest / "usr/local/lib/libscopefs.so").is_file()
    assert (dest / "usr/local/include/scopefs.h").read_bytes() == (C_CLIENT_DIR / "include/scopefs.h").read_bytes()
    nm = run_bounded(["nm", "-D", "--defined-only", c_build / "libscopefs.so"], 30, _build_env())
    exported = sorted(line.split()[-1] for line in nm.stdout.splitlines() if " T " in line)
    assert exported == [
        "scopefs_bookmark_create",
        "scopefs_bookmark_resolve",
        "scopefs_coordinate",
        "scopefs_free_paths",
        "scopefs_pick",
        "scopefs_pick_items",
        "scopefs_promised_item_values",
        "scopefs_promised_values_free",
        "scopefs_query",
        "scopefs_reference_attribute",
        "scopefs_release",
        "scopefs_scope_count",
        "scopefs_set_thumbnail",
        "scopefs_start_accessing",
        "scopefs_stop_accessing",
        "scopefs_thumbnail",
        "scopefs_watch",
    ]
    src = tmp_path / "use.c"
    src.write_text('#include <scopefs.h>\nint main(void) { return scopefs_scope_count("/") == -2; }\n')
    compilers = [(os.environ.get("CC", "cc"), "c", "-std=c99")]
    if shutil.which("c++"):
        compilers.append(("c++", "c++", "-std=c++11"))
    for compiler, lang, std in compilers:
        q = run_bounded(
            [
                compiler,
                "-x",
                lang,
                std,
                "-Wall",
                "-Wextra",
                "-Werror",
                "-pedantic",
                f"-I{dest}/usr/local/include",
                "-o",
                tmp_path / f"use-{lang}",
                src,
                f"-L{dest}/usr/local/lib",
                "-lscopefs",
            ],
            BUILD_TIMEOUT,
            _build_env(),
        )
        assert q.returncode == 0, describe(q)


def test_python_reference_info(world):
    """SPEC S22-S24, S31: the Python module reads a reference document's item
    metadata through the reference (followed to its item); outside provider
    views there is none (ENODATA)."""
    world.env.cli("open", APP, f"{LOCAL}:docs/file.txt")
    reference = world.env.container(APP, "Documents/file.txt")
    r = world.snippet_json(
        "import scopefs, errno\n"
        "info = scopefs.reference_info(sys.argv[1])\n"
        "try:\n"
        "    scopefs.reference_info(sys.argv[2]); outside = 'none'\n"
        "except OSError as e:\n"
        "    outside = errno.errorcode[e.errno]\n"
        "emit({'provider': info.provider, 'name': info.provider_name, 'path': info.path,\n"
        "      'state': info.grant_state, 'item': len(info.item), 'outside': outside})",
        reference,
        world.note,
    )
    assert r == {
        "provider": LOCAL,
        "name": r["name"],
        "path": "docs/file.txt",
        "state": "active",
        "item": 36,
        "outside": "ENODATA",
    }
    assert r["name"]


# ---------------------------------------------------------------------------
# the Swift client as a package of its own (issue 19)

SWIFT_CLIENT_PACKAGE = CLIENTS / "swift"


def test_swift_client_is_one_standalone_package():
    """Issue 19: the Swift client is its own package in clients/swift (no
    unsafe flags, which SwiftPM refuses in a versioned dependency), the
    main package builds the same sources (one copy), and neither
    Package.resolved nor .build is in git."""
    manifest = (SWIFT_CLIENT_PACKAGE / "Package.swift").read_text()
    assert "unsafeFlags" not in manifest, manifest
    assert '.library(name: "ScopeFSClient"' in manifest, manifest
    assert (SWIFT_CLIENT_PACKAGE / "Sources" / "ScopeFSClient" / "ScopeFS.swift").is_file()
    assert (
        "clients/swift" in (SWIFT_CLIENT_PACKAGE / "README.md").read_text()
        and ".package(url:" in (SWIFT_CLIENT_PACKAGE / "README.md").read_text()
    )
    main = (REPO_ROOT / "Package.swift").read_text()
    assert 'path: "clients/swift/Sources/ScopeFSClient"' in main, "the main package must build clients/swift's sources"
    assert not (REPO_ROOT / "Sources" / "ScopeFSClient").exists(), "a second copy of the client's sources"
    check = (Path(__file__).resolve().parent / "clients_swift" / "Package.swift").read_text()
    assert '.package(path: "../../../clients/swift")' in check, check
    tracked = subprocess.run(["git", "-C", REPO_ROOT, "ls-files"], capture_output=True, text=True, check=True).stdout
    assert not [
        f for f in tracked.splitlines() if f.endswith("Package.resolved") or "/.build/" in f or f.startswith(".build/")
    ], "Package.resolved or .build in git"


def test_swift_client_resolves_by_url_and_version(tmp_path):
    """Issue 19: an app depends on the client by URL and version tag. The
    client package is published as a repository of its own
    (clients/swift/README.md); here a local git repository with its files
    and the tag of this version stands in for it, and a package that
    depends on it with `.package(url:from:)` resolves the tag and builds."""
    swift = _swift()
    if not swift:
        pytest.skip("no `swift` on PATH (set SWIFT=/path/to/swift)")
    version = subprocess.run(
        ["make", "-s", "-C", REPO_ROOT, "version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    published = tmp_path / "scopefs-swift"
    shutil.copytree(SWIFT_CLIENT_PACKAGE, published, ignore=shutil.ignore_patterns(".build", "Package.resolved"))
    git = ["git", "-C", published, "-c", "user.name=test", "-c", "user.email=test@example.org"]
    for argv in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "client"], ["tag", version]):
        subprocess.run([*git, *argv], check=True, capture_output=True)
    app = tmp_path / "app"
    (app / "Sources" / "App").mkdir(parents=True)
    (app / "Package.swift").write_text(f"""// swift-tools-version: 6.0
import PackageDescription
let package = Package(
    name: "App",
    dependencies: [.package(url: "file://{published}", from: "{version}")],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "ScopeFSClient", package: "scopefs-swift")])]
)
""")
    (app / "Sources" / "App" / "main.swift").write_text(
        "import Foundation\nimport ScopeFSClient\n"
        'print(URL(fileURLWithPath: "/nowhere").startAccessingSecurityScopedResource())\n'
    )
    p = run_bounded(
        [swift, "build", "--package-path", app, "--scratch-path", tmp_path / "build"],
        SWIFT_BUILD_TIMEOUT,
        _build_env(),
        what="swift build of a package depending on the client by URL",
    )
    assert p.returncode == 0, describe(p)
    resolved = (app / "Package.resolved").read_text()
    assert f'"version" : "{version}"' in resolved, resolved
    out = run_bounded([tmp_path / "build" / "debug" / "App"], BUILD_TIMEOUT, _build_env(), what="the app")
    assert out.returncode == 0 and out.stdout.strip() == "false", describe(out)
