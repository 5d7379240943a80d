"""Names and paths are bytes, as Linux has them (SPEC S33a): a name that is
not UTF-8 can be granted from the command line, listed, opened, created,
renamed and removed through the mount with the same bytes on the host, is
listed by the picker, and is shown escaped in text and losslessly in JSON.
Two names that Unicode deems canonically equivalent are two files, and a
grant of one gives nothing of the other (SPEC S33). One odd mountpoint
anywhere on the machine does not break mount detection (SPEC S34).

Paths go to app snippets hex-encoded, so that what is tested is the file
system, not how an argument travels through `scopefs run`."""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
import time

import pytest
from scopefs_harness import ALPHA, DRIVE, LOCAL, describe, mount_count, mountinfo_entries

CAFE = b"caf\xe9.txt"  # Latin-1 "café.txt": not UTF-8
NEW = b"new\xff.txt"
CAFE_TEXT = b"latin-1 named\n"


def arg(raw: bytes) -> str:
    """A command-line argument with exactly these bytes (subprocess encodes
    str arguments with the file-system encoding and surrogateescape)."""
    return os.fsdecode(raw)


RUN_OPS = """
import binascii
def p(h): return binascii.unhexlify(h)
ops = json.loads(sys.argv[1])
start_accessing(*(p(h) for h in sys.argv[2:]))
out = []
for op in ops:
    kind, path = op[0], p(op[1])
    if kind == "read":
        out.append(outcome(lambda: read_bytes(path).hex()))
    elif kind == "list":
        out.append(outcome(lambda: sorted(n.hex() for n in os.listdir(path))))
    elif kind == "stat":
        out.append(outcome(lambda: os.stat(path).st_size))
    elif kind == "write":
        def write(data=p(op[2])):
            with open(path, "xb") as f:
                f.write(data)
            return "OK"
        out.append(outcome(write))
emit(out)
"""


def app_ops(env, app, *ops, scopes: tuple[bytes, ...] = ()):
    """Runs file operations in an app process: (kind, path bytes[, data
    bytes]), after starting to access each of `scopes` (SPEC S9)."""
    encoded = [[kind, *(part.hex() for part in parts)] for kind, *parts in ops]
    return env.app_json(app, RUN_OPS, json.dumps(encoded), *(path.hex() for path in scopes))


def privacy_rows(env):
    return json.loads(env.cli("privacy", ALPHA, "--json").stdout)


def test_grant_from_raw_argv_then_read_through_the_mount(env):
    """SPEC S33a: `scopefs grant APP drive:Reports/caf\\xe9.txt` with the raw
    bytes in argv grants that file; the app reads it through the mount; JSON
    output gives the bytes back, text output shows `\\xe9`."""
    reports = env.backing(DRIVE) / "Reports"
    reports.mkdir()
    with open(os.fsencode(reports) + b"/" + CAFE, "wb") as f:
        f.write(CAFE_TEXT)
    env.cli("grant", ALPHA, arg(b"drive:Reports/" + CAFE))
    rows = privacy_rows(env)
    paths = [
        os.fsencode(value) for row in rows for key, value in row.items() if isinstance(value, str) and "caf" in value
    ]
    assert paths and all(path.endswith(b"Reports/" + CAFE) for path in paths), rows
    text = env.cli("privacy", ALPHA).stdout
    assert "Reports/caf\\xe9.txt" in text, text

    env.mount()
    folder = os.fsencode(env.prov(ALPHA, DRIVE, "Reports"))
    got = app_ops(
        env,
        ALPHA,
        ("list", folder),
        ("read", folder + b"/" + CAFE),
        ("stat", folder + b"/" + CAFE),
        scopes=(folder + b"/" + CAFE,),
    )
    assert got == [{"ok": [CAFE.hex()]}, {"ok": CAFE_TEXT.hex()}, {"ok": len(CAFE_TEXT)}]


