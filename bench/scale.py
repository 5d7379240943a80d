#!/usr/bin/env python3
"""Scale figures (issue 29, SPEC S40): the daemon's descriptors and RSS
against the number of folders walked and the number of concurrent readers,
for ScopeFS (strict, an app in scope) and libfuse's passthrough_ll on the
same backing folder, side by side. Prints a table and draws a chart.

    SCOPEFS_BIN=.build/release/scopefs python3 bench/scale.py \
        [--folders 1000,10000,100000] [--readers 1,10,100,500] [--out bench-results/]

Each point is one run on a fresh tree: a `find` of every folder, or N
processes looping open/read/close over 20 files for 5 s. Peaks are sampled
from /proc every 50 ms. Trees are made on the host before the daemons
start and removed after. The million-folder walk takes minutes: name it
in --folders only when you mean it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import deps  # noqa: E402
import systems as sysmod  # noqa: E402
from deps import log  # noqa: E402

READER = r"""
import os, sys, time
folder, seconds, count = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
names = sorted(os.listdir(folder))
pids = []
for index in range(count):
    pid = os.fork()
    if pid == 0:
        end, errors = time.monotonic() + seconds, 0
        i = index
        while time.monotonic() < end:
            try:
                fd = os.open(os.path.join(folder, names[i % len(names)]), os.O_RDONLY)
                os.read(fd, 4096)
                os.close(fd)
            except OSError:
                errors += 1
            i += 1
        os._exit(1 if errors else 0)
    pids.append(pid)
failed = sum(1 for pid in pids if os.waitpid(pid, 0)[1] != 0)
print(f"readers with errors: {failed}", flush=True)
sys.exit(1 if failed else 0)
"""


class Sampler:
    """Peak descriptors and RSS of one process, sampled until stopped."""

    def __init__(self, pid: int):
        self.pid, self.fds, self.rss_kib = pid, 0, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self):
        while not self.done.is_set():
            try:
                self.fds = max(self.fds, len(os.listdir(f"/proc/{self.pid}/fd")))
                with open(f"/proc/{self.pid}/status") as status:
                    for line in status:
                        if line.startswith("VmRSS:"):
                            self.rss_kib = max(self.rss_kib, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


def make_tree(root: str, folders: int) -> None:
    """`folders` folders in a two-level tree of at most 1,000 per level."""
    width = max(1, min(1000, int(folders**0.5)))
    made = 0
    for top in range(0, folders // width + 1):
        for leaf in range(width):
            if made >= folders:
                return
            os.makedirs(os.path.join(root, f"d{top}", f"s{leaf}"), exist_ok=True)
            made += 1


def measure(system, daemon_pid: int, argv: list[str]) -> dict:
    with Sampler(daemon_pid) as sampler:
        start = time.monotonic()
        p = subprocess.run(system.wrap(argv), capture_output=True, text=True)
        seconds = time.monotonic() - start
    return {
        "ok": p.returncode == 0,
        "seconds": round(seconds, 2),
        "fds": sampler.fds,
        "rss_mib": sampler.rss_kib // 1024,
        "stdout": p.stdout.strip()[-200:],
        "stderr": p.stderr.strip()[-300:],
    }


def run_point(ctx, kind: str, size: int) -> dict:
    """One fresh backing tree and fresh daemons for one point."""
    ctx.backing = tempfile.mkdtemp(prefix="scopefs-scale-", dir="/var/tmp")
    ctx.tmp = tempfile.mkdtemp(prefix="scopefs-scale-run-", dir="/var/tmp")
    work = os.path.join(ctx.backing, sysmod.WORKDIR)
    os.makedirs(work)
    if kind == "folders":
        make_tree(work, size)
    else:
        for index in range(20):
            with open(os.path.join(work, f"f{index:02}.txt"), "wb") as f:
                f.write(os.urandom(4096))
    results = {}
    for system_class in (sysmod.PassthroughLL, sysmod.ScopeFS):
        system = system_class(ctx)
        try:
            system.setup()
            pid = system.pids()[0]
            if kind == "folders":
                argv = ["sh", "-c", f"find {system.root} -mindepth 1 -type d | wc -l"]
            else:
                argv = [sys.executable, "-c", READER, system.root, "5", str(size)]
            results[system.name] = measure(system, pid, argv)
        finally:
            system.teardown()
    shutil.rmtree(ctx.backing, ignore_errors=True)
    shutil.rmtree(ctx.tmp, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folders", default="1000,10000,100000")
    parser.add_argument("--readers", default="1,10,100,500")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(__file__)), "bench-results"))
    args = parser.parse_args()
    _, passthrough_ll = deps.build_helpers()
    ctx = SimpleNamespace(
        scopefs=os.environ.get("SCOPEFS_BIN", ".build/release/scopefs"), passthrough_ll=passthrough_ll, mount_args=[]
    )
    rows = []
    for kind, sizes in (("folders", args.folders), ("readers", args.readers)):
        for size in (int(s) for s in sizes.split(",") if s):
            log(f"scale: {kind} {size:,}")
            point = run_point(ctx, kind, size)
            rows.append({"kind": kind, "size": size, **point})
            pll, sfs = point["passthrough_ll"], point["scopefs"]
            print(
                f"{kind:8} {size:>9,}  passthrough_ll: {pll['fds']:>7,} fds {pll['rss_mib']:>5} MiB {pll['seconds']:>7} s"
                f"{'' if pll['ok'] else ' FAILED'}   ScopeFS: {sfs['fds']:>7,} fds {sfs['rss_mib']:>5} MiB "
                f"{sfs['seconds']:>7} s{'' if sfs['ok'] else ' FAILED ' + sfs['stderr'][-120:]}",
                flush=True,
            )
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "scale.json"), "w") as f:
        json.dump(rows, f, indent=1)
    plt = deps.ensure_matplotlib()
    if plt:
        figure, axes = plt.subplots(1, 2, figsize=(11, 4))
        for axis, kind, label in ((axes[0], "folders", "folders walked"), (axes[1], "readers", "concurrent readers")):
            points = [r for r in rows if r["kind"] == kind]
            for name in ("passthrough_ll", "scopefs"):
                axis.plot([r["size"] for r in points], [r[name]["fds"] for r in points], marker="o", label=name)
            axis.set_xscale("log")
            axis.set_yscale("log")
            axis.set_xlabel(label)
            axis.set_ylabel("daemon descriptors (peak)")
            axis.legend()
        figure.tight_layout()
        figure.savefig(os.path.join(args.out, "scale.png"), dpi=110)
        log(f"scale: chart in {os.path.join(args.out, 'scale.png')}")


if __name__ == "__main__":
    main()
