"""pytest configuration for the ScopeFS real-mount integration suite.

- Every test here is marked `integration` and needs /dev/fuse. The suite is
  skipped (with a reason) only when /dev/fuse is missing; when /dev/fuse is
  present, a missing binary or a broken mount is a failure, never a skip.
- Each test body runs under a per-test alarm (SCOPEFS_IT_TEST_TIMEOUT,
  default 120 s), and the whole session under a time budget
  (SCOPEFS_IT_BUDGET, default 540 s): once it is spent, the remaining tests
  fail fast instead of running the session past 10 minutes.
- The pytest process becomes a child subreaper, so the daemon that
  `scopefs mount` leaves running in the background is our child and the
  `env` fixture can check that it exits with status 0.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from remote_fixtures import remotes, s3_remote, sftp_remote, webdav_remote  # noqa: F401 - fixtures
from scopefs_harness import (
    FUSE_DEVICE,
    REPO_ROOT,
    STORE,
    Env,
    describe,
    fresh_world,
    mounts_under,
    run_bounded,
    set_child_subreaper,
)

HERE = Path(__file__).resolve().parent
TEST_TIMEOUT = int(os.environ.get("SCOPEFS_IT_TEST_TIMEOUT", "120"))
SESSION_BUDGET = int(os.environ.get("SCOPEFS_IT_BUDGET", "540"))
DEB_BUILD_TIMEOUT = 1200
_session_start = time.monotonic()


def pytest_configure(config):
    config.addinivalue_line("markers", "integration: real-mount ScopeFS test through /dev/fuse")
    config.addinivalue_line(
        "markers", "scopefs_timeout(seconds): per-test body timeout instead of SCOPEFS_IT_TEST_TIMEOUT"
    )
    config.addinivalue_line(
        "markers",
        "sqlite_store(reason): about what only the SQLite store does (its file, item relocation, "
        "session grants...); skipped, with the reason, when the suite runs on the fleet's store",
    )
    set_child_subreaper()


def pytest_collection_modifyitems(config, items):
    fuse_missing = not os.path.exists(FUSE_DEVICE)
    for item in items:
        if HERE not in Path(str(item.fspath)).resolve().parents:
            continue
        item.add_marker(pytest.mark.integration)
        sqlite_only = item.get_closest_marker("sqlite_store")
        if STORE == "postgresql" and sqlite_only:
            item.add_marker(pytest.mark.skip(reason="the SQLite store's alone: " + sqlite_only.args[0]))
        if fuse_missing:
            item.add_marker(
                pytest.mark.skip(reason=f"{FUSE_DEVICE} is missing: ScopeFS integration tests need a real FUSE mount")
            )


def pytest_runtest_setup(item):
    spent = time.monotonic() - _session_start
    if spent > SESSION_BUDGET:
        pytest.fail(
            f"session time budget of {SESSION_BUDGET}s spent ({spent:.0f}s); the suite must stay well under 10 minutes"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Fail a test body that runs longer than TEST_TIMEOUT, or the seconds of
    its `scopefs_timeout` marker (teardown is not covered: it has its own
    bounded timeouts and must always run)."""
    marker = item.get_closest_marker("scopefs_timeout")
    limit = int(marker.args[0]) if marker else TEST_TIMEOUT

    def on_alarm(signum, frame):
        pytest.fail(f"test body exceeded {limit}s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(limit)
    try:
        return (yield)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def pytest_sessionfinish(session, exitstatus):
    """Safety net: no mount may survive under a temp dir this session made."""
    leftovers = [m for root in Env.created for m in mounts_under(root)]
    if leftovers:
        session.config.get_terminal_writer().line(
            f"ScopeFS integration: LEFTOVER MOUNTS after the session: {leftovers}", red=True
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def env():
    """A fresh ScopeFS world (`scopefs_harness.fresh_world`); tests call
    env.grant(...) and env.mount(...)."""
    yield from fresh_world()


@pytest.fixture(scope="session")
def deb(tmp_path_factory) -> Path:
    """The Debian package (`make deb CONFIG=debug`, a few minutes less than a
    release build in CI), built once for test_package.py and
    test_fresh_debian.py; SCOPEFS_DEB names a ready one instead."""
    given = os.environ.get("SCOPEFS_DEB")
    if given:
        return Path(given)
    version = re.search(
        r'static let package = "([^"]+)"', (REPO_ROOT / "Sources/ScopeFSCLI/Version.swift").read_text()
    ).group(1)
    p = run_bounded(
        ["make", "-C", REPO_ROOT, "deb", "CONFIG=debug"],
        DEB_BUILD_TIMEOUT,
        dict(os.environ),
        out_dir=tmp_path_factory.mktemp("deb-build"),
        what="make deb CONFIG=debug",
    )
    assert p.returncode == 0, "make deb failed\n" + describe(p)
    built = REPO_ROOT / ".build" / "dist" / f"scopefs_{version}_amd64.deb"
    assert built.is_file(), describe(p)
    return built