def test_create_through_the_mount_keeps_the_bytes(env):
    """SPEC S33a: a file created through the mount as `new\\xff.txt` has that
    exact name on the host, and is listed, read and removed under it."""
    reports = env.backing(DRIVE) / "Reports"
    reports.mkdir()
    env.grant(ALPHA, f"{DRIVE}:Reports")
    env.mount()
    folder = os.fsencode(env.prov(ALPHA, DRIVE, "Reports"))
    got = app_ops(
        env,
        ALPHA,
        ("write", folder + b"/" + NEW, b"made by the app\n"),
        ("list", folder),
        ("read", folder + b"/" + NEW),
        scopes=(folder,),
    )
    assert got == [{"ok": "OK"}, {"ok": [NEW.hex()]}, {"ok": b"made by the app\n".hex()}]
    assert os.listdir(os.fsencode(reports)) == [NEW]
    assert open(os.fsencode(reports) + b"/" + NEW, "rb").read() == b"made by the app\n"


def test_canonically_equivalent_names_are_two_files(env):
    """SPEC S33, S33a: "caf\\u00e9" (NFC) and "cafe\\u0301" (NFD) are two host
    files. A grant of the first must not reach the second through the
    mount: Swift's String equality would make them one."""
    nfc, nfd = "café.txt".encode(), "cafe\u0301.txt".encode()
    assert nfc != nfd
    folder = os.fsencode(env.backing(LOCAL) / "docs")
    for name, data in ((nfc, b"granted\n"), (nfd, b"not granted\n")):
        with open(folder + b"/" + name, "wb") as f:
            f.write(data)
    env.grant(ALPHA, arg(b"local:docs/" + nfc))
    env.mount()
    mount = os.fsencode(env.prov(ALPHA, LOCAL, "docs"))
    got = app_ops(
        env,
        ALPHA,
        ("read", mount + b"/" + nfc),
        ("read", mount + b"/" + nfd),
        ("stat", mount + b"/" + nfd),
        ("list", mount),
        scopes=(mount + b"/" + nfc,),
    )
    assert got == [{"ok": b"granted\n".hex()}, {"errno": "ENOENT"}, {"errno": "ENOENT"}, {"ok": [nfc.hex()]}]

    # The same for folders: a grant of one folder covers nothing of its twin.
    for name in ("Café".encode(), "Cafe\u0301".encode()):
        os.mkdir(folder + b"/" + name)
        with open(folder + b"/" + name + b"/inside.txt", "wb") as f:
            f.write(name)
    env.grant(ALPHA, arg(b"local:docs/" + "Café".encode()))
    twin = mount + b"/" + "Cafe\u0301".encode()
    got = app_ops(
        env,
        ALPHA,
        ("read", mount + b"/" + "Café".encode() + b"/inside.txt"),
        ("read", twin + b"/inside.txt"),
        ("list", twin),
        scopes=(mount + b"/" + "Café".encode(),),
    )
    assert got == [{"ok": "Café".encode().hex()}, {"errno": "ENOENT"}, {"errno": "ENOENT"}]


def random_names(count: int, seed: int) -> list[bytes]:
    """`count` distinct names that are not UTF-8 (each holds a lone 0xFF or
    0xC0..0xC1 or a cut sequence), plus the awkward cases: a real character
    in the range ScopeFS uses to hold stray bytes, canonically equivalent
    twins, a combining mark after nothing."""
    rng = random.Random(seed)
    alphabet = [b for b in range(1, 256) if b != 0x2F]
    names: set[bytes] = {
        b"\xf4\x8f\xbe\x80",
        b"\xf4\x8f\xbf\xbf\xff",
        b"\xf4\x8f\xbe",
        "é".encode() + b"\xe9",
        "cafe\u0301".encode() + b"\xff",
        "café".encode() + b"\xff",
        b"\xcc\x81\xff",
    }
    while len(names) < count:
        body = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
        spot = rng.randint(0, len(body))
        name = body[:spot] + bytes([rng.choice([0xFF, 0xC0, 0xC1, 0xE9, 0x80])]) + body[spot:]
        if name in (b".", b".."):
            continue
        try:
            name.decode("utf-8")
        except UnicodeDecodeError:
            names.add(name)
    return sorted(names)


