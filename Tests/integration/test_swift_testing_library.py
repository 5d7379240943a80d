"""ScopeFSTesting, the Swift testing helper library (issue 18,
clients/swift/Sources/ScopeFSTesting): its runnable example in
docs/examples/swift-testing passes under `swift test` (Swift Testing and
XCTest, each test in a mount of its own, the app revoked (sandboxed too),
restored, its document renamed on the host, a fault injected); the same tests FAIL
against the buggy variant of the example app, which caches a descriptor
and crashes on the EPERM of a revocation (a library that cannot fail
proves nothing); and every mount is gone afterwards, failed tests
included.

The example package builds into REPO/.build-swift-testing-example
(git-ignored), once per session, before the per-test alarm; the cases
skip, with a reason, when no `swift` is found (SWIFT=/path/to/swift
overrides the PATH lookup), as the Swift cases of test_clients.py do.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from scopefs_harness import REPO_ROOT, describe, mounts_under, run_bounded

EXAMPLE = REPO_ROOT / "docs" / "examples" / "swift-testing"
SCRATCH = REPO_ROOT / ".build-swift-testing-example"
CLIENT = REPO_ROOT / "clients" / "swift"
BUILD_TIMEOUT = 1200  # a cold build of the example and the client takes minutes
RUN_TIMEOUT = 400


def _swift() -> str:
    swift = os.environ.get("SWIFT") or shutil.which("swift")
    if not swift:
        pytest.skip("no `swift` on PATH (set SWIFT=/path/to/swift): ScopeFSTesting needs a Swift toolchain")
    return swift


def _swift_env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONFAULTHANDLER", None)
    return env


@pytest.fixture(scope="module")
def example_built(tmp_path_factory) -> None:
    """`swift build --build-tests` of the example package: the reader app
    and its test bundle, against clients/swift by path."""
    argv = [_swift(), "build", "--build-tests", "--package-path", EXAMPLE, "--scratch-path", SCRATCH]
    out = tmp_path_factory.mktemp("swift-testing-build")
    p = run_bounded(argv, BUILD_TIMEOUT, _swift_env(), out_dir=out, what="swift build of docs/examples/swift-testing")
    assert p.returncode == 0, "building docs/examples/swift-testing failed\n" + describe(p)


def swift_test(env, *args, **extra_env) -> subprocess.CompletedProcess:
    """`swift test` of the example, as built, against this scopefs; its
    mounts' temporary directories under the test's root (so leftovers are
    found there)."""
    run_env = dict(_swift_env(), SCOPEFS_BIN=str(env.bin), TMPDIR=str(env.root), **extra_env)
    argv = [_swift(), "test", "--skip-build", "--package-path", EXAMPLE, "--scratch-path", SCRATCH, *args]
    out = env.root / "swift-test-output"
    out.mkdir(exist_ok=True)
    return run_bounded(argv, RUN_TIMEOUT, run_env, out_dir=out, what="swift test of docs/examples/swift-testing")


def leftovers(env) -> list[str]:
    """Mounts and temporary worlds that ScopeFSTesting left under the root."""
    return mounts_under(env.root) + sorted(p.name for p in env.root.glob("scopefs-test-*"))


@pytest.mark.scopefs_timeout(RUN_TIMEOUT + 30)
def test_the_swift_testing_example_passes(env, example_built):
    """docs/examples/swift-testing: four Swift Testing tests (revoke and
    restore, revoke in the sandbox, a rename on the host, an injected EIO
    on open) and one XCTest case (revoke), each against the reader app in
    a mount of its own; all pass, none is skipped, and every mount is gone
    afterwards."""
    p = swift_test(env)
    output = p.stdout + p.stderr
    assert p.returncode == 0, describe(p)
    assert "Executed 1 test, with 0 failures" in output, output
    assert "Test run with 4 tests" in output and "passed" in output, output
    assert "skipped" not in output.lower(), output
    assert leftovers(env) == []


@pytest.mark.scopefs_timeout(RUN_TIMEOUT + 30)
def test_the_library_fails_the_tests_of_a_buggy_app(env, example_built):
    """The revocation tests of the example against the reader app that
    caches its descriptor (READER_CACHES_DESCRIPTOR=1): the app crashes on
    the EPERM after the revoke, so the Swift Testing test and the XCTest
    case both FAIL, naming the line the app never printed and its exit
    status; the mounts are closed all the same."""
    p = swift_test(env, "--filter", "urvivesARevoke", READER_CACHES_DESCRIPTOR="1")
    output = p.stdout + p.stderr
    assert p.returncode != 0, describe(p)
    assert 'the app never printed "lost access: EPERM" (the app exited' in output, output
    assert "Fatal error" in output, "the crash's reason belongs in the failure\n" + output
    assert "Test Case 'ReaderAppXCTests.testSurvivesARevoke' failed" in output, output
    assert "Executed 1 test, with 1 failure" in output, output
    assert '✘ Test "a revoke ends the app cleanly' in output, output
    assert "Test run with 1 test in 1 suite failed" in output, output
    assert leftovers(env) == []


@pytest.mark.scopefs_timeout(RUN_TIMEOUT + 30)
def test_the_environment_reaches_a_sandboxed_app(env, example_built):
    """Issue 48, finding 2: `start(..., sandbox: true, environment:)`
    passes the variables through `scopefs run --env` (the sandbox starts
    the app with a cleared environment): the sandboxed test of the example
    gives the app READER_CACHES_DESCRIPTOR, so with =1 the buggy reader
    runs in the sandbox and the test FAILS. Before, the variable never
    reached the app and the test passed with the buggy reader."""
    p = swift_test(env, "--filter", "endsCleanlyOnARevokeInTheSandbox", READER_CACHES_DESCRIPTOR="1")
    output = p.stdout + p.stderr
    assert p.returncode != 0, describe(p)
    assert '✘ Test "in the sandbox too, a revoke ends the app cleanly"' in output, output
    assert 'the app never printed "lost access: EPERM" (the app exited' in output, output
    assert leftovers(env) == []
    p = swift_test(env, "--filter", "endsCleanlyOnARevokeInTheSandbox")
    assert p.returncode == 0, describe(p)


def test_the_library_is_one_copy_in_the_client_package():
    """ScopeFSTesting lives in clients/swift next to ScopeFSClient (one copy
    of the sources, no unsafe flags, Foundation only), and the main
    package builds the same sources so `swift build` checks them."""
    manifest = (CLIENT / "Package.swift").read_text()
    assert '.library(name: "ScopeFSTesting"' in manifest and "unsafeFlags" not in manifest, manifest
    main = (REPO_ROOT / "Package.swift").read_text()
    assert 'path: "clients/swift/Sources/ScopeFSTesting"' in main, main
    sources = sorted((CLIENT / "Sources" / "ScopeFSTesting").glob("*.swift"))
    assert sources and not (REPO_ROOT / "Sources" / "ScopeFSTesting").exists()
    imports = {line.split()[1] for f in sources for line in f.read_text().splitlines() if line.startswith("import ")}
    assert imports <= {"Foundation", "Synchronization", "Glibc", "Musl"}, imports
    example = (EXAMPLE / "Package.swift").read_text()
    assert '.package(path: "../../../clients/swift")' in example, example
    tracked = subprocess.run(
        ["git", "-C", REPO_ROOT, "ls-files", "docs/examples/swift-testing"], capture_output=True, text=True
    )
    assert "Package.resolved" not in tracked.stdout, tracked.stdout
