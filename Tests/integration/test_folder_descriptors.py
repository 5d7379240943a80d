"""Folder descriptors are a bounded cache (issue 29, finding 2; SPEC S40,
S33): walks of trees with more folders than the daemon has descriptors, and
the host-move rules of S33 when every folder's descriptor is evicted.

A folder node used to keep an O_PATH descriptor for as long as the kernel
held the node, so `find` over a granted tree of 25,251 folders met "Too many
open files" once the daemon's limit (20,000 here) was reached. Folder
descriptors are now a bounded cache, re-opened from the parent by name with
an identity check on a miss (docs/DECISIONS.md, decision 45).

The tests run as users run apps: the default mount (strict scopes), an app
in the default sandbox holding a security scope on its grant.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from doc_scope_helpers import mount
from scopefs_harness import ALPHA, LOCAL, fd_count, sample_peak

WALK_TOP = 250
WALK_BELOW = 200  # 250 + 250 * 200 = 50,250 folders under the grant
# Beyond the folder cache: descriptors a walk holds at a time (find's open
# folders, each a charged backing descriptor) and descriptors of folders
# evicted while a request was using them (a few per FUSE worker thread).
WALK_SLACK = 96


def folder_cache_capacity(limit: int) -> int:
    """docs/DECISIONS.md, decision 45: the daemon caches at most 4,096
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


# -- SPEC S33 with every folder's descriptor evicted ---------------------------

# Starts accessing the granted folder, holds a descriptor on `sub` in it and
# lists it; on "go" it lists some other folder (with a cache of one, `sub`'s
# descriptor is evicted) and uses `sub` through its descriptor, every 10 ms
# until both uses are refused or 3 s passed, and reports what it saw last.
HOLDS_SUB_AND_CHURNS = r"""
import time
folder = sys.argv[1]
os.setxattr(folder, "user.scopefs.start", b"")
dfd = os.open(os.path.join(folder, "sub"), os.O_RDONLY | os.O_DIRECTORY)
def churn():
    for i in range(3):
        os.listdir(os.path.join(folder, "other%d" % i))
def uses():
    churn()
    return {"list": outcome(lambda: sorted(os.listdir(dfd))),
            "stat": outcome(lambda: os.stat("f.txt", dir_fd=dfd).st_size)}
step({"before": uses()})
t0 = time.monotonic()
while True:
    seen = uses()
    if all("errno" in v for v in seen.values()) or time.monotonic() - t0 > 3.0:
        break
    time.sleep(0.01)
emit({"seen": seen, "after": time.monotonic() - t0})
"""


def app_holding_sub_with_a_cache_of_one(env):
    """A strict mount whose folder cache holds one descriptor, and an app
    in the default sandbox holding `work/sub` (granted through `work`)."""
    work = env.backing(LOCAL) / "work"
    for name in ("sub", "other0", "other1", "other2"):
        (work / name).mkdir(parents=True)
    (work / "sub" / "f.txt").write_bytes(b"f\n")
    env.grant(ALPHA, f"{LOCAL}:work")
    env.mount_args = lambda *a, **k: ["mount", env.mnt, "--scopes", "strict", "--folder-descriptors", "1"]
    env.mount()
    app = env.app_session(ALPHA, HOLDS_SUB_AND_CHURNS, env.prov(ALPHA, LOCAL, "work"), sandbox=True)
    before = app.recv()["before"]
    assert before == {"list": {"ok": ["f.txt"]}, "stat": {"ok": 2}}, before
    return app, work


def test_folder_renamed_on_host_within_grant_stays_usable_when_evicted(env):
    """SPEC S33 (amended): a folder renamed on the host inside its grant has
    not left it, so the app's descriptor on it keeps working — also once the
    cache evicted the folder's descriptor and the old name leads nowhere
    (it is opened again by its file handle)."""
    app, work = app_holding_sub_with_a_cache_of_one(env)
    os.rename(work / "sub", work / "renamed")
    time.sleep(1.5)  # not a wait: a location check older than its age (1 s) runs again
    app.send()
    got = app.recv()
    assert app.finish() == 0, app.stderr()
    assert got["seen"] == {"list": {"ok": ["f.txt"]}, "stat": {"ok": 2}}, got


def test_folder_moved_out_of_grant_is_cut_when_evicted(env):
    """SPEC S33 (amended): a folder the owner moves out of the grant on the
    host stops being reachable through a descriptor held on it within 1 s,
    also when every use re-opens it (cache of one)."""
    app, work = app_holding_sub_with_a_cache_of_one(env)
    os.rename(work / "sub", env.root / "backing" / "escape" / "sub")
    app.send()
    got = app.recv()
    assert app.finish() == 0, app.stderr()
    refused = ({"errno": "ENOENT"}, {"errno": "EPERM"})
    assert got["seen"]["list"] in refused and got["seen"]["stat"] in refused, got
    assert got["after"] <= 1.2, got