ROUND_TRIP = """
import binascii
folder = binascii.unhexlify(sys.argv[1])
start_accessing(folder)
names = [binascii.unhexlify(h) for h in json.load(open(sys.argv[2]))]
problems = []
for name in names:
    with open(os.path.join(folder, name), "xb") as f:
        f.write(name)
listed = sorted(os.listdir(folder))
if listed != sorted(names):
    problems.append(["list", len(listed), len(names)])
for name in names:
    size = os.stat(os.path.join(folder, name)).st_size
    if size != len(name):
        problems.append(["stat", name.hex(), size])
for name in names:
    os.rename(os.path.join(folder, name), os.path.join(folder, b"R" + name))
for name in names:
    if read_bytes(os.path.join(folder, b"R" + name)) != name:
        problems.append(["read", name.hex()])
emit({"problems": problems[:20], "listed": len(listed)})
"""

DELETE_ALL = """
import binascii
folder = binascii.unhexlify(sys.argv[1])
start_accessing(folder)
for name in os.listdir(folder):
    os.unlink(os.path.join(folder, name))
emit({"left": len(os.listdir(folder))})
"""


@pytest.mark.scopefs_timeout(240)
def test_thousand_random_names_round_trip(env):
    """Done-when of issue 16: 1,000 random non-UTF-8 names round-trip
    through the mount (create, list, stat, rename, read, delete) with the
    same bytes on the host."""
    names = random_names(1000, seed=16)
    assert len(names) == 1000
    names_file = env.root / "names.json"
    names_file.write_text(json.dumps([name.hex() for name in names]))
    os.chmod(names_file, 0o644)
    env.grant(ALPHA, f"{LOCAL}:work")
    env.mount()
    folder = os.fsencode(env.prov(ALPHA, LOCAL, "work"))
    got = env.app_json(ALPHA, ROUND_TRIP, folder.hex(), names_file)
    assert got == {"problems": [], "listed": 1000}
    host = os.fsencode(env.backing(LOCAL) / "work")
    assert sorted(os.listdir(host)) == sorted(b"R" + name for name in names)
    for name in names[:50]:
        assert open(host + b"/R" + name, "rb").read() == name
    assert env.app_json(ALPHA, DELETE_ALL, folder.hex()) == {"left": 0}
    assert os.listdir(host) == []


@pytest.fixture
def odd_mountpoint():
    """A tmpfs mounted at a path that is not UTF-8, somewhere else on the
    machine; unmounted and removed afterwards."""
    parent = tempfile.mkdtemp(prefix="scopefs-odd-", dir="/tmp")
    path = os.fsencode(parent) + b"/odd-\xff\xfe"
    os.mkdir(path)
    result = subprocess.run(
        [b"mount", b"-t", b"tmpfs", b"-o", b"size=1m", b"scopefs-odd", path], capture_output=True, timeout=30
    )
    if result.returncode != 0:
        os.rmdir(path)
        os.rmdir(parent)
        pytest.fail(f"cannot mount a tmpfs for the test (needs root): {result.stderr!r}")
    try:
        yield path
    finally:
        subprocess.run([b"umount", path], capture_output=True, timeout=30)
        os.rmdir(path)
        os.rmdir(parent)


def test_odd_mountpoint_elsewhere_does_not_break_mount_detection(env, odd_mountpoint):
    """SPEC S33a, S34: with a mount elsewhere whose path is not UTF-8,
    `scopefs mount` on a mounted mountpoint refuses instead of stacking a
    second mount, `status` names the mount, and `scopefs unmount` unmounts."""
    assert any(os.fsencode(point) == odd_mountpoint for point, _ in mountinfo_entries())
    env.mount()
    again = env.cli(*env.mount_args(), expect=None)
    assert again.returncode != 0, "a second mount was stacked\n" + describe(again)
    assert "already" in again.stderr, describe(again)
    assert mount_count(env.mnt) == 1
    # Another state directory, the same mountpoint: refused as well.
    other = env.root / "other-state"
    env.cli("init", state=other)
    try:
        stacked = env.cli("mount", env.mnt, state=other, expect=None, timeout=20)
        assert stacked.returncode != 0 and mount_count(env.mnt) == 1, "a second mount was stacked\n" + describe(stacked)
        assert "already a mountpoint" in stacked.stderr, describe(stacked)
    finally:
        while mount_count(env.mnt) > 1:
            subprocess.run(["fusermount3", "-u", str(env.mnt)], capture_output=True, timeout=20)
    status = json.loads(env.cli("status", "--json").stdout)
    assert str(env.mnt) in json.dumps(status), status
    env.cli("unmount", env.mnt)
    assert mount_count(env.mnt) == 0
    env.mounted = False


