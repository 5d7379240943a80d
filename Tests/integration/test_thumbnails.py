"""Previews of documents without their content (issue 53, SPEC S50).

`user.scopefs.thumbnail` is an item's preview, a PNG: any process that may
see the item reads it without a scope and without a download (an
extension is asked for the preview alone, `thumbnail`, protocol 1.2); a
process that may not see the item gets ENOENT, as for any unseen item; an
app that may write the file saves its preview with setxattr, and it goes
to the store with the upload. A hostile extension's preview is checked
like a staged file and refused with an event. Local providers show the
owner's freedesktop thumbnail cache. Default mount (strict scopes), apps
in the default sandbox.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
import zlib
from pathlib import Path

import pytest
from client_builds import c_build, compile_c_example, swift_check  # noqa: F401  (fixtures: the C library, the Swift check app)
from doc_scope_helpers import mount, wait_events
from extension_cloud import CLOUD, Cloud
from previews import png
from scopefs_harness import ALPHA, BETA, EXTENSIONS, LOCAL, wait_for

HERE = Path(__file__).resolve().parent

THUMBNAIL = "user.scopefs.thumbnail"
MANY = 1000

# An app process (default sandbox) that runs the commands the test sends,
# one JSON object per line; previews travel as hex.
APP = r"""
import json

def get(path):
    return os.getxattr(path, "user.scopefs.thumbnail").hex()

def get_all(folder):
    found = {}
    for name in sorted(os.listdir(folder)):
        found[name] = outcome(get, os.path.join(folder, name))
    return found

def save(path, data, hexed):
    with open(path, "wb") as f:
        f.write(data.encode())
        os.setxattr(f.fileno(), "user.scopefs.thumbnail", bytes.fromhex(hexed))
    return "saved"

emit({"ready": True})
while True:
    line = sys.stdin.readline()
    if not line:
        break
    cmd = json.loads(line)
    op, path = cmd["op"], cmd.get("path")
    if op == "start":
        emit(outcome(lambda: os.getxattr(path, "user.scopefs.start").decode()))
    elif op == "get":
        emit(outcome(get, path))
    elif op == "get-all":
        emit(outcome(get_all, path))
    elif op == "save":
        emit(outcome(save, path, cmd["data"], cmd["png"]))
    elif op == "set":
        emit(outcome(os.setxattr, path, "user.scopefs.thumbnail", bytes.fromhex(cmd["png"])))
    elif op == "state":
        emit(outcome(lambda: os.getxattr(path, "user.scopefs.state").decode()))
