"""The S3 extension against moto's S3 server: what the conformance suite
cannot see from the protocol alone (extensions/s3/scopefs_s3.py,
docs/PROVIDERS.md "S3").

Objects are written behind the extension's back with boto3, as another
machine would; the store answers 412 to a stale If-Match, and the extension
turns that into a conflict without overwriting.
"""

from __future__ import annotations

import sys
import uuid

import boto3
import pytest
from conformance import (
    CONFLICT,
    EXISTS,
    INVALID_PARAMS,
    NO_SUCH_ITEM,
    ExtensionProcess,
    RpcError,
    check_item,
    check_staged,
)
from conftest import BUCKET, S3_EXTENSION, free_port

UNREACHABLE = -32004


@pytest.fixture
def store(moto_server, s3_environment):
    client = boto3.client(
        "s3",
        endpoint_url=moto_server,
        aws_access_key_id="conformance",
        aws_secret_access_key="conformance",
        region_name="us-east-1",
    )
    return client, f"s3test-{uuid.uuid4().hex[:10]}/"


@pytest.fixture
def launch(tmp_path, s3_environment, moto_server):
    processes = []

    def start(**options):
        staging = tmp_path / f"staging-{len(processes)}"
        staging.mkdir()
        process = ExtensionProcess(
            [sys.executable, str(S3_EXTENSION)], staging, tmp_path / f"s3-{len(processes)}.log", s3_environment
        )
        processes.append(process)
        return process, {"bucket": BUCKET, "endpointUrl": moto_server, **options}

    yield start
    for process in processes:
        process.shutdown()
        assert process.violations == []


def initialized(launch, **options):
    process, options = launch(**options)
    process.initialize(options=options)
    return process


def names(process, folder_id):
    return sorted(item["name"] for item in process.call("list", {"id": folder_id})["items"])


def test_initialize_reports_a_missing_bucket_option_and_an_unreachable_store(launch):
    process, options = launch()
    del options["bucket"]
    with pytest.raises(RpcError) as raised:
        process.initialize(options=options)
    assert raised.value.code == INVALID_PARAMS
    process, options = launch(endpointUrl=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(RpcError) as raised:
        process.call(
            "initialize",
            {"protocolVersion": "1.0", "providerId": "p", "stagingDirectory": str(process.staging), "options": options},
            timeout=60,
        )
    assert raised.value.code == UNREACHABLE
    process, options = launch(bucket="no-such-bucket-here")
    with pytest.raises(RpcError) as raised:
        process.initialize(options=options)
    assert raised.value.code == NO_SUCH_ITEM


def test_keys_written_elsewhere_show_as_items_and_implicit_folders(launch, store):
    client, prefix = store
    for key in ["a/b/c.txt", "top.txt", "x//double-slash", "dots/../escape", "dot/./here", "marker/"]:
        client.put_object(Bucket=BUCKET, Key=prefix + key, Body=key.encode())
    client.put_object(Bucket=BUCKET, Key="outside-the-prefix.txt", Body=b"no")
    process = initialized(launch, prefix=prefix)
    assert names(process, "root") == ["a", "dot", "dots", "marker", "top.txt", "x"]
    assert names(process, "/a/") == ["b"]
    assert names(process, "/a/b/") == ["c.txt"]
    assert names(process, "/x/") == [], "a key with an empty component is not served"
    assert names(process, "/dots/") == [] and names(process, "/dot/") == [], "'.' and '..' are not served"
    item = check_item(process.call("item", {"id": "/a/b/c.txt"}))
    assert (item["parent"], item["size"]) == ("/a/b/", len(b"a/b/c.txt"))
    answer = process.call("fetch", {"id": "/a/b/c.txt"})
    assert check_staged(answer["path"], process.staging) == b"a/b/c.txt"
    with pytest.raises(RpcError) as raised:
        process.call("item", {"id": "/x//double-slash"})
    assert raised.value.code == NO_SUCH_ITEM


def test_a_change_made_elsewhere_is_a_conflict_not_an_overwrite(launch, store, tmp_path):
    client, prefix = store
    client.put_object(Bucket=BUCKET, Key=prefix + "doc.txt", Body=b"base")
    process = initialized(launch, prefix=prefix)
    base = process.call("item", {"id": "/doc.txt"})
    client.put_object(Bucket=BUCKET, Key=prefix + "doc.txt", Body=b"their edit")
    mine = tmp_path / "mine"
    mine.write_bytes(b"my edit")
    for method, params in [
        ("modify", {"id": "/doc.txt", "baseVersion": base["version"], "contentsPath": str(mine)}),
        ("modify", {"id": "/doc.txt", "baseVersion": base["version"], "fields": {"name": "renamed.txt"}}),
        ("delete", {"id": "/doc.txt", "baseVersion": base["version"]}),
    ]:
        with pytest.raises(RpcError) as raised:
            process.call(method, params)
        assert raised.value.code == CONFLICT, method
    assert client.get_object(Bucket=BUCKET, Key=prefix + "doc.txt")["Body"].read() == b"their edit"
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]
    assert [entry["Key"] for entry in listed] == [prefix + "doc.txt"], "no copy left behind by the refused rename"


