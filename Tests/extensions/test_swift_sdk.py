"""The Swift SDK's loop (clients/swift/Sources/ScopeFSExtension), through
its folder example as a real child process: what the conformance suite
allows without requiring, and the life cycle's exit statuses
(docs/PROVIDERS.md "Life cycle", "Notifications").
"""

from __future__ import annotations

import os

import pytest
from conformance import ExtensionProcess, check_staged
from conftest import SWIFT_FOLDER_EXTENSION


@pytest.fixture
def launch(tmp_path):
    if not SWIFT_FOLDER_EXTENSION.is_file():
        pytest.fail(f"{SWIFT_FOLDER_EXTENSION} is missing: run `swift build` (make test-extensions does)")
    root = tmp_path / "root"
    root.mkdir()
    staging = tmp_path / "staging"
    staging.mkdir()

    def start():
        return ExtensionProcess([str(SWIFT_FOLDER_EXTENSION), str(root)], staging, tmp_path / "swift.log"), root

    return start


def test_a_long_fetch_reports_progress_up_to_its_length(launch):
    process, root = launch()
    process.initialize()
    data = os.urandom(6 << 20)
    (root / "big.bin").write_bytes(data)
    item = process.call("list", {"id": "root"})["items"][0]
    request_id = process.start("fetch", {"id": item["id"]})
    answer = process.wait(request_id)["result"]
    assert check_staged(answer["path"], process.staging) == data
    os.unlink(answer["path"])
    progress = [n["params"] for n in process.notifications if n["method"] == "$/progress"]
    assert progress and all(p["id"] == request_id and p["total"] == len(data) for p in progress), progress
    assert progress[-1]["completed"] == len(data), "the last progress is the whole length"
    assert process.shutdown() == 0 and process.violations == []


def test_exit_without_shutdown_or_a_lost_daemon_is_status_one(launch):
    process, _ = launch()
    process.initialize()
    process.notify("exit")
    assert process.process.wait(5) == 1
    lost, _ = launch()
    lost.initialize()
    lost.process.stdin.close()  # the daemon is gone: end of input
    assert lost.process.wait(5) == 1
    for each in (process, lost):
        each.expect_failure = True
        assert each.violations == []


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24


def test_previews_saved_with_a_document_are_served_by_thumbnail(launch, tmp_path):
    """Protocol 1.2 (SPEC S50, issue 53) in the Swift SDK: offered 1.2, the
    folder example answers 1.2 with `thumbnails`; `thumbnailPath` of
    `create` and `modify` is kept where no listing shows it, `thumbnail`
    serves it staged, and answers null for a file without one."""
    process, root = launch()
    answer = process.initialize(version="1.2")
    assert answer["protocolVersion"] == "1.2" and answer["capabilities"]["thumbnails"] is True, answer
    (root / "plain.txt").write_bytes(b"no preview\n")
    [plain] = process.call("list", {"id": "root"})["items"]
    assert process.call("thumbnail", {"id": plain["id"], "size": 256}) is None
    preview = tmp_path / "preview.png"
    preview.write_bytes(PNG)
    contents = tmp_path / "drawing"
    contents.write_bytes(b"a drawing\n")
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
    served = process.call("thumbnail", {"id": made["id"], "size": 256})
    assert check_staged(served["path"], process.staging) == PNG and served["length"] == len(PNG)
    os.unlink(served["path"])
    names = sorted(item["name"] for item in process.call("list", {"id": "root"})["items"])
    assert names == ["drawing.txt", "plain.txt"], "the kept previews are in no listing"
    again = PNG + b"second"
    preview.write_bytes(again)
    process.call("modify", {"id": made["id"], "baseVersion": made["version"], "thumbnailPath": str(preview)})
    served = process.call("thumbnail", {"id": made["id"], "size": 256})
    assert check_staged(served["path"], process.staging) == again
    os.unlink(served["path"])
    assert process.shutdown() == 0 and process.violations == []


def test_a_daemon_of_1_0_gets_1_0(launch):
    """Negotiation (docs/PROVIDERS.md "Versions"): offered 1.0, the 1.2 SDK
    answers 1.0 and the daemon never calls `thumbnail`."""
    process, _ = launch()
    assert process.initialize(version="1.0")["protocolVersion"] == "1.0"
    assert process.shutdown() == 0 and process.violations == []
