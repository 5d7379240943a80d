"""Conformance of provider extensions to docs/PROVIDERS.md (protocol 1.0).

Each test starts the extension under test as a real child process (see
conftest.py for the subjects: the Python folder example, the S3 extension
on moto's server, and any command given in SCOPEFS_EXTENSION_COMMAND), talks
the protocol to it over its stdin/stdout, and checks the answers. Every line
the extension writes is checked for framing and JSON-RPC shape, and each
process must exit 0 after shutdown/exit (conftest.py).

The tests work inside a folder they create under the root, so they need
``create``, ``modify`` and ``delete`` (every subject here has them) and
leave the rest of a store alone.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest
from conformance import (
    ANCHOR_EXPIRED,
    CANCELLED,
    CAPABILITY_TYPES,
    CONFLICT,
    EXISTS,
    INVALID_NAME,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_LINE_BYTES,
    MAX_PAGE_SIZE,
    METHOD_NOT_FOUND,
    NO_SUCH_ITEM,
    NOT_EMPTY,
    NOT_INITIALIZED,
    PARSE_ERROR,
    UNSUPPORTED_VERSION,
    RpcError,
    check_item,
    check_staged,
)

# -- helpers -----------------------------------------------------------------


def rpc_error(extension, method, params) -> RpcError:
    with pytest.raises(RpcError) as raised:
        extension.call(method, params)
    return raised.value


def contents_file(tmp_path, data: bytes) -> str:
    """A daemon-owned file holding ``data``, as the daemon passes contentsPath."""
    path = tmp_path / f"upload-{uuid.uuid4().hex}"
    path.write_bytes(data)
    return str(path)


def create_file(extension, tmp_path, parent: str, name: str, data: bytes) -> dict:
    item = extension.call(
        "create", {"parent": parent, "name": name, "kind": "file", "contentsPath": contents_file(tmp_path, data)}
    )
    check_item(item)
    assert (item["name"], item["parent"], item["kind"], item["size"]) == (name, parent, "file", len(data))
    return item


def work_folder(extension) -> dict:
    """A fresh folder under the root for one test."""
    folder = extension.call(
        "create", {"parent": "root", "name": f"conformance-{uuid.uuid4().hex[:10]}", "kind": "folder"}
    )
    check_item(folder)
    assert folder["kind"] == "folder" and folder["parent"] == "root"
    return folder


def list_all(extension, folder_id: str, page_size: int | None = None) -> list:
    items, page, pages = [], None, 0
    while True:
        params = {"id": folder_id}
        if page is not None:
            params["page"] = page
        if page_size is not None:
            params["pageSize"] = page_size
        answer = extension.call("list", params)
        assert set(answer) >= {"items", "nextPage"}, answer
        if page_size is not None:
            assert len(answer["items"]) <= page_size, "a page holds at most pageSize items"
        assert len(answer["items"]) <= MAX_PAGE_SIZE
        for item in answer["items"]:
            check_item(item)
            assert item["parent"] == folder_id, f"listed under {folder_id}: {item}"
        items += answer["items"]
        pages += 1
        page = answer["nextPage"]
        if page is None:
            return items
        assert isinstance(page, str), "nextPage is a string or null"
        assert pages < 10_000, "paging does not end"


def fetch(extension, item_id: str, **params) -> tuple:
    answer = extension.call("fetch", {"id": item_id, **params})
    data = check_staged(answer["path"], extension.staging)
    assert answer["length"] == len(data), "length is the staged file's size"
    os.unlink(answer["path"])  # the daemon owns it now
    return answer, data


def all_changes(extension, anchor: str) -> tuple:
    updated, deleted = {}, set()
    while True:
        answer = extension.call("changes", {"anchor": anchor})
        assert isinstance(answer["anchor"], str) and isinstance(answer["more"], bool)
        for item in answer["updated"]:
            check_item(item)
            updated[item["id"]] = item
        deleted.update(answer["deleted"])
        anchor = answer["anchor"]
        if not answer["more"]:
            return updated, deleted, anchor


# -- initialize and version negotiation --------------------------------------


def test_initialize_answers_version_and_capabilities(subject):
    extension = subject.launch()
    answer = extension.initialize(options=subject.options)
    assert answer["protocolVersion"] == "1.0", "offered 1.0, a 1.x extension answers 1.0"
    assert isinstance(answer["name"], str) and answer["name"]
    assert isinstance(answer["version"], str)
    capabilities = answer["capabilities"]
    for key, kind in CAPABILITY_TYPES.items():
        assert isinstance(capabilities.get(key), kind), f"capability {key} is a {kind.__name__}"
    assert capabilities["changes"] in ("notify", "poll", "none")
    assert 1 <= capabilities["maxPageSize"] <= MAX_PAGE_SIZE


def test_a_newer_minor_version_is_answered_with_the_extensions_own(subject):
    extension = subject.launch()
    answer = extension.initialize(options=subject.options, version="1.9")
    major, minor = answer["protocolVersion"].split(".")
    assert major == "1" and int(minor) <= 9, "same major, a minor no higher than offered"


def test_minor_versions_compare_as_numbers_and_junk_is_refused(subject):
    extension = subject.launch()
    extension.expect_failure = True
    for junk in ("1", "one.zero", "1.0.0", ""):
        with pytest.raises(RpcError) as raised:
            extension.initialize(options=subject.options, version=junk)
        assert raised.value.code == INVALID_PARAMS, junk
    assert extension.initialize(options=subject.options, version="1.10")["protocolVersion"] in ("1.0", "1.1", "1.2")


def test_an_unknown_major_version_is_refused(subject):
    extension = subject.launch()
    extension.expect_failure = True
    with pytest.raises(RpcError) as raised:
        extension.initialize(options=subject.options, version="2.0")
    assert raised.value.code == UNSUPPORTED_VERSION
    assert any(v.startswith("1.") for v in raised.value.data["supported"]), raised.value.data


def test_requests_before_initialize_are_refused(subject):
    extension = subject.launch()
    assert rpc_error(extension, "item", {"id": "root"}).code == NOT_INITIALIZED
    extension.initialize(options=subject.options)
    assert extension.call("item", {"id": "root"})["id"] == "root"


def test_after_a_shutdown_without_initialize_only_shutdown_is_answered(subject):
    # "After it, every request except shutdown is answered with -32600",
    # also for an extension whose initialize never succeeded.
    extension = subject.launch()
    assert extension.call("shutdown", {}) == {}
    for method in ("item", "initialize"):
        assert rpc_error(extension, method, {"id": "root"}).code == INVALID_REQUEST, method
    extension.notify("exit")
    assert extension.process.wait(5) == 0


# -- items and listing --------------------------------------------------------


def test_the_root_is_a_folder_without_parent(subject):
    extension = subject.spawn()
    root = check_item(extension.call("item", {"id": "root"}))
    assert (root["id"], root["parent"], root["kind"]) == ("root", None, "folder")


def test_an_unknown_id_is_no_such_item(subject):
    extension = subject.spawn()
    assert rpc_error(extension, "item", {"id": "/no/such/item"}).code == NO_SUCH_ITEM
    assert rpc_error(extension, "item", {"id": "i999999999999"}).code == NO_SUCH_ITEM


def test_listing_pages_cover_every_child_once(subject, tmp_path):
    extension = subject.spawn()
    work = work_folder(extension)
    names = {f"file-{n:02}.txt" for n in range(7)} | {"sub"}
    for name in sorted(names - {"sub"}):
        create_file(extension, tmp_path, work["id"], name, name.encode())
    extension.call("create", {"parent": work["id"], "name": "sub", "kind": "folder"})
    for page_size in (3, 1, None):
        listed = list_all(extension, work["id"], page_size)
        assert sorted(item["name"] for item in listed) == sorted(names), f"pageSize {page_size}"
        assert len({item["id"] for item in listed}) == len(names), "ids are distinct"
    for item in listed:
        assert extension.call("item", {"id": item["id"]}) == item, "item and list agree"


def test_listing_a_file_or_a_missing_folder_fails(subject, tmp_path):
    extension = subject.spawn()
    work = work_folder(extension)
    file = create_file(extension, tmp_path, work["id"], "plain.txt", b"x")
    assert rpc_error(extension, "list", {"id": file["id"]}).code == INVALID_PARAMS
    assert rpc_error(extension, "list", {"id": "/missing-folder/"}).code in (NO_SUCH_ITEM, INVALID_PARAMS)


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "nul\0name", "x" * 256, "é" * 128])
def test_names_that_break_the_rules_are_refused(subject, tmp_path, bad):
    extension = subject.spawn()
    work = work_folder(extension)
    error = rpc_error(extension, "create", {"parent": work["id"], "name": bad, "kind": "folder"})
    assert error.code == INVALID_NAME, f"{bad!r}: {error}"
    assert list_all(extension, work["id"]) == []


def test_names_keep_their_unicode_and_the_255_byte_limit(subject, tmp_path):
    extension = subject.spawn()
    work = work_folder(extension)
    for name in ["café ünïcode 日本.txt", "x" * 255, "spaces and 'quotes' \"too\"", "é" * 127 + "x"]:
        create_file(extension, tmp_path, work["id"], name, b"n")
    assert {item["name"] for item in list_all(extension, work["id"])} == {
        "café ünïcode 日本.txt",
        "x" * 255,
        "spaces and 'quotes' \"too\"",
        "é" * 127 + "x",
    }


# -- fetch -----------------------------------------------------------------------


def test_fetch_stages_the_exact_bytes(subject, tmp_path):
    extension = subject.spawn()
    work = work_folder(extension)
    data = os.urandom(300_000)
    item = create_file(extension, tmp_path, work["id"], "data.bin", data)
    answer, staged = fetch(extension, item["id"])
    assert staged == data
    assert (answer["offset"], answer["version"]) == (0, item["version"]["content"])
    empty = create_file(extension, tmp_path, work["id"], "empty", b"")
    assert fetch(extension, empty["id"])[1] == b""


def test_fetch_honours_ranges(subject, tmp_path):
    extension = subject.spawn()
    work = work_folder(extension)
    data = os.urandom(100_000)
    item = create_file(extension, tmp_path, work["id"], "ranged.bin", data)
    for offset, length in [(0, 1), (4096, 4096), (99_000, 1000), (99_990, 50), (100_000, 10)]:
        answer, staged = fetch(extension, item["id"], range={"offset": offset, "length": length})
        end = min(offset + length, len(data))
        if extension.capabilities["ranges"]:
            assert (answer["offset"], staged) == (offset, data[offset:end]), (offset, length)
        else:  # a larger range that covers the requested one is allowed
            assert answer["offset"] <= offset and answer["offset"] + answer["length"] >= end
            assert staged == data[answer["offset"] : answer["offset"] + answer["length"]]


def test_fetch_of_a_version_that_is_gone_is_a_conflict(subject, tmp_path):
    extension = subject.spawn()
    work = work_folder(extension)
    item = create_file(extension, tmp_path, work["id"], "moving.txt", b"one")
    changed = extension.call(
        "modify", {"id": item["id"], "baseVersion": item["version"], "contentsPath": contents_file(tmp_path, b"two!")}
    )
    assert changed["version"]["content"] != item["version"]["content"]
    error = rpc_error(extension, "fetch", {"id": item["id"], "version": item["version"]["content"]})
    assert error.code == CONFLICT
    assert fetch(extension, changed["id"], version=changed["version"]["content"])[1] == b"two!"
    assert os.listdir(extension.staging) == [], "a failed fetch leaves nothing in staging"


def test_fetch_of_a_folder_is_invalid(subject):
    extension = subject.spawn()
    work = work_folder(extension)
    assert rpc_error(extension, "fetch", {"id": work["id"]}).code == INVALID_PARAMS


# -- create, modify, delete with base versions ----------------------------------


def test_create_refuses_an_existing_name(subject, tmp_path):
    extension = subject.spawn()
    work = work_folder(extension)
    create_file(extension, tmp_path, work["id"], "taken", b"1")
    for kind in ("file", "folder"):
        error = rpc_error(extension, "create", {"parent": work["id"], "name": "taken", "kind": kind})
        assert error.code == EXISTS, kind
    extension.call("create", {"parent": work["id"], "name": "dir", "kind": "folder"})
    assert rpc_error(extension, "create", {"parent": work["id"], "name": "dir", "kind": "file"}).code == EXISTS


def test_create_under_a_missing_parent_is_no_such_item(subject):
    extension = subject.spawn()
    error = rpc_error(extension, "create", {"parent": "/gone/", "name": "x", "kind": "folder"})
    assert error.code == NO_SUCH_ITEM


def test_modify_with_the_current_base_replaces_contents(subject, tmp_path):
    extension = subject.spawn()
    work = work_folder(extension)
    item = create_file(extension, tmp_path, work["id"], "doc.txt", b"first")
    changed = check_item(
        extension.call(
            "modify",
            {"id": item["id"], "baseVersion": item["version"], "contentsPath": contents_file(tmp_path, b"second edit")},
        )
    )
    assert changed["size"] == len(b"second edit")
    assert changed["version"]["content"] != item["version"]["content"]
    assert fetch(extension, changed["id"])[1] == b"second edit"


def test_modify_or_delete_with_a_stale_base_is_a_conflict(subject, tmp_path):
    extension = subject.spawn()
    other = subject.spawn()  # another machine changes the item meanwhile
    work = work_folder(extension)
    item = create_file(extension, tmp_path, work["id"], "shared.txt", b"base")
    theirs = other.call(
        "modify", {"id": item["id"], "baseVersion": item["version"], "contentsPath": contents_file(tmp_path, b"theirs")}
    )
    error = rpc_error(
        extension,
        "modify",
        {"id": item["id"], "baseVersion": item["version"], "contentsPath": contents_file(tmp_path, b"mine")},
    )
    assert error.code == CONFLICT
    assert rpc_error(extension, "delete", {"id": item["id"], "baseVersion": item["version"]}).code == CONFLICT
    assert fetch(extension, theirs["id"])[1] == b"theirs", "their change is not overwritten"
    assert extension.call("delete", {"id": theirs["id"], "baseVersion": theirs["version"]}) == {}
    assert rpc_error(extension, "item", {"id": theirs["id"]}).code == NO_SUCH_ITEM
    assert list_all(extension, work["id"]) == []


def test_delete_of_a_folder_with_items_is_not_empty(subject, tmp_path):
    extension = subject.spawn()
    work = work_folder(extension)
    create_file(extension, tmp_path, work["id"], "inside", b"1")
    error = rpc_error(extension, "delete", {"id": work["id"], "baseVersion": work["version"]})
    assert error.code == NOT_EMPTY
    assert extension.call("item", {"id": work["id"]})["kind"] == "folder"


def test_rename_and_move(subject, tmp_path):
    extension = subject.spawn()
    if not extension.capabilities["rename"]:
        pytest.skip(f"{subject.name} declares rename: false")
    work = work_folder(extension)
    target = extension.call("create", {"parent": work["id"], "name": "target", "kind": "folder"})
    item = create_file(extension, tmp_path, work["id"], "old name.txt", b"kept")
    renamed = check_item(
        extension.call("modify", {"id": item["id"], "baseVersion": item["version"], "fields": {"name": "new name.txt"}})
    )
    assert (renamed["name"], renamed["parent"]) == ("new name.txt", work["id"])
    if extension.capabilities.get("renameKeepsId", True):
        assert renamed["id"] == item["id"], "renameKeepsId: the id survives a rename"
    moved = check_item(
        extension.call(
            "modify", {"id": renamed["id"], "baseVersion": renamed["version"], "fields": {"parent": target["id"]}}
        )
    )
    assert moved["parent"] == target["id"]
    assert [child["name"] for child in list_all(extension, target["id"])] == ["new name.txt"]
    assert [child["name"] for child in list_all(extension, work["id"])] == ["target"]
    assert fetch(extension, moved["id"])[1] == b"kept"
    clash = create_file(extension, tmp_path, target["id"], "other", b"o")
    error = rpc_error(
        extension, "modify", {"id": clash["id"], "baseVersion": clash["version"], "fields": {"name": "new name.txt"}}
    )
    assert error.code == EXISTS, "a rename never replaces an item"
    if extension.capabilities.get("renameKeepsId", True):
        stale = rpc_error(
            extension, "modify", {"id": moved["id"], "baseVersion": item["version"], "fields": {"name": "z"}}
        )
        assert stale.code == CONFLICT, "a rename from a stale metadata version is refused"


# -- changes and anchors ----------------------------------------------------------


def test_changes_since_an_anchor_report_what_others_did(subject, tmp_path):
    extension = subject.spawn()
    if extension.capabilities["changes"] == "none":
        pytest.skip(f"{subject.name} declares changes: none")
    other = subject.spawn()
    work = work_folder(extension)
    doomed = create_file(extension, tmp_path, work["id"], "doomed.txt", b"d")
    edited = create_file(extension, tmp_path, work["id"], "edited.txt", b"e")
    anchor = extension.call("currentAnchor", {})["anchor"]
    assert isinstance(anchor, str)
    added = create_file(other, tmp_path, work["id"], "added.txt", b"a")
    other.call("delete", {"id": doomed["id"], "baseVersion": doomed["version"]})
    new_edit = other.call(
        "modify", {"id": edited["id"], "baseVersion": edited["version"], "contentsPath": contents_file(tmp_path, b"E2")}
    )
    updated, deleted, next_anchor = all_changes(extension, anchor)
    assert added["id"] in updated and updated[added["id"]]["name"] == "added.txt"
    assert new_edit["id"] in updated
    assert updated[new_edit["id"]]["version"]["content"] == new_edit["version"]["content"]
    assert doomed["id"] in deleted
    again, deleted_again, _ = all_changes(extension, next_anchor)
    assert added["id"] not in again and doomed["id"] not in deleted_again, "the new anchor is past those changes"


def test_an_unknown_anchor_is_expired(subject):
    extension = subject.spawn()
    if extension.capabilities["changes"] == "none":
        pytest.skip(f"{subject.name} declares changes: none")
    error = rpc_error(extension, "changes", {"anchor": "an anchor this extension never gave"})
    assert error.code == ANCHOR_EXPIRED


def test_anchors_do_not_survive_into_another_process_unless_valid(subject, tmp_path):
    extension = subject.spawn()
    if extension.capabilities["changes"] == "none":
        pytest.skip(f"{subject.name} declares changes: none")
    anchor = extension.call("currentAnchor", {})["anchor"]
    restarted = subject.spawn()
    try:
        restarted.call("changes", {"anchor": anchor})  # a persisted anchor is fine
    except RpcError as error:
        assert error.code == ANCHOR_EXPIRED, "an anchor the process cannot serve is expired, nothing else"


# -- the protocol itself ----------------------------------------------------------


def test_unknown_method_is_method_not_found(subject):
    extension = subject.spawn()
    assert rpc_error(extension, "frobnicate", {}).code == METHOD_NOT_FOUND
    extension.notify("$/unknownNotification", {})  # ignored, no answer
    assert extension.call("item", {"id": "root"})["id"] == "root"


@pytest.mark.parametrize(
    "method, params",
    [
        ("item", {}),
        ("item", {"id": 5}),
        ("list", {"id": "root", "pageSize": "ten"}),
        ("list", {"id": "root", "pageSize": 0}),
        ("fetch", {"id": "root", "range": {"offset": -1, "length": 3}}),
        ("fetch", {"id": "root", "range": {"offset": 0}}),
        ("create", {"parent": "root", "name": "x", "kind": "socket"}),
        ("create", {"parent": "root", "kind": "file"}),
        ("create", {"parent": "root", "name": "x", "kind": "file", "mode": 0o10000}),
        ("create", {"parent": "root", "name": "x", "kind": "file", "mtime": "yesterday"}),
        ("modify", {"id": "root", "baseVersion": {"content": "", "metadata": ""}, "fields": {"mode": "rw"}}),
        ("modify", {"id": "root", "baseVersion": {"content": "", "metadata": ""}, "fields": {"colour": 1}}),
        ("modify", {"id": "root", "fields": {"name": "y"}}),
        ("modify", {"id": "root", "baseVersion": "v1", "fields": {}}),
        ("delete", {"id": "root"}),
        ("changes", {}),
    ],
)
def test_malformed_params_are_invalid_params(subject, method, params):
    extension = subject.spawn()
    assert rpc_error(extension, method, params).code == INVALID_PARAMS


def test_params_that_are_not_an_object_are_invalid(subject):
    extension = subject.spawn()
    request_id = extension.start("item", ["root"])
    assert extension.wait(request_id)["error"]["code"] == INVALID_PARAMS


def test_the_extension_survives_malformed_lines(subject):
    extension = subject.spawn()
    extension.send_raw(b"{this is not json\n")
    extension.send_raw(b"\xff\xfe not utf-8\n")
    extension.send_raw(b"[1, 2, 3]\n")
    extension.send_raw(b'{"jsonrpc": "1.0", "id": null, "method": "item"}\n')
    extension.send_raw(b'{"jsonrpc": "2.0", "id": "x' + b"a" * (MAX_LINE_BYTES + 16) + b'", "method": "item"}\n')
    extension.send_raw(b"[" * 200_000 + b"]" * 200_000 + b"\n")  # nesting deeper than any parser's stack
    answers = extension.wait_untagged(6)
    codes = [answer["error"]["code"] for answer in answers]
    assert len(codes) == 6 and set(codes) <= {PARSE_ERROR, INVALID_REQUEST}, answers
    # Three lines are not JSON, two not JSON-RPC; the deep one may be either.
    assert codes.count(PARSE_ERROR) >= 3 and codes.count(INVALID_REQUEST) >= 2, answers
    assert extension.call("item", {"id": "root"})["id"] == "root", "still answering"


def test_concurrent_requests_are_each_answered_once(subject, tmp_path):
    extension = subject.spawn()
    work = work_folder(extension)
    data = os.urandom(50_000)
    item = create_file(extension, tmp_path, work["id"], "c.bin", data)
    pending = {}
    for n in range(8):
        pending[extension.start("fetch", {"id": item["id"], "range": {"offset": n * 1000, "length": 1000}})] = n
        pending[extension.start("item", {"id": item["id"]})] = None
        pending[extension.start("list", {"id": work["id"]})] = None
    pending[extension.start("item", {"id": "no such"}, request_id="string-id")] = None
    for request_id, n in pending.items():
        response = extension.wait(request_id)
        if request_id == "string-id":
            assert response["error"]["code"] == NO_SUCH_ITEM
        elif n is not None:
            assert check_staged(response["result"]["path"], extension.staging) == data[n * 1000 : n * 1000 + 1000]
            os.unlink(response["result"]["path"])
        else:
            assert "result" in response, response


def test_cancel_ends_a_request_with_cancelled_or_its_result(subject, tmp_path):
    extension = subject.spawn()
    work = work_folder(extension)
    item = create_file(extension, tmp_path, work["id"], "big.bin", os.urandom(8 << 20))
    request_id = extension.start("fetch", {"id": item["id"]})
    extension.notify("$/cancel", {"id": request_id})
    response = extension.wait(request_id)
    if "error" in response:
        assert response["error"]["code"] == CANCELLED, response
        assert os.listdir(extension.staging) == [], "a cancelled fetch leaves nothing in staging"
    else:
        os.unlink(response["result"]["path"])  # it finished before the cancel arrived: allowed
    extension.notify("$/cancel", {"id": 424242})  # unknown id: ignored
    assert extension.call("item", {"id": "root"})["id"] == "root"


def test_shutdown_then_exit_ends_the_process_with_status_zero(subject):
    extension = subject.spawn()
    assert extension.call("shutdown", {}) == {}
    assert rpc_error(extension, "item", {"id": "root"}).code == INVALID_REQUEST, "nothing but exit after shutdown"
    extension.notify("exit")
    assert extension.process.wait(5) == 0


def test_requests_in_flight_are_answered_before_shutdown(subject, tmp_path):
    extension = subject.spawn()
    work = work_folder(extension)
    item = create_file(extension, tmp_path, work["id"], "f.bin", os.urandom(200_000))
    in_flight = [extension.start("fetch", {"id": item["id"]}) for _ in range(12)]
    in_flight += [extension.start("list", {"id": work["id"]}) for _ in range(12)]
    shutdown = extension.start("shutdown", {})
    extension.wait(shutdown)
    order = extension.answer_order
    for request_id in in_flight:
        assert request_id in order, f"request {request_id} was never answered"
        assert order.index(request_id) < order.index(shutdown), "answered before shutdown's answer"
        response = extension.wait(request_id)
        if "error" in response:
            assert response["error"]["code"] == CANCELLED, response
        elif "path" in response["result"]:
            os.unlink(response["result"]["path"])
    extension.notify("exit")
    assert extension.process.wait(5) == 0


# -- what the daemon relies on (issue 47) ----------------------------------------


def test_fetch_is_never_short_of_the_range(subject, tmp_path):
    """A fetch answer holds every byte asked for within the item (cut only
    at its end): a shorter one, even with an honest `length`, is an error
    for the app's read (EIO), and large ranges are where a store's partial
    reads show."""
    extension = subject.spawn()
    work = work_folder(extension)
    data = os.urandom(5 << 20)
    item = create_file(extension, tmp_path, work["id"], "short.bin", data)
    for offset, length in [(0, 5 << 20), ((1 << 20) + 17, 3 << 20), (4 << 20, 2 << 20), (len(data) - 1, 4096)]:
        answer, staged = fetch(extension, item["id"], range={"offset": offset, "length": length})
        end = min(offset + length, len(data))
        assert answer["offset"] <= offset, (offset, length, answer)
        assert answer["offset"] + answer["length"] >= end, f"a short answer for {offset}+{length}: {answer}"
        assert staged == data[answer["offset"] : answer["offset"] + answer["length"]]


def test_fetch_progress_counts_the_range_and_names_the_staged_file(subject, tmp_path):
    """`$/progress` of a fetch (a sign of life for the stall limit): for a
    range, `total` is the range's length (cut at the item's end) and
    `completed` the bytes of it staged so far, never more, never going
    back. With `streamsFetch` (1.1) it names the staged file the answer
    will name, at the answer's offset, and its first `completed` bytes are
    the item's: the daemon hands them to readers before the answer."""
    extension = subject.spawn(version="1.1")
    work = work_folder(extension)
    data = os.urandom(6 << 20)
    item = create_file(extension, tmp_path, work["id"], "progress.bin", data)
    offset, length = 1 << 20, 8 << 20
    request_id = extension.start("fetch", {"id": item["id"], "range": {"offset": offset, "length": length}})
    answer = extension.wait(request_id)["result"]
    staged = check_staged(answer["path"], extension.staging)
    os.unlink(answer["path"])
    assert staged == data[answer["offset"] : answer["offset"] + answer["length"]]
    progress = [n["params"] for n in extension.notifications if n["method"] == "$/progress"]
    progress = [p for p in progress if p.get("id") == request_id]
    done = [p["completed"] for p in progress]
    assert done == sorted(done), f"completed went back: {done}"
    if extension.capabilities.get("ranges"):
        assert all(p["total"] == len(data) - offset and p["completed"] <= p["total"] for p in progress), progress
    if not extension.capabilities.get("streamsFetch"):
        return
    named = [p["staged"] for p in progress if "staged" in p]
    assert named, "an extension with streamsFetch names its staged file in $/progress"
    assert all(s == {"path": answer["path"], "offset": answer["offset"]} for s in named), (named, answer)


