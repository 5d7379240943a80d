"""The rclone extension (extensions/rclone/scopefs_rclone.py,
docs/PROVIDERS.md "rclone") on ``rclone serve webdav`` and ``rclone serve
sftp`` over real folders: what the conformance suite cannot see from the
protocol alone. The tests change the served folder behind the extension's
back, as another machine would, and check what the extension then says.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import time
import uuid

import pytest
from conformance import CONFLICT, NO_SUCH_ITEM, ExtensionProcess, RpcError, check_item, check_staged
from conftest import RCLONE_EXTENSION, free_port

INVALID_PARAMS = -32602
UNREACHABLE = -32004


@pytest.fixture(params=["webdav", "sftp"])
def remote(request):
    return request.param, request.getfixturevalue(f"{request.param}_server")


@pytest.fixture
def launch(tmp_path):
    processes = []

    def start(server, options=None, env=None):
        staging = tmp_path / f"staging-{len(processes)}"
        staging.mkdir()
        process = ExtensionProcess(
            [sys.executable, str(RCLONE_EXTENSION)],
            staging,
            tmp_path / f"rclone-{len(processes)}.log",
            {**server.env, **(env or {})},
        )
        processes.append(process)
        return process

    yield start
    for process in processes:
        process.shutdown()
        assert process.violations == []


def served(launch, server, **options):
    """An initialized extension on a fresh subfolder of the served folder."""
    base = f"r-{uuid.uuid4().hex[:10]}"
    (server.folder / base).mkdir()
    process = launch(server)
    answer = process.initialize(options={"remote": server.remote, "path": base, **options})
    process.capabilities = answer["capabilities"]
    return process, server.folder / base


def child(process, folder_id, name):
    return next(item for item in process.call("list", {"id": folder_id})["items"] if item["name"] == name)


def fetched(process, item_id):
    answer = process.call("fetch", {"id": item_id})
    data = check_staged(answer["path"], process.staging)
    os.unlink(answer["path"])
    return data


def test_files_made_behind_its_back_are_served_and_ids_are_paths(remote, launch):
    _, server = remote
    process, folder = served(launch, server)
    (folder / "docs").mkdir()
    (folder / "docs" / "report.txt").write_bytes(b"written by another machine")
    docs = child(process, "root", "docs")
    report = check_item(child(process, docs["id"], "report.txt"))
    assert (docs["id"], report["id"]) == ("/docs", "/docs/report.txt"), "ids are paths under the served folder"
    assert report["size"] == len(b"written by another machine")
    assert fetched(process, report["id"]) == b"written by another machine"
    assert process.capabilities["renameKeepsId"] is False and process.capabilities["conditionalWrites"] is False


def test_an_edit_behind_its_back_is_a_conflict_and_is_not_overwritten(remote, launch, tmp_path):
    _, server = remote
    process, folder = served(launch, server)
    (folder / "shared.txt").write_bytes(b"base")
    base = child(process, "root", "shared.txt")
    (folder / "shared.txt").write_bytes(b"their edit")
    mine = tmp_path / "mine"
    mine.write_bytes(b"my edit")
    with pytest.raises(RpcError) as raised:
        process.call("modify", {"id": base["id"], "baseVersion": base["version"], "contentsPath": str(mine)})
    assert raised.value.code == CONFLICT
    with pytest.raises(RpcError) as raised:
        process.call("delete", {"id": base["id"], "baseVersion": base["version"]})
    assert raised.value.code == CONFLICT
    assert (folder / "shared.txt").read_bytes() == b"their edit"


def test_a_same_size_edit_with_the_same_mtime_is_seen_where_the_remote_hashes(launch, sftp_server, tmp_path):
    # sftp has hashes (rclone runs md5sum on the server): with hashes "on"
    # the content version holds one, so an edit that keeps size and mtime
    # still changes it. Without a hash (webdav; sftp by default, since its
    # hash reads every file) this is the documented blind spot.
    default, default_folder = served(launch, sftp_server)
    (default_folder / "plain.txt").write_bytes(b"p")
    plain = child(default, "root", "plain.txt")["version"]["content"]
    assert not plain.endswith(hashlib.md5(b"p").hexdigest()), "auto: no hash that reads every file"
    process, folder = served(launch, sftp_server, hashes="on")
    path = folder / "same.txt"
    path.write_bytes(b"aaaa")
    before = child(process, "root", "same.txt")
    assert before["version"]["content"].endswith(":" + hashlib.md5(b"aaaa").hexdigest())
    stamp = path.stat().st_mtime_ns
    path.write_bytes(b"bbbb")
    os.utime(path, ns=(stamp, stamp))
    after = process.call("item", {"id": before["id"]})
    assert after["version"]["content"] != before["version"]["content"]
    mine = tmp_path / "mine"
    mine.write_bytes(b"mine")
    with pytest.raises(RpcError) as raised:
        process.call("modify", {"id": before["id"], "baseVersion": before["version"], "contentsPath": str(mine)})
    assert raised.value.code == CONFLICT
    assert path.read_bytes() == b"bbbb"


def test_changes_report_what_happened_behind_its_back(remote, launch):
    _, server = remote
    process, folder = served(launch, server)
    (folder / "gone.txt").write_bytes(b"g")
    (folder / "kept").mkdir()
    anchor = process.call("currentAnchor", {})["anchor"]
    (folder / "gone.txt").unlink()
    (folder / "kept" / "new.txt").write_bytes(b"new")
    answer = process.call("changes", {"anchor": anchor})
    assert "/gone.txt" in answer["deleted"]
    assert "/kept/new.txt" in {item["id"] for item in answer["updated"]}


def test_a_moved_folder_takes_its_items_to_new_ids(remote, launch):
    _, server = remote
    process, folder = served(launch, server)
    (folder / "a").mkdir()
    (folder / "a" / "inner.txt").write_bytes(b"inner")
    (folder / "b").mkdir()
    a = child(process, "root", "a")
    anchor = process.call("currentAnchor", {})["anchor"]
    moved = process.call("modify", {"id": a["id"], "baseVersion": a["version"], "fields": {"parent": "/b"}})
    assert (moved["id"], moved["parent"]) == ("/b/a", "/b")
    assert (folder / "b" / "a" / "inner.txt").read_bytes() == b"inner" and not (folder / "a").exists()
    answer = process.call("changes", {"anchor": anchor})
    assert {"/a", "/a/inner.txt"} <= set(answer["deleted"])
    assert {"/b/a", "/b/a/inner.txt"} <= {item["id"] for item in answer["updated"]}


def test_a_remote_from_the_users_rclone_config(webdav_server, launch, tmp_path):
    # The remote named in the user's own rclone.conf (RCLONE_CONFIG here);
    # the extension gets only its name, never what the file holds.
    config = tmp_path / "user-rclone.conf"
    url = webdav_server.remote.split("url='")[1].split("'")[0]
    config.write_text(f"[mine]\ntype = webdav\nurl = {url}\n")
    base = f"r-{uuid.uuid4().hex[:10]}"
    (webdav_server.folder / base).mkdir()
    (webdav_server.folder / base / "hello.txt").write_bytes(b"hello")
    process = launch(webdav_server, env={"RCLONE_CONFIG": str(config)})
    process.initialize(options={"remote": "mine:", "path": base})
    assert fetched(process, child(process, "root", "hello.txt")["id"]) == b"hello"


def test_unreachable_remote_and_bad_options(webdav_server, launch):
    nobody = f":webdav,url='http://127.0.0.1:{free_port()}':"
    for options, code in [
        ({"remote": nobody}, UNREACHABLE),
        ({}, INVALID_PARAMS),
        ({"remote": "no-colon"}, INVALID_PARAMS),
        ({"remote": webdav_server.remote, "path": f"missing-{uuid.uuid4().hex}"}, NO_SUCH_ITEM),
    ]:
        process = launch(webdav_server)
        with pytest.raises(RpcError) as raised:
            process.initialize(options=options)
        assert raised.value.code == code, options


def test_rcd_ends_with_a_killed_extension(webdav_server, launch):
    process, _ = served(launch, webdav_server)
    pid = process.process.pid
    children = [
        int(child)
        for task in os.listdir(f"/proc/{pid}/task")
        for child in open(f"/proc/{pid}/task/{task}/children").read().split()
    ]
    rcd = [child for child in children if b"rcd" in open(f"/proc/{child}/cmdline", "rb").read()]
    assert len(rcd) == 1, children
    command_line = open(f"/proc/{rcd[0]}/cmdline", "rb").read()
    assert b"--rc-pass" not in command_line and b"--rc-user" not in command_line, "no secret in /proc/PID/cmdline"
    assert b"RCLONE_RC_PASS=" in open(f"/proc/{rcd[0]}/environ", "rb").read()
    os.kill(pid, signal.SIGKILL)
    process.process.wait(5)
    process.expect_failure = True
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{rcd[0]}") and b"rcd" in open(f"/proc/{rcd[0]}/cmdline", "rb").read():
        assert time.monotonic() < deadline, "rclone rcd outlived the extension"
        time.sleep(0.05)


def test_a_dead_rcd_is_started_again(webdav_server, launch):
    process, folder = served(launch, webdav_server)
    (folder / "still.txt").write_bytes(b"here")
    pid = process.process.pid
    rcd = [
        int(child)
        for task in os.listdir(f"/proc/{pid}/task")
        for child in open(f"/proc/{pid}/task/{task}/children").read().split()
    ]
    os.kill(rcd[0], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{rcd[0]}/cmdline") and open(f"/proc/{rcd[0]}/stat").read().split()[2] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert fetched(process, child(process, "root", "still.txt")["id"]) == b"here"


def test_a_saved_preview_is_a_file_beside_the_document_and_served_by_thumbnail(remote, launch, tmp_path):
    """Protocol 1.2 (SPEC S50): `thumbnailPath` of create is kept under
    the extension's own folder, which no listing shows; `thumbnail` serves
    it staged, and answers null for a document without one."""
    _, server = remote
    process, folder = served(launch, server)
    (folder / "plain.txt").write_bytes(b"no preview")
    assert process.call("thumbnail", {"id": "/plain.txt", "size": 256}) is None
    contents, preview = tmp_path / "contents", tmp_path / "preview.png"
    contents.write_bytes(b"a drawing")
    preview.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    params = {"parent": "root", "name": "drawing.txt", "kind": "file", "contentsPath": str(contents)}
    made = process.call("create", {**params, "thumbnailPath": str(preview)})
    answer = process.call("thumbnail", {"id": made["id"], "size": 256})
    assert check_staged(answer["path"], process.staging) == preview.read_bytes()
    assert answer["length"] == len(preview.read_bytes())
    assert process.call("thumbnail", {"id": "/plain.txt", "size": 256}) is None
    listed = sorted(item["name"] for item in process.call("list", {"id": "root"})["items"])
    assert listed == ["drawing.txt", "plain.txt"], "the previews' folder is listed"
    assert (folder / ".scopefs-thumbnails" / "drawing.txt.png").read_bytes() == preview.read_bytes()
