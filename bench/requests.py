#!/usr/bin/env python3
"""Counts the FUSE requests each workload costs on each FUSE system, with
their mean latency, from the kernel's `fuse:fuse_request_send` and
`fuse:fuse_request_end` tracepoints (tracefs; root only). Where `make bench`
says how long, this says why: which requests a workload sends and how many.

    python3 bench/requests.py [--systems passthrough_ll,scopefs,scopefs-shared]

Small sizes (1,000 files, 200 small files, a 16 MiB file, a 300-file tree),
one repetition; prints a Markdown table per system. `make bench-requests`.
"""

import argparse
import collections
import os
import shlex
import shutil
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)

import deps  # noqa: E402
import systems as sysmod  # noqa: E402
import workloads as wl  # noqa: E402
from run import scopefs_binary  # noqa: E402

TRACEFS = "/sys/kernel/tracing"
EVENTS = ("fuse/fuse_request_send", "fuse/fuse_request_end")
SIZES = wl.Sizes(
    files=1_000, small=200, big_mib=16, rand=1_000, tree=300, revokes=0, walk=0, reps=1, find_files=2_000, c_files=5
)


def tracefs_ready():
    if not os.path.isdir(os.path.join(TRACEFS, "events")):
        os.system(f"mount -t tracefs nodev {TRACEFS} 2>/dev/null")
    return all(os.path.isdir(os.path.join(TRACEFS, "events", e)) for e in EVENTS)


def write(name, value):
    with open(os.path.join(TRACEFS, name), "w") as f:
        f.write(value)


def start_tracing():
    write("buffer_size_kb", "65536")
    write("trace", "")
    for event in EVENTS:
        write(f"events/{event}/enable", "1")
    write("tracing_on", "1")


def stop_tracing():
    """-> {opcode: [count, total seconds from send to end]}"""
    write("tracing_on", "0")
    for event in EVENTS:
        write(f"events/{event}/enable", "0")
    stats = collections.defaultdict(lambda: [0, 0.0])
    sent = {}
    with open(os.path.join(TRACEFS, "trace")) as f:
        for line in f:
            for event in ("fuse_request_send:", "fuse_request_end:"):
                if event not in line:
                    continue
                stamp = float(line.split(event)[0].split()[-1].rstrip(":"))
                rest = line.split(event)[1].split()
                key = (rest[rest.index("connection") + 1], rest[rest.index("req") + 1])
                if event == "fuse_request_send:":
                    opcode = line.rsplit("(", 1)[1].split(")")[0].replace("FUSE_", "")
                    sent[key] = (opcode, stamp)
                    stats[opcode][0] += 1
                elif key in sent:
                    opcode, began = sent.pop(key)
                    stats[opcode][1] += stamp - began
    return stats


def measure(ctx, system, groups):
    """-> [(workload, seconds, stats)] for every workload phase."""
    out = []
    for group, _ in wl.GROUPS:
        if groups and group.__name__ not in groups:
            continue
        tag = f"{group.__name__}-{system.name}"
        phases = group(ctx, system, tag)
        while True:
            start_tracing()
            try:
                key, seconds = next(phases)
            except StopIteration:
                stop_tracing()
                break
            out.append((key, seconds, stop_tracing()))
        ctx.clean(tag)
    return out


def table(label, measured):
    lines = [
        f"### {label}",
        "",
        "| workload | requests | by opcode: count (mean µs from send to reply) |",
        "|---|---|---|",
    ]
    for key, _, stats in measured:
        total = sum(n for n, _ in stats.values())
        parts = [f"{op} {n:,} ({t / n * 1e6:.0f})" for op, (n, t) in sorted(stats.items(), key=lambda kv: -kv[1][0])]
        lines.append(f"| {key} | {total:,} | {', '.join(parts)} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fuse_systems = [c.name for c in sysmod.ALL if c.name not in ("native", "portal")]
    parser.add_argument("--systems", default=",".join(fuse_systems))
    parser.add_argument("--groups", default="", help="comma-separated workload groups (default: all)")
    parser.add_argument(
        "--scopefs-mount-args",
        default=os.environ.get("SCOPEFS_BENCH_MOUNT_ARGS", ""),
        help="extra arguments for `scopefs mount` (as in bench/run.py)",
    )
    args = parser.parse_args()
    groups = [g for g in args.groups.split(",") if g]
    chosen = args.systems.split(",")
    if os.geteuid() != 0 or not tracefs_ready():
        sys.exit("bench/requests.py: needs root and the kernel's fuse tracepoints in tracefs")
    fsops, ptll = deps.build_helpers()
    tmp = tempfile.mkdtemp(prefix="scopefs-requests-", dir="/dev/shm")
    backing = os.path.join(tmp, "backing")
    os.makedirs(os.path.join(backing, sysmod.WORKDIR))
    ctx = wl.Context(tmp, backing, fsops, ptll, scopefs_binary(), SIZES)
    ctx.mount_args = shlex.split(args.scopefs_mount_args)
    wl.make_tarball(ctx.tarball, SIZES.tree)
    try:
        for cls in sysmod.ALL:
            if cls.name not in chosen:
                continue
            system = cls(ctx)
            try:
                system.setup()
                ctx.daemon_pids = system.pids()
                print(table(system.label, measure(ctx, system, groups)), flush=True)
            finally:
                system.teardown()
    finally:
        if not any(m.startswith(tmp) for m in sysmod.mountpoints()):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