APP = "com.example.editor"


def test_picker_lists_and_opens_a_name_that_is_not_utf8(tmp_path):
    """SPEC S21, S33a: the picker lists `caf\\xe9.txt` (escaped on screen),
    and opening it grants that file and writes a reference with its name."""
    pexpect = pytest.importorskip("pexpect", reason="python3 -m pip install pexpect")
    from picker_terminal import RIGHT, Picker, grant_path, grants, scopefs

    state, provider = tmp_path / "S", tmp_path / "P"
    provider.mkdir()
    with open(os.fsencode(provider) + b"/" + CAFE, "wb") as f:
        f.write(CAFE_TEXT)
    (provider / "plain.txt").write_text("plain\n")
    scopefs(state, "init")
    scopefs(state, "provider", "add", "local", str(provider))
    scopefs(state, "app", "add", APP)

    picker = Picker(state)
    picker.wait_text("local/")
    picker.send(RIGHT)
    picker.wait_for(lambda s: "plain.txt" in s.names(), "local's root")
    assert picker.screen.names() == ["caf\\xe9.txt", "plain.txt"], picker.screen.dump()
    picker.highlight("caf\\xe9.txt")
    picker.send("\r")
    picker.wait_text("Open caf\\xe9.txt for com.example.editor? [y/N]")
    picker.send("y")
    printed = picker.finish()
    assert picker.status == 0, printed
    assert [os.fsencode(grant_path(g)) for g in grants(state)] == [CAFE]
    documents = os.fsencode(state / "containers" / APP / "Documents")
    assert os.listdir(documents) == [CAFE]
    del pexpect


READLINK_AND_READ = """
import binascii
path = binascii.unhexlify(sys.argv[1])
start_accessing(path)  # the reference's item: setxattr follows the link
emit({"target": outcome(lambda: os.readlink(path).hex()), "data": outcome(lambda: read_bytes(path).hex())})
"""


def test_documents_keep_names_that_are_not_utf8(env):
    """SPEC S17-S20, S23, S28, S33a: open, import, export and query keep a
    name's bytes; the reference's link target through the mount names the
    item with them."""
    docs = os.fsencode(env.backing(LOCAL) / "docs")
    with open(docs + b"/" + CAFE, "wb") as f:
        f.write(CAFE_TEXT)
    env.cli("open", ALPHA, arg(b"local:docs/" + CAFE))
    container = os.fsencode(env.state / "containers" / ALPHA)
    assert os.listdir(container + b"/Documents") == [CAFE]

    imported = env.cli("import", ALPHA, arg(b"local:docs/" + CAFE)).stdout.strip()
    assert imported == f"Container/tmp/{ALPHA}-Inbox/caf\\xe9.txt", imported  # text output: escaped
    assert open(container + b"/tmp/" + ALPHA.encode() + b"-Inbox/" + CAFE, "rb").read() == CAFE_TEXT

    with open(container + b"/Documents/note\xff.txt", "wb") as f:
        f.write(b"note\n")
    env.cli("export", ALPHA, arg(b"Documents/note\xff.txt"), f"{LOCAL}:work")
    assert os.listdir(os.fsencode(env.backing(LOCAL) / "work")) == [b"note\xff.txt"]

    rows = json.loads(env.cli("query", "--app", ALPHA, "--json").stdout)
    urls = sorted(os.fsencode(row["urlInLocalContainer"]).rsplit(b"/", 1)[-1] for row in rows)
    assert CAFE in urls and b"note\xff.txt" in urls, rows

    env.mount()
    reference = os.fsencode(env.container(ALPHA, "Documents")) + b"/" + CAFE
    got = env.app_json(ALPHA, READLINK_AND_READ, reference.hex())
    assert bytes.fromhex(got["target"]["ok"]).endswith(b"/docs/" + CAFE), got
    assert got["data"] == {"ok": CAFE_TEXT.hex()}


