#!/usr/bin/env python3
"""Larger READ requests for a provider file (issue 33): the cold read of a
big file through ScopeFS with the mount's readahead window at several sizes.

The kernel sends a FUSE file's page-cache reads as READ requests no larger
than the mount's readahead window: 128 KiB unless the owner raises
`/sys/class/bdi/MAJOR:MINOR/read_ahead_kb` (the mount's own bdi; the
daemon's 1 MiB `max_write` already lets a request carry 256 pages). A
512 MiB read is then 4,096 requests, or 512 at 1 MiB. Each size is tried in
turn within every repetition (A B C A B C ...), so a burst of load hits
them alike; native is read the same way for the ratio. Root only.

    python3 bench/readahead.py [--binary .build/release/scopefs] [--mib 512] [--reps 5]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

APP, PROVIDER = "bench.app", "bench"
WINDOWS_KIB = (128, 512, 1024, 4096)
DD_SECONDS = re.compile(r"copied, ([0-9.e+-]+) s")


def dd_seconds(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    found = DD_SECONDS.search(p.stderr)
    if p.returncode != 0 or not found:
        sys.exit(f"readahead: dd failed: {p.stderr.strip()[-400:]}")
    return float(found.group(1))


def cold(argv):
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    return dd_seconds(argv)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=".build/release/scopefs")
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("readahead: needs root (mounts, drop_caches, the bdi's read_ahead_kb)")
    binary = os.path.abspath(args.binary)
    base = tempfile.mkdtemp(prefix="readahead-", dir="/dev/shm")
    os.chmod(base, 0o755)
    state, mnt, work = (os.path.join(base, name) for name in ("state", "mnt", "backing/work"))
    os.makedirs(mnt)
    os.makedirs(work)
    subprocess.run(
        ["dd", "if=/dev/urandom", f"of={work}/big", "bs=1M", f"count={args.mib}"], check=True, capture_output=True
    )

    def cli(*argv):
        return subprocess.run([binary, "--state", state, *argv], check=True, capture_output=True, text=True, timeout=60)

    mounted = False
    try:
        cli("init")
        cli("provider", "add", PROVIDER, os.path.dirname(work))
        cli("app", "add", APP)
        cli("grant", APP, f"{PROVIDER}:work")
        cli("mount", mnt)
        mounted = True
        device = os.stat(mnt).st_dev
        window = f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb"
        folder = os.path.join(mnt, APP, "Providers", PROVIDER, "work")
        app_dd = [binary, "--state", state, "run", "--app", APP, "--no-sandbox", "--"]
        app_dd += [binary, "--state", state, "scope", "exec", folder, "--"]
        app_dd += ["dd", f"if={folder}/big", "of=/dev/null", "bs=1M"]
        times = {kib: [] for kib in WINDOWS_KIB}
        native = []
        for _ in range(args.reps):
            native.append(cold(["dd", f"if={work}/big", "of=/dev/null", "bs=1M"]))
            for kib in WINDOWS_KIB:
                with open(window, "w") as f:
                    f.write(f"{kib}\n")
                times[kib].append(cold(app_dd))
        base_median = statistics.median(native)
        print(f"\n| cold read of {args.mib} MiB, {args.reps} runs | median | min–max | × native |\n|---|---|---|---|")
        print(f"| native | {base_median:.3f} s | {min(native):.3f}–{max(native):.3f} | 1.00× |")
        for kib, values in times.items():
            median = statistics.median(values)
            print(
                f"| ScopeFS, read_ahead_kb {kib} | {median:.3f} s | {min(values):.3f}–{max(values):.3f} "
                f"| {median / base_median:.2f}× |"
            )
        print(f"\nload average at the end: {os.getloadavg()}")
    finally:
        if mounted:
            subprocess.run([binary, "--state", state, "unmount", mnt], capture_output=True, timeout=60)
        with open("/proc/mounts") as f:
            still = [line.split()[1] for line in f if line.split()[1].startswith(base + "/")]
        if still:  # never remove into a live mount
            print(f"readahead: still mounted, left in place: {still}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
