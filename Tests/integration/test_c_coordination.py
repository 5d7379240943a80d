"""File coordination from the C client (issue 17, SPEC S31; like
NSFileCoordinator): `scopefs_coordinate` takes a read or write claim through
the daemon, `scopefs_release` ends it, and the process's exit ends it too.
A C writer (docs/examples/coordinate.c, built against libscopefs) holds a
Python reader in another app back until it releases. Real mount, real app
processes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from client_builds import c_build, compile_c_example  # noqa: F401  (fixture: the C library)
from doc_scope_helpers import mount
from pick_agent import PY_CLAIMER, PYTHON_CLIENT, REPORT
from scopefs_harness import ALPHA, BETA, LOCAL

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def world(env):
    env.base_env["PYTHONPATH"] = str(PYTHON_CLIENT)
    mount(env)
    env.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    env.cli("open", BETA, f"{LOCAL}:{REPORT}")
    return env


@pytest.fixture
def coordinate_example(c_build, tmp_path) -> Path:  # noqa: F811
    return compile_c_example(REPO / "docs" / "examples" / "coordinate.c", tmp_path / "coordinate", c_build)


def test_c_writer_holds_a_python_reader_until_it_releases(world, coordinate_example):
    """The C example claims report.txt for writing in ALPHA; BETA's
    coordinated reader gives up after its timeout; once the C writer has
    written and released, the reader is granted at once and sees the line."""
    writer = subprocess.Popen(
        world.run_argv(ALPHA, [coordinate_example, world.prov(ALPHA, LOCAL, REPORT), "written in C"]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=world.base_env,
        text=True,
        start_new_session=True,
    )
    try:
        assert writer.stdout.readline() == f"claimed {world.prov(ALPHA, LOCAL, REPORT)}\n"
        blocked = world.app_json(BETA, "import time\n" + PY_CLAIMER, world.prov(BETA, LOCAL, REPORT), "read", "1")
        assert blocked.get("error") == "TimeoutError" and blocked["waited"] >= 0.9, blocked
        out, err = writer.communicate("go\n", timeout=30)
        assert writer.returncode == 0 and out == "released\n", (out, err)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    reader = world.app_json(BETA, "import time\n" + PY_CLAIMER, world.prov(BETA, LOCAL, REPORT), "read", "5")
    assert "granted" in reader and reader["waited"] < 1, reader
    assert (world.backing(LOCAL) / REPORT).read_text().endswith("written in C\n")


C_CLAIM_AND_EXIT = """
import ctypes
lib = ctypes.CDLL(sys.argv[1], use_errno=True)
lib.scopefs_coordinate.restype = ctypes.c_ulonglong
lib.scopefs_coordinate.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_double, ctypes.c_char_p]
lib.scopefs_release.argtypes = [ctypes.c_ulonglong, ctypes.c_char_p]
def errname():
    return errno.errorcode[ctypes.get_errno()]
hidden = lib.scopefs_coordinate(sys.argv[3].encode(), 1, 1.0, None)
hidden_errno = errname() if not hidden else None
bad_release = lib.scopefs_release(987654321, None)
release_errno = errname() if bad_release else None
claim = lib.scopefs_coordinate(sys.argv[2].encode(), 1, 5.0, None)
emit({"claim": claim, "hidden": hidden_errno, "badRelease": release_errno})
os._exit(0)  # no release: the exit ends the claim
"""


def test_a_c_claim_ends_with_its_process(world, c_build):  # noqa: F811
    """A C write claim never released ends when its process exits; a path
    the app was not given is ENOENT, a claim it does not hold ESRCH."""
    got = world.app_json(
        ALPHA,
        C_CLAIM_AND_EXIT,
        c_build / "libscopefs.so",
        world.prov(ALPHA, LOCAL, REPORT),
        world.prov(ALPHA, LOCAL, "docs/secret.txt"),
    )
    assert got["claim"] > 0 and got["hidden"] == "ENOENT" and got["badRelease"] == "ESRCH", got
    after_exit = world.app_json(BETA, "import time\n" + PY_CLAIMER, world.prov(BETA, LOCAL, REPORT), "write", "5")
    assert "granted" in after_exit and after_exit["waited"] < 3, after_exit