def test_changed_is_sent_when_another_process_changes_the_store(subject, tmp_path):
    """`changes: "notify"` promises `changed` when the store changed: the
    daemon polls such an extension only every 30 s, so without the signal
    apps see remote edits late. The signal is a notification (no id) with
    an object for params."""
    extension = subject.spawn()
    if extension.capabilities["changes"] != "notify":
        pytest.skip(f"{subject.name} declares changes: {extension.capabilities['changes']}")
    other = subject.spawn()
    work = work_folder(other)
    create_file(other, tmp_path, work["id"], "signalled.txt", b"s")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if any(n["method"] == "changed" for n in extension.notifications):
            return
        time.sleep(0.1)
    pytest.fail("no `changed` within 10 s of a change made by another process")


def test_a_change_sent_again_after_a_lost_answer_meets_its_first_copy(subject, tmp_path):
    """The daemon sends a create, modify or delete again when its answer
    was lost (the network, a crash): the store must not apply it twice.
    A create again is `exists` and the item listed holds its content; a
    modify again from the old base is `conflict`, and `item` and `fetch`
    then show the first one's version and bytes (the daemon compares them
    with its own, and keeps no conflict copy of its own edit); a delete
    again is `noSuchItem`."""
    extension = subject.spawn()
    work = work_folder(extension)
    created = create_file(extension, tmp_path, work["id"], "sent-twice.txt", b"one")
    again = rpc_error(
        extension,
        "create",
        {
            "parent": work["id"],
            "name": "sent-twice.txt",
            "kind": "file",
            "contentsPath": contents_file(tmp_path, b"one"),
        },
    )
    assert again.code == EXISTS
    listed = [child for child in list_all(extension, work["id"]) if child["name"] == "sent-twice.txt"]
    assert len(listed) == 1 and fetch(extension, listed[0]["id"])[1] == b"one"
    edit = contents_file(tmp_path, b"two, edited")
    first = extension.call("modify", {"id": created["id"], "baseVersion": created["version"], "contentsPath": edit})
    resent = rpc_error(
        extension, "modify", {"id": created["id"], "baseVersion": created["version"], "contentsPath": edit}
    )
    assert resent.code == CONFLICT, "a modify from a base the store has left is refused, not applied again"
    current = extension.call("item", {"id": first["id"]})
    assert current["version"]["content"] == first["version"]["content"]
    assert fetch(extension, first["id"], version=first["version"]["content"])[1] == b"two, edited"
    extension.call("delete", {"id": first["id"], "baseVersion": first["version"]})
    gone = rpc_error(extension, "delete", {"id": first["id"], "baseVersion": first["version"]})
    assert gone.code == NO_SUCH_ITEM
