#!/usr/bin/env python3
"""Cold write and read of one big file in an app's container (issue 33):
natively, through ScopeFS with kernel passthrough, and through ScopeFS
with `--no-container-passthrough` (the daemon's path, as provider files
take). Root only (mounts, drop_caches); the state directory and the native
folder are on /dev/shm, as in `make bench`, so the backing file system
costs the same everywhere.

    python3 bench/container_io.py [--binary .build/release/scopefs] [--mib 512] [--reps 3]

Each repetition writes MIB MiB with `dd bs=1M` in a sandboxed app process
(`scopefs run`), drops the page cache, and reads the file back with `dd
bs=1M`; the times are dd's own (the run's start-up is not in them). Then
it reads SMALL files of 4 KiB made on the host (open, read, close each),
twice in one app process: the first pass finds nothing cached, the second
what the first left. Prints Markdown tables of medians, with min-max and
the ratio to native.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

APP = "com.example.bench"
# Reads every file of a folder twice, each pass timed on its own.
SMALL_READS = r"""
import os, sys, time
folder = sys.argv[1]
names = sorted(os.listdir(folder))
for _ in range(2):
    start = time.monotonic()
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            f.read()
    print("%.6f" % (time.monotonic() - start))
"""
DD_SECONDS = re.compile(r"copied, ([0-9.e+-]+) s")


def dd_seconds(argv, what):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    found = DD_SECONDS.search(p.stderr + p.stdout)
    if p.returncode != 0 or not found:
        sys.exit(f"container_io: {what} failed: {p.stderr.strip()[-400:]}")
    return float(found.group(1))


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


class Native:
    name = "native"

    def __init__(self, base):
        self.folder = os.path.join(base, "native")
        os.mkdir(self.folder)

    def dd(self, args, what):
        return dd_seconds(["dd", "bs=1M", *[a.replace("@", self.folder + "/") for a in args]], what)

    def small_reads(self, count):
        folder = make_small_files(os.path.join(self.folder, "small"), count)
        return python_passes([sys.executable, "-c", SMALL_READS, folder])

    def close(self):
        pass


class Mounted:
    """A ScopeFS mount with its state on /dev/shm; dd runs as an app."""

    def __init__(self, base, binary, name, options):
        self.name, self.binary = name, binary
        self.state = os.path.join(base, name, "state")
        self.mnt = os.path.join(base, name, "mnt")
        os.makedirs(self.mnt)
        self.cli("init")
        self.cli("app", "add", APP)
        self.cli("mount", self.mnt, *options)
        self.passthrough = self.cli("status").stdout

    def cli(self, *args):
        p = subprocess.run([self.binary, "--state", self.state, *args], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            sys.exit(f"container_io: scopefs {' '.join(args)}: {p.stderr.strip()}")
        return p

    def dd(self, args, what):
        folder = os.path.join(self.mnt, APP, "Container", "Documents")
        command = ["dd", "bs=1M", *[a.replace("@", folder + "/") for a in args]]
        return dd_seconds([self.binary, "--state", self.state, "run", "--app", APP, "--", *command], what)

    def small_reads(self, count):
        documents = os.path.join(self.state, "containers", APP, "Documents")
        make_small_files(os.path.join(documents, "small"), count)
        folder = os.path.join(self.mnt, APP, "Container", "Documents", "small")
        run = [self.binary, "--state", self.state, "run", "--app", APP, "--"]
        return python_passes(run + ["python3", "-c", SMALL_READS, folder])

    def close(self):
        subprocess.run([self.binary, "--state", self.state, "unmount", self.mnt], capture_output=True, timeout=60)


def make_small_files(folder, count):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for index in range(count):
        with open(os.path.join(folder, f"f{index:05d}"), "wb") as f:
            f.write(os.urandom(4096))
    return folder


def python_passes(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"container_io: small reads failed: {p.stderr.strip()[-400:]}")
    return tuple(float(line) for line in p.stdout.split())


def measure(system, mib):
    drop_caches()
    write = system.dd(["if=/dev/zero", "of=@big", f"count={mib}"], f"{system.name} write")
    drop_caches()
    read = system.dd(["if=@big", "of=/dev/null"], f"{system.name} read")
    system.dd(["if=/dev/zero", "of=@big", "count=0"], f"{system.name} truncate")
    return write, read


def row(name, times, native):
    cells = [name]
    for index in (0, 1):
        values = [t[index] for t in times]
        median = statistics.median(values)
        ratio = f", {median / statistics.median(t[index] for t in native):.2f}x" if native else ""
        cells.append(f"{median:.3f} s ({min(values):.3f}–{max(values):.3f}{ratio})")
    return "| " + " | ".join(cells) + " |"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=".build/release/scopefs")
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--small", type=int, default=2000, help="small files to read (0: none)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("container_io: needs root (mounts, drop_caches)")
    binary = os.path.abspath(args.binary)
    base = tempfile.mkdtemp(prefix="container-io-", dir="/dev/shm")
    os.chmod(base, 0o755)
    systems = []
    try:
        systems = [
            Native(base),
            Mounted(base, binary, "passthrough", []),
            Mounted(base, binary, "daemon", ["--no-container-passthrough"]),
        ]
        for system in systems[1:]:
            line = next(line for line in system.passthrough.splitlines() if "container files" in line)
            print(f"{system.name}: {line.strip()}")
        times = {system.name: [] for system in systems}
        small = {system.name: [] for system in systems}
        for _ in range(args.reps):
            for system in systems:
                times[system.name].append(measure(system, args.mib))
                if args.small:
                    small[system.name].append(system.small_reads(args.small))
        print(f"\n| {args.mib} MiB, {args.reps} runs | write | read cold |\n|---|---|---|")
        for system in systems:
            print(row(system.name, times[system.name], times["native"] if system.name != "native" else None))
        if args.small:
            print(f"\n| {args.small} files of 4 KiB, {args.reps} runs | first read | read again |\n|---|---|---|")
            for system in systems:
                print(row(system.name, small[system.name], small["native"] if system.name != "native" else None))
        print(f"\nload average at the end: {os.getloadavg()}")
    finally:
        for system in systems:
            system.close()
        with open("/proc/mounts") as f:
            mounted = [line.split()[1] for line in f if line.split()[1].startswith(base + "/")]
        if mounted:  # never remove into a live mount
            print(f"container_io: still mounted, left in place: {mounted}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