"""


def app(env, name: str):
    s = env.app_session(name, APP, sandbox=True)
    assert s.recv() == {"ready": True}
    return s


def ask(s, **cmd):
    s.popen.stdin.write((json.dumps(cmd) + "\n").encode())
    s.popen.stdin.flush()
    return s.recv()


def calls(cloud: Cloud, method: str) -> list[str]:
    return [c for c in cloud.calls() if c.split(" ")[0] == method]


def mounted(env, documents: int = 0) -> Cloud:
    """The Cloud remote, with `documents` small files in many/, mounted and synced."""
    world = Cloud(env)
    many = world.remote / "many"
    many.mkdir()
    os.chmod(many, 0o777)
    for number in range(documents):
        (many / f"doc-{number:04d}.txt").write_bytes(b"content %d\n" % number)
    (many / "doc-0001.txt").write_bytes(b"content 1\n")
    mount(env)
    world.sync()
    env._record_daemon()
    return world


@pytest.fixture
def cloud(env):
    return mounted(env)


@pytest.fixture
def many_cloud(env):
    return mounted(env, MANY)


@pytest.mark.sqlite_store(EXTENSIONS)
def test_a_thousand_placeholders_show_previews_and_fetch_no_content(env, many_cloud):
    """S50, S42: a document browser lists 1,000 dataless documents (its
    folder scope started: listing is a read, S9) and reads each one's
    preview: every preview is a PNG, the remote is asked for previews only
    (one each; a second pass asks nothing) and never for content, and
    every document stays dataless."""
    env.grant(ALPHA, f"{CLOUD}:many")
    s = app(env, ALPHA)
    folder = many_cloud.path(ALPHA, "many")
    assert ask(s, op="start", path=folder) == {"ok": "1"}
    first = ask(s, op="get-all", path=folder)
    assert "ok" in first, first
    first = first["ok"]
    assert len(first) == MANY, len(first)
    bad = {name: got for name, got in first.items() if not got.get("ok", "").startswith("89504e470d0a1a0a")}
    assert not bad, f"previews that are not PNGs: {dict(list(bad.items())[:5])}"
    assert calls(many_cloud, "fetch") == [], "a preview downloaded content"
    asked = len(calls(many_cloud, "thumbnail"))
    assert asked == MANY, f"{asked} thumbnail calls for {MANY} documents"
    assert ask(s, op="get-all", path=folder)["ok"] == first
    assert len(calls(many_cloud, "thumbnail")) == MANY, "the second pass asked the remote again"
    assert ask(s, op="state", path=os.path.join(folder, "doc-0007.txt")) == {"ok": "dataless"}
    assert calls(many_cloud, "fetch") == []


@pytest.mark.sqlite_store(EXTENSIONS)
def test_a_preview_saved_with_a_document_reaches_the_store_and_another_app(env, cloud):
    """S50: the saving app writes the document and its preview (setxattr
    on its descriptor); the preview goes up with the upload, and another
    app with a read grant on the document, without a scope, and the
    owner's inspect view read it back, byte for byte."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    saver = app(env, ALPHA)
    assert ask(saver, op="start", path=cloud.path(ALPHA, "docs")) == {"ok": "1"}
    preview = png("a drawing", side=32)
    saved = ask(saver, op="save", path=cloud.path(ALPHA, "docs/drawing.txt"), data="lines\n", png=preview.hex())
    assert saved == {"ok": "saved"}, saved
    kept = cloud.remote / ".scopefs-thumbnails"

    def remote_preview():
        target = cloud.remote / "docs" / "drawing.txt"
        if not target.exists():
            return None
        path = kept / f"i{target.stat().st_ino}.png"
        return path.read_bytes() if path.exists() else None

    wait_for("the preview on the remote, with the document", remote_preview, lambda got: got == preview, timeout=10)
    assert (cloud.remote / "docs" / "drawing.txt").read_bytes() == b"lines\n"
    assert ".scopefs-thumbnails" not in os.listdir(env.prov(ALPHA, CLOUD)), "the store's previews are listed"
    env.grant(BETA, f"{CLOUD}:docs/drawing.txt", read_only=True)
    reader = app(env, BETA)
    assert ask(reader, op="get", path=cloud.path(BETA, "docs/drawing.txt")) == {"ok": preview.hex()}
    owner = env.host_json(
        "emit(outcome(lambda: os.getxattr(sys.argv[1], 'user.scopefs.thumbnail').hex()))",
        cloud.path(ALPHA, "docs/drawing.txt"),
    )
    assert owner == {"ok": preview.hex()}, owner


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """A PNG's chunks (type, data), each CRC checked."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind, body = data[offset + 4 : offset + 8], data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body), f"bad CRC in {kind}"
        chunks.append((kind, body))
        offset += 12 + length
    return chunks


@pytest.mark.sqlite_store(EXTENSIONS)
def test_the_owners_file_manager_finds_previews_of_dataless_documents(env):
    """S50, S4, issue 53: the owner lists an extension's folder in the
    mount (as a file manager does); the daemon keeps each document's
    preview in the owner's freedesktop cache under the document's URI in
    the mount (large/MD5(URI).png, Thumb::URI and Thumb::MTime as the
    Thumbnail Managing Standard asks, CRCs right), from the extension's
    `thumbnail`, without fetching any content; a second listing asks the
    extension nothing."""
    cache = env.root / "owner-cache"
    env.base_env["XDG_CACHE_HOME"] = str(cache)
    world = mounted(env, 5)
    env.grant(ALPHA, f"{CLOUD}:many")
    folder = Path(world.path(ALPHA, "many"))
    names = sorted(os.listdir(folder))  # the owner's process: the inspect view
    assert len(names) == 5, names

    def kept_in(where: Path, name: str) -> Path:
        uri = (where / name).as_uri()
        return cache / "thumbnails" / "large" / (hashlib.md5(uri.encode()).hexdigest() + ".png")

    def kept(name: str) -> Path:
        return kept_in(folder, name)

    wait_for("the previews in the owner's cache", lambda: all(kept(name).exists() for name in names), timeout=20)
    for name in names:
        chunks = png_chunks(kept(name).read_bytes())
        assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
        texts = dict(body.split(b"\0", 1) for kind, body in chunks if kind == b"tEXt")
        assert texts[b"Thumb::URI"] == (folder / name).as_uri().encode()
        assert texts[b"Thumb::MTime"] == str(int((folder / name).stat().st_mtime)).encode()
        assert oct(kept(name).stat().st_mode & 0o777) == "0o600"
    assert calls(world, "fetch") == [], "a preview downloaded content"
    asked = len(calls(world, "thumbnail"))
    assert asked == 5, asked
    os.listdir(folder)
    time.sleep(1)
    assert len(calls(world, "thumbnail")) == asked, "a second listing asked the extension again"
    # A bare folder above one granted file shows that file alone: only its
    # preview is kept, and the files the app was not given cost nothing.
    env.grant(BETA, f"{CLOUD}:many/{names[1]}")
    bare = Path(world.path(BETA, "many"))
    assert os.listdir(bare) == [names[1]]
    wait_for("the granted file's preview", lambda: kept_in(bare, names[1]).exists(), timeout=20)
    time.sleep(1)
    assert [name for name in names if kept_in(bare, name).exists()] == [names[1]]


@pytest.mark.sqlite_store(EXTENSIONS)
def test_an_app_without_access_learns_nothing_of_a_preview(env, cloud):
    """S50, S2, S32: an app without a grant gets ENOENT for a preview, as
    for a name that does not exist, and the remote hears nothing; a
    revoked grant is EPERM; an app with a read grant cannot save one
    (EPERM), nor can one without a started scope (strict mode, S9)."""
    env.grant(ALPHA, f"{CLOUD}:docs/report.txt", read_only=True)
    grant = env.grant(BETA, f"{CLOUD}:docs/big.bin")
    stranger = app(env, ALPHA)
    before = len(calls(cloud, "thumbnail"))
    assert ask(stranger, op="get", path=cloud.path(ALPHA, "docs/big.bin")) == {"errno": "ENOENT"}
    assert ask(stranger, op="get", path=cloud.path(ALPHA, "docs/no-such.bin")) == {"errno": "ENOENT"}
    assert ask(stranger, op="get", path=cloud.path(ALPHA, "many/doc-0001.txt")) == {"errno": "ENOENT"}
    assert len(calls(cloud, "thumbnail")) == before, "an app without access made the remote work"
    assert ask(stranger, op="get", path=cloud.path(ALPHA, "docs/report.txt"))["ok"].startswith("89504e47")
    assert ask(stranger, op="set", path=cloud.path(ALPHA, "docs/report.txt"), png=png("x").hex()) == {"errno": "EPERM"}
    writer = app(env, BETA)
    unscoped = ask(writer, op="set", path=cloud.path(BETA, "docs/big.bin"), png=png("y").hex())
    assert unscoped == {"errno": "EPERM"}, unscoped
    env.cli("revoke", BETA, grant)
    assert ask(writer, op="get", path=cloud.path(BETA, "docs/big.bin")) == {"errno": "EPERM"}


@pytest.mark.sqlite_store(EXTENSIONS)
@pytest.mark.parametrize("hostile", ["text", "symlink", "big", "outside"])
def test_a_hostile_preview_is_refused_with_an_event(env, cloud, hostile):
    """S50, S41: a preview that is not a PNG, a symlink, larger than 64 KiB
    or outside the staging folder is refused: the app sees none (ENODATA),
    an `extension.thumbnailRefused` event says why, and the mount goes on."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    cloud.switch("hostile-thumbnail", hostile)
    s = app(env, ALPHA)
    assert ask(s, op="get", path=cloud.path(ALPHA, "docs/report.txt")) == {"errno": "ENODATA"}
    wait_events(env, lambda e: "extension.thumbnailRefused" in (e.get("operation") or ""))
    cloud.switch("hostile-thumbnail", None)
    assert ask(s, op="state", path=cloud.path(ALPHA, "docs/report.txt")) == {"ok": "dataless"}
    assert ask(s, op="get", path=cloud.path(ALPHA, "docs/big.bin"))["ok"].startswith("89504e47")