# ---------------------------------------------------------------------------
# Paths on the control socket and through `scopefs run` (issue 16: "bytes
# end to end"; SPEC S33a). A path in a daemon's answer carries a byte that
# is not UTF-8 as `\udcXX` (docs/API.md "Paths are bytes"): each client
# library must hand the app a path that opens the exact file.

from client_builds import c_build, swift_check  # noqa: E402,F401  (fixtures: the C library, the Swift check app)
from pick_agent import Agent  # noqa: E402

PYTHON_CLIENT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "clients", "python"
)
LANGS = ["python", "c", "swift"]

# Each snippet ends with open_exact(path bytes): starts accessing (the grant
# is security-scoped, SPEC S6) and reads the file at exactly those bytes.
OPEN_EXACT = """
import ctypes, scopefs
def open_exact(path):
    started = outcome(lambda: scopefs.start_accessing(path))
    return {"path": path.hex(), "data": outcome(lambda: read_bytes(path).hex()), "started": started}
def c_lib():
    lib = ctypes.CDLL(sys.argv[1], use_errno=True)
    lib.scopefs_bookmark_resolve.restype = ctypes.c_void_p
    lib.scopefs_bookmark_resolve.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
    lib.scopefs_pick.restype = ctypes.POINTER(ctypes.c_void_p)
    lib.scopefs_pick.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_char_p]
    lib.scopefs_free_paths.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    return lib
"""

PY_RESOLVE = (
    OPEN_EXACT
    + """
found = scopefs.resolve_bookmark(sys.argv[1])
emit(open_exact(os.fsencode(found.path)))
"""
)

C_RESOLVE = (
    OPEN_EXACT
    + """
lib = c_lib()
p = lib.scopefs_bookmark_resolve(sys.argv[2].encode(), None, None)
emit(open_exact(ctypes.string_at(p)) if p else {"error": errno.errorcode[ctypes.get_errno()]})
"""
)

PY_PICK_EXACT = (
    OPEN_EXACT
    + """
paths = scopefs.pick(mode="open")
emit(open_exact(os.fsencode(paths[0])))
"""
)

C_PICK_EXACT = (
    OPEN_EXACT
    + """
lib = c_lib()
got = lib.scopefs_pick(b"open", None, 0, None)
emit(open_exact(ctypes.string_at(got[0])) if got else {"error": errno.errorcode[ctypes.get_errno()]})
"""
)

PY_WATCH_EXACT = (
    OPEN_EXACT
    + """
notices = scopefs.watch_documents(timeout=15)
emit({"ready": True})
for notice in notices:
    if notice["kind"] == "arrived":
        emit(open_exact(os.fsencode(notice["path"])))
        break
else:
    emit({"error": "no notice"})
"""
)

C_WATCH_EXACT = (
    OPEN_EXACT
    + """
class Notice(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_char_p), ("path", ctypes.c_char_p), ("old_path", ctypes.c_char_p),
                ("grant", ctypes.c_longlong)]
HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Notice), ctypes.c_void_p)
heard = []
def on_notice(notice, context):
    if notice.contents.kind == b"arrived":
        heard.append(notice.contents.path)   # a copy: valid during the callback only
        return 1
    return 0
lib = c_lib()
lib.scopefs_watch.argtypes = [HANDLER, ctypes.c_void_p, ctypes.c_double, ctypes.c_char_p]
emit({"ready": True})
handler = HANDLER(on_notice)
rc = lib.scopefs_watch(handler, None, 15.0, None)
emit(open_exact(heard[0]) if heard else {"error": f"rc {rc}, no notice"})
"""
)

PY_COORDINATE_EXACT = (
    OPEN_EXACT
    + """
path = bytes.fromhex(sys.argv[1])
try:
    with scopefs.coordinate(path, "read", timeout=5):
        emit(open_exact(path))
except OSError as exc:
    emit({"error": type(exc).__name__, "message": str(exc)})
"""
)


