"""Walks of trees with more folders than the daemon has descriptors
(issue 29, finding 2; SPEC S40).

A folder node used to keep an O_PATH descriptor for as long as the kernel
held the node, so `find` over a granted tree of 25,251 folders met "Too many
open files" once the daemon's limit (20,000 here) was reached. Folder
descriptors are now a bounded cache, re-opened from the parent by name with
an identity check on a miss (docs/ARCHITECTURE.md, decision 43).

The walk runs as users run apps: the default mount (strict scopes), an app
in the default sandbox holding a security scope on its grant.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from doc_scope_helpers import mount
from scopefs_harness import ALPHA, LOCAL, fd_count

WALK_TOP = 250
WALK_BELOW = 200  # 250 + 250 * 200 = 50,250 folders under the grant
# Beyond the folder cache: descriptors a walk holds at a time (find's open
# folders, each a charged backing descriptor) and descriptors of folders
# evicted while a request was using them (a few per FUSE worker thread).
WALK_SLACK = 96


def folder_cache_capacity(limit: int) -> int:
    """docs/ARCHITECTURE.md decision 43: the daemon caches at most 4,096
    folder descriptors, or an eighth of its limit if that is smaller."""
    return min(4096, limit // 8)


def daemon_descriptor_limit(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    raise AssertionError(f"no 'Max open files' in /proc/{pid}/limits")


# Starts accessing the granted folder (strict scopes), runs `find -type d`
# over it and reports how many folders it listed and its errors.
FIND_FOLDERS = r"""
import subprocess
folder = sys.argv[1]
os.setxattr(folder, "user.scopefs.start", b"")
step("ready")
p = subprocess.run(["find", folder, "-type", "d"], capture_output=True)
errors = p.stderr.decode(errors="replace").splitlines()
emit({"folders": p.stdout.count(b"\n"), "status": p.returncode, "errors": len(errors), "first": errors[:3]})
"""


def make_tree(top) -> int:
    count = 0
    for i in range(WALK_TOP):
        for j in range(WALK_BELOW):
            os.makedirs(top / f"d{i}" / f"s{j}")
        count += WALK_BELOW + 1
    return count


def sample_peak(pid: int, stop: threading.Event, peak: list[int]) -> None:
    while not stop.is_set():
        count = fd_count(pid)
        if count is not None and count > peak[0]:
            peak[0] = count
        time.sleep(0.05)


@pytest.mark.scopefs_timeout(300)
def test_walk_of_50000_folders_lists_all_with_bounded_descriptors(env):
    """Finding 2, SPEC S40: `find` through the mount lists every one of
    50,250 granted folders with no error, while the daemon's descriptors
    stay under its count after mount plus the folder cache's capacity and
    WALK_SLACK."""
    many = env.backing(LOCAL) / "many"
    created = make_tree(many) + 1  # and `many` itself
    env.grant(ALPHA, f"{LOCAL}:many")
    mount(env, "strict")
    pid = env.daemon_pid()
    baseline = fd_count(pid)
    capacity = folder_cache_capacity(daemon_descriptor_limit(pid))
    bound = baseline + capacity + WALK_SLACK

    session = env.app_session(ALPHA, FIND_FOLDERS, env.prov(ALPHA, LOCAL, "many"), sandbox=True)
    assert session.recv() == "ready"
    peak = [baseline]
    stop = threading.Event()
    sampler = threading.Thread(target=sample_peak, args=(pid, stop, peak))
    sampler.start()
    started = time.monotonic()
    try:
        session.send()
        result = session.recv(timeout=240)
    finally:
        stop.set()
        sampler.join()
    session.finish()
    print(
        f"walk: {result}, {created} folders in {time.monotonic() - started:.1f} s; daemon descriptors "
        f"{baseline} after mount, peak {peak[0]}, bound {bound} (folder cache {capacity})"
    )
    assert (result["folders"], result["errors"]) == (created, 0), (
        f"find listed {result['folders']} of {created} folders with {result['errors']} errors "
        f"{result['first']}; daemon descriptors peaked at {peak[0]}"
    )
    assert peak[0] <= bound, (
        f"daemon descriptors {baseline} after mount, peak {peak[0]} during the walk (bound {bound})"
    )
