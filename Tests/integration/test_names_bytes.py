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

import pytest

from scopefs_harness import ALPHA, DRIVE, LOCAL, describe, mount_count, mountinfo_entries

CAFE = b"caf\xe9.txt"            # Latin-1 "café.txt": not UTF-8
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


def app_ops(env, app, *ops):
    """Runs file operations in an app process: (kind, path bytes[, data bytes])."""
    encoded = [[kind, *(part.hex() for part in parts)] for kind, *parts in ops]
    return env.app_json(app, RUN_OPS, json.dumps(encoded))


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
    paths = [os.fsencode(value) for row in rows for key, value in row.items()
             if isinstance(value, str) and "caf" in value]
    assert paths and all(path.endswith(b"Reports/" + CAFE) for path in paths), rows
    text = env.cli("privacy", ALPHA).stdout
    assert "Reports/caf\\xe9.txt" in text, text

    env.mount()
    folder = os.fsencode(env.prov(ALPHA, DRIVE, "Reports"))
    got = app_ops(env, ALPHA, ("list", folder), ("read", folder + b"/" + CAFE), ("stat", folder + b"/" + CAFE))
    assert got == [{"ok": [CAFE.hex()]}, {"ok": CAFE_TEXT.hex()}, {"ok": len(CAFE_TEXT)}]


def test_create_through_the_mount_keeps_the_bytes(env):
    """SPEC S33a: a file created through the mount as `new\\xff.txt` has that
    exact name on the host, and is listed, read and removed under it."""
    reports = env.backing(DRIVE) / "Reports"
    reports.mkdir()
    env.grant(ALPHA, f"{DRIVE}:Reports")
    env.mount()
    folder = os.fsencode(env.prov(ALPHA, DRIVE, "Reports"))
    got = app_ops(env, ALPHA, ("write", folder + b"/" + NEW, b"made by the app\n"), ("list", folder),
                  ("read", folder + b"/" + NEW))
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
    got = app_ops(env, ALPHA, ("read", mount + b"/" + nfc), ("read", mount + b"/" + nfd),
                  ("stat", mount + b"/" + nfd), ("list", mount))
    assert got == [{"ok": b"granted\n".hex()}, {"errno": "ENOENT"}, {"errno": "ENOENT"}, {"ok": [nfc.hex()]}]

    # The same for folders: a grant of one folder covers nothing of its twin.
    for name in ("Café".encode(), "Cafe\u0301".encode()):
        os.mkdir(folder + b"/" + name)
        with open(folder + b"/" + name + b"/inside.txt", "wb") as f:
            f.write(name)
    env.grant(ALPHA, arg(b"local:docs/" + "Café".encode()))
    twin = mount + b"/" + "Cafe\u0301".encode()
    got = app_ops(env, ALPHA, ("read", mount + b"/" + "Café".encode() + b"/inside.txt"),
                  ("read", twin + b"/inside.txt"), ("list", twin))
    assert got == [{"ok": "Café".encode().hex()}, {"errno": "ENOENT"}, {"errno": "ENOENT"}]


def random_names(count: int, seed: int) -> list[bytes]:
    """`count` distinct names that are not UTF-8 (each holds a lone 0xFF or
    0xC0..0xC1 or a cut sequence), plus the awkward cases: a real character
    in the range ScopeFS uses to hold stray bytes, canonically equivalent
    twins, a combining mark after nothing."""
    rng = random.Random(seed)
    alphabet = [b for b in range(1, 256) if b != 0x2F]
    names: set[bytes] = {
        b"\xf4\x8f\xbe\x80", b"\xf4\x8f\xbf\xbf\xff", b"\xf4\x8f\xbe", "é".encode() + b"\xe9",
        "cafe\u0301".encode() + b"\xff", "café".encode() + b"\xff", b"\xcc\x81\xff",
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
    result = subprocess.run([b"mount", b"-t", b"tmpfs", b"-o", b"size=1m", b"scopefs-odd", path],
                            capture_output=True, timeout=30)
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
        assert stacked.returncode != 0 and mount_count(env.mnt) == 1, \
            "a second mount was stacked\n" + describe(stacked)
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
    from test_picker import Picker, RIGHT, grant_path, grants, scopefs

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
    assert imported == f"Container/tmp/{ALPHA}-Inbox/caf\\xe9.txt", imported   # text output: escaped
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