@pytest.fixture
def cafe(env):
    """`local:docs/caf\\xe9.txt` on the host, the Python client on the app's
    path, a strict mount (scopes are needed, SPEC S6)."""
    from doc_scope_helpers import mount

    env.base_env["PYTHONPATH"] = PYTHON_CLIENT
    with open(os.fsencode(env.backing(LOCAL) / "docs") + b"/" + CAFE, "wb") as f:
        f.write(CAFE_TEXT)
    mount(env)
    return os.fsencode(env.prov(ALPHA, LOCAL, "docs")) + b"/" + CAFE


def exact(path: bytes) -> dict:
    return {"path": path.hex(), "data": {"ok": CAFE_TEXT.hex()}}


def swift_report(env, *argv) -> dict:
    p = env.run_app(ALPHA, list(argv))
    assert p.returncode == 0, describe(p)
    return swift_normalized(json.loads(p.stdout.strip().splitlines()[-1]))


def swift_normalized(got: dict) -> dict:
    """The check program's report in the Python snippets' shape; its read
    under a coordinated claim on the URL (the path sent back to the daemon,
    SPEC S27b) must give the file too."""
    assert got.get("coordinated") == CAFE_TEXT.hex(), got
    if "dataHex" in got:
        data = got.pop("dataHex")
        got["data"] = {"ok": data} if data != "unreadable" else {"errno": "unreadable"}
    return got


def client_argv(lang: str, request) -> tuple:
    """The C library's path for the C snippets (argv[1]); the Swift check program."""
    if lang == "c":
        return (request.getfixturevalue("c_build") / "libscopefs.so",)
    if lang == "swift":
        return (request.getfixturevalue("swift_check"),)
    return ()


@pytest.mark.parametrize("lang", LANGS)
def test_bookmark_resolves_to_the_exact_name(env, cafe, lang, request):
    """Issue 16, SPEC S26, S33a: a bookmark of `caf\\xe9.txt` resolves, in
    each client library, to a path that opens that very file."""
    extra = client_argv(lang, request)
    env.grant(ALPHA, arg(b"local:docs/" + CAFE))
    token = env.app_json(ALPHA, "import scopefs\nemit(scopefs.bookmark_data(bytes.fromhex(sys.argv[1])))", cafe.hex())
    if lang == "python":
        got = env.app_json(ALPHA, PY_RESOLVE, token)
    elif lang == "c":
        got = env.app_json(ALPHA, C_RESOLVE, *extra, token)
    else:
        got = swift_report(env, *extra, "bytes-resolve", token)
    assert {k: got.get(k) for k in ("path", "data")} == exact(cafe), got


@pytest.mark.parametrize("lang", LANGS)
def test_pick_reply_opens_the_exact_name(env, cafe, lang, request):
    """Issue 16, 17, SPEC S21a, S33a: the agent chooses `caf\\xe9.txt`
    (its script names it with `\\udce9`); the app's pick returns a path
    that opens that file."""
    extra = client_argv(lang, request)
    agent = Agent(env, [{"choose": [os.fsdecode(b"local:docs/" + CAFE)]}])
    if lang == "python":
        got = env.app_json(ALPHA, PY_PICK_EXACT)
    elif lang == "c":
        got = env.app_json(ALPHA, C_PICK_EXACT, *extra)
    else:
        got = swift_report(env, *extra, "bytes-pick")
    log = agent.finish()
    assert {k: got.get(k) for k in ("path", "data")} == exact(cafe), (got, log)