def test_rename_copies_to_the_new_key_and_deletes_the_old(launch, store):
    client, prefix = store
    client.put_object(Bucket=BUCKET, Key=prefix + "old.txt", Body=b"contents")
    client.put_object(Bucket=BUCKET, Key=prefix + "dir/", Body=b"")
    process = initialized(launch, prefix=prefix)
    item = process.call("item", {"id": "/old.txt"})
    moved = process.call(
        "modify", {"id": "/old.txt", "baseVersion": item["version"], "fields": {"name": "new.txt", "parent": "/dir/"}}
    )
    assert moved["id"] == "/dir/new.txt", "ids are keys: a rename gives a new id"
    keys = sorted(entry["Key"] for entry in client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"])
    assert keys == [prefix + "dir/", prefix + "dir/new.txt"]
    assert client.get_object(Bucket=BUCKET, Key=prefix + "dir/new.txt")["Body"].read() == b"contents"


def test_changes_poll_sees_writes_made_elsewhere(launch, store):
    client, prefix = store
    client.put_object(Bucket=BUCKET, Key=prefix + "gone.txt", Body=b"g")
    process = initialized(launch, prefix=prefix)
    anchor = process.call("currentAnchor", {})["anchor"]
    client.put_object(Bucket=BUCKET, Key=prefix + "new/deep.txt", Body=b"n")
    client.delete_object(Bucket=BUCKET, Key=prefix + "gone.txt")
    changes = process.call("changes", {"anchor": anchor})
    assert {item["id"] for item in changes["updated"]} == {"/new/", "/new/deep.txt"}
    assert changes["deleted"] == ["/gone.txt"]


def test_create_checks_names_against_the_folders_of_the_last_snapshot(launch, store, tmp_path):
    """A new file "x" where a folder "x/" exists is `exists`, with the
    folders known from the last `currentAnchor` (no listing per create,
    docs/PROVIDERS.md "S3"); a folder made through the extension since is
    known too, and a parent made elsewhere since is still found."""
    client, prefix = store
    client.put_object(Bucket=BUCKET, Key=prefix + "seen/inside.txt", Body=b"1")
    process = initialized(launch, prefix=prefix)
    process.call("currentAnchor", {})
    body = tmp_path / "body"
    body.write_bytes(b"new")
    with pytest.raises(RpcError) as raised:
        process.call("create", {"parent": "root", "name": "seen", "kind": "file", "contentsPath": str(body)})
    assert raised.value.code == EXISTS
    made = process.call("create", {"parent": "root", "name": "made", "kind": "folder"})
    with pytest.raises(RpcError) as raised:
        process.call("create", {"parent": "root", "name": "made", "kind": "file", "contentsPath": str(body)})
    assert raised.value.code == EXISTS
    inside = process.call("create", {"parent": made["id"], "name": "a.txt", "kind": "file", "contentsPath": str(body)})
    assert client.get_object(Bucket=BUCKET, Key=prefix + "made/a.txt")["Body"].read() == b"new", inside
    client.put_object(Bucket=BUCKET, Key=prefix + "later/x.txt", Body=b"2")
    process.call("create", {"parent": "/later/", "name": "y.txt", "kind": "file", "contentsPath": str(body)})
    with pytest.raises(RpcError) as raised:
        process.call("create", {"parent": "/never/", "name": "z.txt", "kind": "file", "contentsPath": str(body)})
    assert raised.value.code == NO_SUCH_ITEM


def test_a_saved_preview_is_an_object_beside_the_document_and_served_by_thumbnail(launch, store, tmp_path):
    """Protocol 1.2 (SPEC S50): `thumbnailPath` of create is kept as an
    object under the extension's own prefix, which no listing shows;
    `thumbnail` serves it staged, and answers null for a document without."""
    client, prefix = store
    client.put_object(Bucket=BUCKET, Key=prefix + "plain.txt", Body=b"no preview")
    process = initialized(launch, prefix=prefix)
    contents, preview = tmp_path / "contents", tmp_path / "preview.png"
    contents.write_bytes(b"a drawing")
    preview.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    made = process.call(
        "create",
        {
            "parent": "root",
            "name": "drawing.txt",
            "kind": "file",
            "contentsPath": str(contents),
            "thumbnailPath": str(preview),
        },
    )
    answer = process.call("thumbnail", {"id": made["id"], "size": 256})
    assert answer["length"] == len(preview.read_bytes())
    assert check_staged(answer["path"], process.staging) == preview.read_bytes()
    assert process.call("thumbnail", {"id": "/plain.txt", "size": 256}) is None
    assert names(process, "root") == ["drawing.txt", "plain.txt"], "the previews' prefix is listed"
    stored = client.get_object(Bucket=BUCKET, Key=prefix + ".scopefs-thumbnails/drawing.txt.png")["Body"].read()
    assert stored == preview.read_bytes()