def test_a_local_provider_shows_the_owners_freedesktop_preview(env):
    """S50: a local provider's file shows the preview the owner's file
    manager keeps (~/.cache/thumbnails/large/MD5(URI).png) while its
    Thumb::MTime is the file's mtime; a stale one, none at all, or an app
    without a grant (ENOENT) get nothing."""
    cache = env.root / "owner-cache"
    env.base_env["XDG_CACHE_HOME"] = str(cache)
    photo = Path(env.backing(LOCAL)) / "photo.txt"
    photo.write_bytes(b"a photo\n")
    (Path(env.backing(LOCAL)) / "plain.txt").write_bytes(b"no preview\n")
    mtime = str(int(photo.stat().st_mtime))
    preview = png("photo", text={"Thumb::URI": photo.as_uri(), "Thumb::MTime": mtime})
    large = cache / "thumbnails" / "large"
    large.mkdir(parents=True)
    (large / (hashlib.md5(photo.as_uri().encode()).hexdigest() + ".png")).write_bytes(preview)
    mount(env)
    env.grant(ALPHA, f"{LOCAL}:photo.txt", read_only=True)
    env.grant(ALPHA, f"{LOCAL}:plain.txt", read_only=True)
    s = app(env, ALPHA)
    assert ask(s, op="get", path=env.prov(ALPHA, LOCAL, "photo.txt")) == {"ok": preview.hex()}
    assert ask(s, op="get", path=env.prov(ALPHA, LOCAL, "plain.txt")) == {"errno": "ENODATA"}
    other = app(env, BETA)
    assert ask(other, op="get", path=env.prov(BETA, LOCAL, "photo.txt")) == {"errno": "ENOENT"}
    os.utime(photo, (int(mtime) + 100, int(mtime) + 100))
    assert ask(s, op="get", path=env.prov(ALPHA, LOCAL, "photo.txt")) == {"errno": "ENODATA"}, "a stale preview"