@pytest.mark.parametrize("lang", LANGS)
def test_watch_notice_opens_the_exact_name(env, cafe, lang, request):
    """Issue 16, 17, SPEC S27a, S33a: a presenter hears that `caf\\xe9.txt`
    arrived (`scopefs open`) with a path that opens that file."""
    extra = client_argv(lang, request)
    if lang == "swift":
        argv = env.run_argv(ALPHA, [*extra, "bytes-watch"])
        app = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.base_env, start_new_session=True, text=True
        )
        try:
            assert json.loads(app.stdout.readline()) == {"ready": "true"}  # DocumentPresenter() has subscribed
            env.cli("open", ALPHA, arg(b"local:docs/" + CAFE))
            out, err = app.communicate(timeout=30)
        finally:
            if app.poll() is None:
                app.kill()
                app.wait()
        got = swift_normalized(json.loads(out.strip().splitlines()[-1]))
    else:
        session = env.app_session(ALPHA, PY_WATCH_EXACT if lang == "python" else C_WATCH_EXACT, *extra)
        assert session.recv() == {"ready": True}  # watch_documents() has subscribed; scopefs_watch has not
        if lang == "c":
            time.sleep(0.3)  # a wait with nothing to watch: scopefs_watch subscribes inside the C call
        env.cli("open", ALPHA, arg(b"local:docs/" + CAFE))
        got = session.recv(timeout=20)
    assert {k: got.get(k) for k in ("path", "data")} == exact(cafe), got


def test_coordinate_takes_the_exact_name(env, cafe):
    """Issue 16, 17, SPEC S27b, S33a: an app coordinates a read of
    `caf\\xe9.txt`, its path sent as `\\udce9`, and reads it under the claim."""
    env.cli("open", ALPHA, arg(b"local:docs/" + CAFE))
    got = env.app_json(ALPHA, PY_COORDINATE_EXACT, cafe.hex())
    assert {k: got.get(k) for k in ("path", "data")} == exact(cafe), got


RUN_SEES = (
    "import json, os; print(json.dumps({'x': os.environb.get(b'X', b'').hex(), "
    "'lc': os.environb.get(b'LC_SCOPEFS_BYTES', b'').hex(), 'cwd': os.getcwdb().hex()}))"
)


@pytest.mark.parametrize("sandbox", [False, True], ids=["no-sandbox", "sandbox"])
def test_run_passes_environment_and_directory_as_bytes(env, tmp_path, sandbox):
    """Issue 16, SPEC S5, S33a: `scopefs run` hands the app its environment
    and working directory unchanged when they are not UTF-8. In the sandbox
    only the allowed variables pass (LC_*), and the directory is the
    container."""
    env.mount()
    directory = os.fsencode(tmp_path) + b"/dir\xe9"
    os.mkdir(directory)
    variables = dict(env.base_env)
    variables["X"] = os.fsdecode(b"caf\xe9 \xff")
    variables["LC_SCOPEFS_BYTES"] = os.fsdecode(b"\xe9t\xe9")
    p = subprocess.run(
        env.run_argv(ALPHA, ["python3", "-c", RUN_SEES], sandbox=sandbox),
        cwd=directory,
        env=variables,
        capture_output=True,
        timeout=60,
    )
    assert p.returncode == 0, p
    seen = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert seen["lc"] == b"\xe9t\xe9".hex(), seen
    if sandbox:
        assert seen["x"] == "" and bytes.fromhex(seen["cwd"]).endswith(b"/Container"), seen
    else:
        assert seen == {"x": b"caf\xe9 \xff".hex(), "lc": b"\xe9t\xe9".hex(), "cwd": directory.hex()}, seen


def test_live_query_json_keeps_the_bytes(env, cafe):
    """Issue 16, SPEC S28a, S29, S33a: `query --follow --json` writes a
    name that is not UTF-8 losslessly (`\\udce9`), as every JSON output."""
    import select

    env.cli("open", ALPHA, arg(b"local:docs/" + CAFE))
    follower = subprocess.Popen(
        env.cli_argv("query", "--app", ALPHA, "--follow", "--json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env.base_env,
        start_new_session=True,
    )
    try:
        assert select.select([follower.stdout], [], [], 10)[0], "no output within 10 s"
        first = json.loads(follower.stdout.readline())
    finally:
        follower.kill()
        follower.wait()
    assert first["event"] == "finishedGathering", first
    urls = [os.fsencode(r["urlInLocalContainer"]) for r in first["results"]]
    assert urls and urls[0].endswith(b"/Documents/" + CAFE), first
