"""The folder examples (docs/examples/extensions/folder.py, and the Swift
SDK's swift-folder): what the conformance suite cannot see from the
protocol alone. Its ids are inode
numbers, so they survive renames made behind its back, and nothing it does
reaches outside its root, whatever symlinks the root holds.
"""

from __future__ import annotations

import os
import sys

import pytest
from conformance import INVALID_PARAMS, ExtensionProcess, RpcError
from conftest import FOLDER_EXTENSION, SWIFT_FOLDER_EXTENSION


@pytest.fixture(params=["python", "swift"])
def served(request, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    staging = tmp_path / "staging"
    staging.mkdir()
    if request.param == "python":
        command = [sys.executable, str(FOLDER_EXTENSION), str(root)]
    else:
        if not SWIFT_FOLDER_EXTENSION.is_file():
            pytest.fail(f"{SWIFT_FOLDER_EXTENSION} is missing: run `swift build` (make test-extensions does)")
        command = [str(SWIFT_FOLDER_EXTENSION), str(root)]
    process = ExtensionProcess(command, staging, tmp_path / "folder.log")
    process.initialize()
    yield process, root, outside
    assert process.shutdown() == 0
    assert process.violations == []


def child(process, folder_id, name):
    return next(item for item in process.call("list", {"id": folder_id})["items"] if item["name"] == name)


def test_ids_survive_a_rename_made_behind_its_back(served):
    process, root, _ = served
    (root / "a").mkdir()
    (root / "a" / "doc.txt").write_bytes(b"doc")
    before = child(process, child(process, "root", "a")["id"], "doc.txt")
    (root / "b").mkdir()
    os.rename(root / "a" / "doc.txt", root / "b" / "moved.txt")
    after = process.call("item", {"id": before["id"]})
    assert (after["name"], after["parent"]) == ("moved.txt", child(process, "root", "b")["id"])
    assert after["version"]["content"] == before["version"]["content"], "a rename is not a content change"
    assert after["version"]["metadata"] != before["version"]["metadata"], "but a metadata change"


def test_a_symlink_in_the_root_is_served_as_a_link_and_never_followed(served, tmp_path):
    process, root, outside = served
    (outside / "secret").write_bytes(b"outside the root")
    os.symlink(outside, root / "link")
    os.symlink(outside / "secret", root / "filelink")
    link = child(process, "root", "link")
    assert (link["kind"], link["target"]) == ("symlink", str(outside))
    for method, params in [
        ("list", {"id": link["id"]}),
        ("fetch", {"id": child(process, "root", "filelink")["id"]}),
        ("create", {"parent": link["id"], "name": "planted", "kind": "folder"}),
    ]:
        with pytest.raises(RpcError) as raised:
            process.call(method, params)
        assert raised.value.code == INVALID_PARAMS, method
    (root / "doc").write_bytes(b"d")
    doc = child(process, "root", "doc")
    with pytest.raises(RpcError) as raised:
        process.call("modify", {"id": doc["id"], "baseVersion": doc["version"], "fields": {"parent": link["id"]}})
    assert raised.value.code == INVALID_PARAMS
    assert sorted(os.listdir(outside)) == ["secret"], "nothing was made or moved outside the root"
