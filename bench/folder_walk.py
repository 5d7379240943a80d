#!/usr/bin/env python3
"""Opt-in benchmark row: a walk of a granted tree of N folders through
ScopeFS, with the daemon's descriptors and RSS sampled (issue 29, finding 2;
SPEC S40). Folder descriptors are a bounded cache, so the daemon's count
must stay under its documented bound (docs/DECISIONS.md, decision 45)
however many folders the kernel holds nodes for.

In a full run: `python3 bench/run.py --folder-walk 1000000`. Alone (only
ScopeFS, no other system or workload):

    python3 bench/folder_walk.py [--folders 1000000] [--backing tmpfs|ext4]
        [--budgets default,0]

The node budget row (issue 52; `bench/run.py --node-budget-walk N`, in every
full run): the same walk once per `--max-nodes` setting, each on a fresh
mount, with the daemon's peak RSS and node count and the walk's time.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import scopefs_costs  # noqa: E402
import systems as sysmod  # noqa: E402
import workloads as wl  # noqa: E402
from deps import log  # noqa: E402

PER_FOLDER = 1000  # subfolders per top folder: a tree 2 levels deep


def make_tree(top, nfolders):
    """NFOLDERS folders under TOP (TOP included), made on the host."""
    made = 1
    os.makedirs(top)
    i = 0
    while made < nfolders:
        parent = os.path.join(top, f"d{i}")
        os.mkdir(parent)
        made += 1
        for j in range(min(PER_FOLDER, nfolders - made)):
            os.mkdir(os.path.join(parent, f"s{j}"))
            made += 1
        i += 1
    return made


def descriptor_limit(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    return None


def folder_walk(ctx, sfs, nfolders, keep_tree=False):
    """`find -type d` through the mount as the bench's app, over NFOLDERS
    folders made on the host (made only if not there yet; KEEP_TREE leaves
    them for the next walk); the daemon's fds and RSS sampled every 0.1 s,
    its node count (`status --json`) every second."""
    pid = sfs.daemon_pid()
    out = {"folders": nfolders, "daemon_pid": pid}
    if not pid:
        out["error"] = '`scopefs status --json` gave no ["daemon"]["pid"]'
        return out
    limit = descriptor_limit(pid)
    out["descriptor_limit"] = limit
    if limit:
        folders = min(4096, limit // 8)
        out["bound"] = {"folder_cache": folders, "apps_share": max(limit - 1024 - folders, limit // 2), "reserve": 1024}
    started = time.monotonic()
    top = os.path.join(ctx.workdir, "folders")
    if os.path.isdir(top):
        out["folders"] = nfolders
    else:
        out["folders"] = make_tree(top, nfolders)
        out["create_seconds"] = round(time.monotonic() - started, 1)
        log(f"bench:   {out['folders']:,} folders made in {out['create_seconds']} s")
    log("bench:   walking them through the mount")
    out["before"] = scopefs_costs.sample(pid)
    peak, stop = {"rss_kib": 0, "fds": 0, "threads": 0, "nodes": 0}, threading.Event()

    def watch():
        ticks = 0
        while not stop.wait(0.1):
            s = scopefs_costs.sample(pid)
            ticks += 1
            if ticks % 10 == 0:
                s["nodes"] = sfs.daemon_nodes()
            for k in peak:
                peak[k] = max(peak[k], s.get(k) or 0)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    try:
        r = subprocess.run(
            sfs.wrap(["find", os.path.join(sfs.root, "folders"), "-type", "d"]),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=3600,
        )
        out["walk_seconds"] = round(time.monotonic() - started, 1)
        out["listed"] = r.stdout.count(b"\n")
        # `scopefs run --no-sandbox` warns on stderr; find's errors start with "find:".
        errors = [ln for ln in r.stderr.decode(errors="replace").splitlines() if ln.startswith("find:")]
        out["errors"] = len(errors)
        if r.returncode != 0 or out["listed"] != out["folders"]:
            out["error"] = f"find exited {r.returncode}, listed {out['listed']:,} of {out['folders']:,}: " + (
                errors[0] if errors else "no message"
            )
    except subprocess.TimeoutExpired:
        out["error"] = "find timed out"
    finally:
        stop.set()
        watcher.join()
    out["during_peak"] = peak
    out["after"] = scopefs_costs.sample(pid)
    out["after"]["nodes"] = sfs.daemon_nodes()
    if keep_tree:
        return out
    ctx.drop_caches()  # the kernel forgets the walked nodes
    time.sleep(3)
    out["after_forget"] = scopefs_costs.sample(pid)
    ctx.clean("folders")
    return out


def budget_walks(ctx, sfs, nfolders, budgets=("default", "0")):
    """The walk of NFOLDERS folders once per `--max-nodes` setting in
    BUDGETS ("default": the mount's own), each on a fresh mount of SFS (the
    kernel's caches dropped in between); SFS is mounted as it was at the end."""
    runs = {}
    try:
        for budget in budgets:
            extra = [] if budget == "default" else ["--max-nodes", str(budget)]
            sfs.unmount()
            ctx.drop_caches()
            sfs.mount_and_probe(extra)
            log(f"bench:   --max-nodes {budget}")
            runs[budget] = folder_walk(ctx, sfs, nfolders, keep_tree=True)
    finally:
        sfs.unmount()
        ctx.drop_caches()
        ctx.clean("folders")
        sfs.mount_and_probe([])
    return {"folders": nfolders, "runs": runs}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--folders", type=int, default=1_000_000)
    p.add_argument("--backing", choices=["tmpfs", "ext4"], default="tmpfs")
    p.add_argument(
        "--budgets",
        help="walk once per `--max-nodes` value, comma-separated (`default`: none given), "
        "instead of once on the default mount",
    )
    a = p.parse_args()
    scopefs = os.environ.get("SCOPEFS_BIN") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".build", "release", "scopefs"
    )
    tmp = tempfile.mkdtemp(prefix="scopefs-bench-", dir={"tmpfs": "/dev/shm", "ext4": "/var/tmp"}[a.backing])
    backing = os.path.join(tmp, "backing")
    os.makedirs(os.path.join(backing, sysmod.WORKDIR))
    ctx = wl.Context(tmp, backing, None, None, scopefs, wl.QUICK)
    sfs = sysmod.ScopeFS(ctx)
    try:
        sfs.setup()
        if a.budgets:
            result = budget_walks(ctx, sfs, a.folders, a.budgets.split(","))
            result["error"] = "; ".join(f"{b}: {r['error']}" for b, r in result["runs"].items() if "error" in r)
            if not result["error"]:
                del result["error"]
        else:
            result = folder_walk(ctx, sfs, a.folders)
    finally:
        sfs.teardown()
        left = [m for m in sysmod.mountpoints() if m == tmp or m.startswith(tmp + "/")]
        if not left:
            subprocess.run(["rm", "-rf", "--one-file-system", tmp])
    print(json.dumps(result, indent=2))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
