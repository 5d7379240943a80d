"""The harness's one wait (issue 30): wait_for returns the value that met
the condition, and on timeout fails naming what it awaited and the last
value it saw, after the timeout and not much later. No mount needed."""

from __future__ import annotations

import itertools
import time

import pytest
from scopefs_harness import WaitTimeout, wait_for


def test_wait_for_returns_the_value_that_met_the_condition():
    counter = itertools.count()
    assert wait_for("the counter to reach 3", lambda: next(counter), lambda n: n >= 3, interval=0.01) == 3


def test_wait_for_fails_naming_what_it_awaited_and_the_last_value_seen():
    counter = itertools.count()
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as failure:
        wait_for("the counter to go negative", lambda: next(counter), lambda n: n < 0, timeout=0.3, interval=0.05)
    took = time.monotonic() - started
    message = str(failure.value)
    assert "timed out after 0.3 s waiting for the counter to go negative" in message, message
    assert f"last value seen: {failure.value.last}" in message and failure.value.last >= 4, message
    assert 0.3 <= took < 1.5, took


def test_wait_for_describes_on_failure_only():
    described = []

    def what() -> str:
        described.append(True)
        return "a state described late"

    assert wait_for(what, lambda: "ready") == "ready" and described == []
    with pytest.raises(WaitTimeout, match="waiting for a state described late; last value seen: ''"):
        wait_for(what, lambda: "", timeout=0.1, interval=0.02)
