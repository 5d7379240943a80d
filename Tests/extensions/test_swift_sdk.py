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
