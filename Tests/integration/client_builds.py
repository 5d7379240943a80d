"""The client libraries built for the tests that run apps on them (SPEC
S31): the C library (`c_build`, `compile_c_example`) and the Swift check
app (`swift_check`), once per session. A helper module, not a test
module: test_clients.py and the tests of picks, presenters, coordination
and queries import it, so none of them imports another test module.

Build products stay out of the default .build folder (test_clients.py
says where); the Swift cases skip, with a reason, without a toolchain.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from scopefs_harness import REPO_ROOT, describe, run_bounded

CLIENTS = REPO_ROOT / "clients"
PYTHON_CLIENT_DIR = CLIENTS / "python"
C_CLIENT_DIR = CLIENTS / "c"
EXAMPLES = REPO_ROOT / "docs" / "examples"
SWIFT_EXAMPLE_PACKAGE = EXAMPLES / "swift-app"
SWIFT_EXAMPLE_SCRATCH = REPO_ROOT / ".build-clients-example"
SWIFT_CHECK_PACKAGE = Path(__file__).resolve().parent / "clients_swift"
SWIFT_CHECK_SCRATCH = REPO_ROOT / ".build-clients-check"

BUILD_TIMEOUT = 120
SWIFT_BUILD_TIMEOUT = 1200  # a cold build of the example package takes minutes


# ---------------------------------------------------------------------------
# building the clients (once per session)


def _build_env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONFAULTHANDLER", None)
    return env


def _swift() -> str | None:
    return os.environ.get("SWIFT") or shutil.which("swift")


def _swift_build(package: Path, scratch: Path, product: str) -> Path:
    swift = _swift()
    if not swift:
        pytest.skip(
            "no `swift` on PATH (set SWIFT=/path/to/swift): the Swift client "
            "cases need a Swift toolchain; the C and Python cases still run"
        )
    argv = [swift, "build", "--package-path", package, "--scratch-path", scratch, "--product", product]
    p = run_bounded(argv, SWIFT_BUILD_TIMEOUT, _build_env(), what=f"swift build of {package.name}")
    assert p.returncode == 0, f"swift build of {package} failed\n" + describe(p)
    q = run_bounded(argv[:-2] + ["--show-bin-path"], BUILD_TIMEOUT, _build_env(), what="swift build --show-bin-path")
    assert q.returncode == 0, describe(q)
    binary = Path(q.stdout.strip().splitlines()[-1]) / product
    assert binary.is_file(), f"{binary} missing after a successful build\n" + describe(p)
    return binary


@pytest.fixture(scope="session")
def c_build(tmp_path_factory) -> Path:
    """`make -C clients/c all` into a temp BUILD dir; returns that dir."""
    build = tmp_path_factory.mktemp("scopefs-c-client") / "build"
    p = run_bounded(
        ["make", "-C", C_CLIENT_DIR, f"BUILD={build}", "all"], BUILD_TIMEOUT, _build_env(), what="make -C clients/c"
    )
    assert p.returncode == 0, "building libscopefs.so failed\n" + describe(p)
    assert (build / "libscopefs.so").is_file(), describe(p)
    return build


def compile_c_example(source: Path, out: Path, c_build: Path) -> Path:
    """A C program of docs/examples compiled with every warning an error and
    linked against the libscopefs.so of `c_build`."""
    p = run_bounded(
        [
            os.environ.get("CC", "cc"),
            "-Wall",
            "-Wextra",
            "-Werror",
            "-o",
            out,
            source,
            f"-I{C_CLIENT_DIR / 'include'}",
            f"-L{c_build}",
            "-lscopefs",
            f"-Wl,-rpath,{c_build}",
        ],
        BUILD_TIMEOUT,
        _build_env(),
        what=f"cc {source.name}",
    )
    assert p.returncode == 0, f"compiling {source} failed\n" + describe(p)
    return out


@pytest.fixture(scope="session")
def swift_check() -> str:
    return str(_swift_build(SWIFT_CHECK_PACKAGE, SWIFT_CHECK_SCRATCH, "scopefs-client-check"))
