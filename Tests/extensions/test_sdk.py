"""The Python SDK's loop (clients/python/scopefs_extension.py), for real.

A child process on the SDK (slow_extension.py) whose requests take as long
as the test asks shows what the conformance suite can only allow: requests
run concurrently and are answered out of order, ``$/cancel`` ends a request
in flight with ``cancelled``, progress is reported while it runs, stray
prints stay off the protocol's stream, a failing handler costs one request
and not the loop, and the exit status tells a clean shutdown from a lost
daemon (docs/PROVIDERS.md "Life cycle").
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from conformance import CANCELLED, ExtensionProcess

SLOW = Path(__file__).resolve().parent / "slow_extension.py"
INTERNAL_ERROR = -32603


@pytest.fixture
def slow(tmp_path):
    staging = tmp_path / "staging"
    staging.mkdir()
    process = ExtensionProcess([sys.executable, str(SLOW)], staging, tmp_path / "slow.log")
    process.initialize()
    yield process
    assert process.shutdown() == 0
    assert process.violations == [], "stray output reached the protocol's stream"


def test_requests_run_concurrently_and_are_answered_out_of_order(slow):
    started = time.monotonic()
    first = slow.start("item", {"id": "sleep:1.0"})
    second = slow.start("item", {"id": "sleep:1.0"})
    quick = slow.start("item", {"id": "sleep:0"})
    for request_id in (first, second, quick):
        assert "result" in slow.wait(request_id)
    assert slow.answer_order[-3] == quick, "the quick request overtakes the slow ones"
    assert time.monotonic() - started < 1.9, "the two slow requests ran at the same time"


def test_cancel_ends_a_request_in_flight_with_cancelled(slow):
    request_id = slow.start("fetch", {"id": "slow"})
    deadline = time.monotonic() + 10
    while not any(n["method"] == "$/progress" and n["params"]["id"] == request_id for n in slow.notifications):
        assert time.monotonic() < deadline, "no progress reported"
        time.sleep(0.02)
    progress = [n["params"] for n in slow.notifications if n["method"] == "$/progress"]
    assert all(isinstance(p["completed"], int) and p["total"] == 1_000_000 for p in progress)
    cancelled_at = time.monotonic()
    slow.notify("$/cancel", {"id": request_id})
    response = slow.wait(request_id, timeout=5)
    assert response["error"]["code"] == CANCELLED
    assert time.monotonic() - cancelled_at < 1.0, "cancellation is prompt"


def test_a_failing_handler_costs_one_request(slow):
    response = slow.wait(slow.start("item", {"id": "crash"}))
    assert response["error"]["code"] == INTERNAL_ERROR
    assert slow.call("item", {"id": "sleep:0"})["id"] == "sleep:0"
    assert "an unexpected failure" in slow.log_tail(), "the failure is in the extension's log"


def test_changed_and_log_notifications_reach_the_daemon(slow):
    slow.call("item", {"id": "announce"})
    methods = [(n["method"], n["params"]) for n in slow.notifications]
    assert ("log", {"level": "info", "message": "the store changed"}) in methods
    assert ("changed", {}) in methods


def test_exit_without_shutdown_or_lost_stdin_exits_nonzero(tmp_path):
    for ending in ("exit", "eof"):
        staging = tmp_path / f"staging-{ending}"
        staging.mkdir()
        process = ExtensionProcess([sys.executable, str(SLOW)], staging, tmp_path / f"{ending}.log")
        process.initialize()
        if ending == "exit":
            process.notify("exit")
        else:
            process.process.stdin.close()
        assert process.process.wait(5) == 1, ending
        process.kill()


def test_the_error_table_of_providers_md_is_the_sdks():
    """docs/PROVIDERS.md's error table, the SDK's exceptions and the suite's
    constants name the same codes."""
    import re

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))
    import conformance
    import scopefs_extension

    doc = (Path(__file__).resolve().parents[2] / "docs" / "PROVIDERS.md").read_text()
    documented = {int(code): name for code, name in re.findall(r"^\| (-320\d\d) \| `(\w+)` \|", doc, re.MULTILINE)}
    sdk = {code: cls.name for code, cls in scopefs_extension.ERRORS_BY_CODE.items()}
    assert documented == sdk
    suite = {
        getattr(conformance, constant): constant
        for constant in dir(conformance)
        if constant.isupper()
        and isinstance(getattr(conformance, constant), int)
        and -32099 <= getattr(conformance, constant) <= -32000
    }
    for code, constant in suite.items():
        assert constant.replace("_", "").lower() == documented[code].lower(), (code, constant)


def test_the_error_table_of_providers_md_is_the_swift_sdks():
    """The Swift SDK's codes (ExtensionError.Code, Apple's names where they
    match) carry docs/PROVIDERS.md's codes under the documented names."""
    import re

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "PROVIDERS.md").read_text()
    documented = {int(code): name for code, name in re.findall(r"^\| (-320\d\d) \| `(\w+)` \|", doc, re.MULTILINE)}
    source = (root / "clients" / "swift" / "Sources" / "ScopeFSExtension" / "ExtensionError.swift").read_text()
    cases = {name: int(code) for name, code in re.findall(r"case (\w+) = (-320\d\d)\b", source)}
    wire_names = dict(re.findall(r'case \.(\w+): return "(\w+)"', source))
    swift = {code: wire_names.get(name, name) for name, code in cases.items() if -32099 <= code <= -32000}
    assert swift == documented