@pytest.mark.sqlite_store(EXTENSIONS)
def test_a_swift_document_browser_reads_promised_values_of_a_thousand_without_a_download(env, many_cloud, swift_check):
    """S50: the Swift client's `promisedItemResourceValues(forKeys:)` inside
    a metadata-only coordinated read (`.immediatelyAvailableMetadataOnly`)
    gives name, size, dates, download state and preview of 1,000 dataless
    documents, for an app whose policy is never to download, and the
    remote is never asked for content. In the default sandbox, shown the
    check program's folder (`--expose`)."""
    env.grant(ALPHA, f"{CLOUD}:many")
    env.cli("app", "set", ALPHA, "--downloads", "never")
    p = env.run_app(
        ALPHA,
        [swift_check, "promised", many_cloud.path(ALPHA, "many")],
        sandbox=True,
        timeout=120,
        extra=("--expose", str(Path(swift_check).parent)),
    )
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["failures"] == "", report
    assert report["items"] == str(MANY) and report["previews"] == str(MANY), report
    assert report["statuses"] == f"not-downloaded={MANY}", report
    expected = sum(len(b"content %d\n" % number) for number in range(MANY))
    assert report["bytes"] == str(expected), report
    assert calls(many_cloud, "fetch") == [], "promised values downloaded content"


@pytest.mark.sqlite_store(EXTENSIONS)
def test_the_python_client_reads_and_saves_promised_values(env, cloud):
    """S50: `scopefs.promised_item_values` of a dataless document (no scope,
    no download), `scopefs.set_thumbnail` by the saving app, and the saved
    preview in the promised values after it. In the default sandbox,
    shown this checkout's clients/python (`--expose`)."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    code = r"""
import scopefs
path = sys.argv[1]
before = scopefs.promised_item_values(path)
with scopefs.accessing(path):
    scopefs.set_thumbnail(path, bytes.fromhex(sys.argv[2]))
after = scopefs.promised_item_values(path)
emit({"before": [before.name, before.size, before.state, before.downloading_status, before.thumbnail[:4].hex()],
      "after": after.thumbnail.hex(), "modified": before.modified > 0})
"""
    client = str(Path(__file__).resolve().parents[2] / "clients" / "python")
    preview = png("python", side=8)
    shown = ("--expose", client, "--env", f"PYTHONPATH={client}")
    got = env.app_json(ALPHA, code, cloud.path(ALPHA, "docs/big.bin"), preview.hex(), sandbox=True, extra=shown)
    assert got["before"] == ["big.bin", 20 << 20, "dataless", "not-downloaded", "89504e47"], got
    assert got["after"] == preview.hex() and got["modified"], got
    assert calls(cloud, "fetch") == [], "promised values downloaded content"


@pytest.mark.sqlite_store(EXTENSIONS)
def test_the_c_client_reads_and_saves_promised_values(env, cloud, c_build):  # noqa: F811
    """S50: `scopefs_promised_item_values` of a dataless document gives its
    name, size, state, Apple's downloading status and the extension's
    preview with no scope and no download; `scopefs_set_thumbnail` in scope
    saves a preview that `scopefs_thumbnail` reads back, and refuses a value
    that is not a PNG (EINVAL); a folder has no preview. In the default
    sandbox, shown the program's folder (`--expose`)."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    folder = env.root / "c-app"
    folder.mkdir()
    os.chmod(env.root, 0o755)
    os.chmod(folder, 0o755)
    program = compile_c_example(HERE / "c_programs" / "promised_values.c", folder / "promised_values", c_build)
    preview = png("c", side=8)
    p = env.run_app(
        ALPHA,
        [program, cloud.path(ALPHA, "docs/big.bin"), cloud.path(ALPHA, "docs"), preview.hex()],
        sandbox=True,
        extra=("--expose", str(folder)),
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        f"before big.bin {20 << 20} dataless not-downloaded 89504e47 1",
        f"saved {preview.hex()}",
        "not-a-png EINVAL",
        "folder 1 none",
    ], p.stdout
    assert calls(cloud, "fetch") == [], "promised values downloaded content"
