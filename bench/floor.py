#!/usr/bin/env python3
"""The per-request floor: what one FUSE round trip of each kind costs in
ScopeFS next to libfuse's passthrough_ll and the native directory (issue
33). One process issues N requests of one kind (`fsops floor`: a LOOKUP of
a missing name, a forced GETATTR, an OPEN with its RELEASE, an OPENDIR
with its RELEASEDIR, a direct READ of 4 KiB, a GETXATTR of the ACL that
`ls -l` asks of every file), so

- microseconds per request: the wall time of 20,000, median of three
  runs, each daemon as `make bench` runs it (release build, no valgrind);
- instructions per request: callgrind counting only inside each daemon's
  request handlers (as bench/instructions.py), the difference between
  3,000 and 1,000 requests divided by 2,000, which repeats whatever else
  the machine does.

passthrough_ll runs with `-o xattr` here, so that its GETXATTR is a
round trip too (without it, its first answer, ENOSYS, makes the kernel
stop asking, which is the `ls -l` gap `make bench` shows).

ScopeFS runs twice: with requests read from /dev/fuse (libfuse's loop, as
by default), and with FUSE over io_uring (`scopefs mount --io-uring N`,
Linux 6.14+), for which the run sets the fuse module's `enable_uring`
parameter to Y and puts it back afterwards.

    python3 bench/floor.py [--count 20000]      (make bench-floor)
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)

import deps  # noqa: E402
import instructions  # noqa: E402

KINDS = ("lookup", "getattr", "open", "opendir", "read4k", "getxattr")
REQUESTS = {
    "lookup": "LOOKUP (a missing name)",
    "getattr": "GETATTR (statx FORCE_SYNC)",
    "open": "OPEN + RELEASE (+ FLUSH: passthrough_ll)",
    "opendir": "OPENDIR + RELEASEDIR",
    "read4k": "READ of 4 KiB (O_DIRECT)",
    "getxattr": "GETXATTR system.posix_acl_access",
}
# passthrough_ll's handlers these requests reach.
PTLL_FLOOR_HANDLERS = (
    "lo_lookup lo_getattr lo_open lo_read lo_flush lo_release lo_opendir lo_releasedir lo_getxattr lo_forget "
    "lo_forget_multi".split()
)
FILE_BYTES = 1 << 20
ENABLE_URING = "/sys/module/fuse/parameters/enable_uring"
SYSTEMS = ("passthrough_ll", "scopefs", "scopefs-ring")


class FloorDaemon(instructions.Daemon):
    """A daemon of bench/instructions.py that runs `fsops floor` phases."""

    def __init__(self, tmp, name, fsops, ptll, valgrind=True, ring_threads=2):
        self.valgrind = valgrind
        self.ring_threads = ring_threads
        super().__init__(tmp, name, fsops, ptll)
        self.file = os.path.join(self.root, "floor.bin")
        with open(os.path.join(self.backing, "work", "floor.bin"), "wb") as f:
            f.write(os.urandom(FILE_BYTES))

    # Hooks of instructions.Daemon: passthrough_ll with xattrs, and
    # either daemon with or without valgrind.
    def start_argv(self, argv):
        if self.name == "passthrough_ll":
            argv = [*argv[:-1], "-o", "xattr", argv[-1]]
            argv = [*argv[argv.index(self.ptll_path) :]] if not self.valgrind else argv
        elif not self.valgrind:
            argv = argv[argv.index(self.stripped) :]
        if self.name == "scopefs-ring":
            argv = [*argv, "--io-uring", str(self.ring_threads)]
        return argv

    def transport(self):
        """The mount's `daemon.fuseTransport` in `status --json`."""
        done = subprocess.run(
            [instructions.scopefs_binary(), "status", "--json"], env=self.env, capture_output=True, text=True
        )
        return json.loads(done.stdout)["daemon"]["fuseTransport"]

    def requests(self, kind, count):
        """Runs `count` requests of `kind` as the workload runs (an app in
        scope for ScopeFS); returns the instructions counted, if under
        valgrind, else the seconds fsops measured."""
        if self.valgrind:
            subprocess.run(["callgrind_control", "-z", str(self.process.pid)], check=True, capture_output=True)
        done = subprocess.run(
            self.wrap + [self.fsops, "floor", kind, self.file, str(count)],
            check=True,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if not self.valgrind:
            return float(done.stdout.split("RESULT", 1)[1].split()[1])
        subprocess.run(["callgrind_control", "-d", str(self.process.pid)], check=True, capture_output=True)
        self.dumps += 1
        return instructions.counted(self.out, self.dumps)


def native_seconds(fsops, tmp, kind, count):
    path = os.path.join(tmp, "native.bin")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(os.urandom(FILE_BYTES))
    done = subprocess.run([fsops, "floor", kind, path, str(count)], check=True, capture_output=True, text=True)
    return float(done.stdout.split("RESULT", 1)[1].split()[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20000, help="requests per timed run (default 20000)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per kind (default 3)")
    parser.add_argument("--no-instructions", action="store_true", help="times only, no callgrind")
    parser.add_argument("--ring-threads", type=int, default=2, help="--io-uring threads per queue (default 2)")
    args = parser.parse_args()
    if not args.no_instructions and shutil.which("valgrind") is None and not deps.apt_install(["valgrind"]):
        sys.exit("bench: valgrind is needed (apt-get install valgrind)")
    fsops, ptll = deps.build_helpers()
    instructions.PTLL_HANDLERS = PTLL_FLOOR_HANDLERS
    tmp = tempfile.mkdtemp(prefix="scopefs-floor-", dir="/dev/shm")
    micros = {kind: {} for kind in KINDS}
    counts = {kind: {} for kind in KINDS}
    systems = SYSTEMS
    uring_before = read_enable_uring()
    if uring_before is None or not set_enable_uring("Y"):
        deps.log(
            "bench: no FUSE over io_uring here (the fuse module's enable_uring cannot be set): its column is left out"
        )
        systems = SYSTEMS[:2]
    try:
        for kind in KINDS:
            runs = [native_seconds(fsops, tmp, kind, args.count) for _ in range(args.runs)]
            micros[kind]["native"] = statistics.median(runs) / args.count * 1e6
        for name in systems:
            # The ring changes the transport, not the handlers: times only.
            counted = not args.no_instructions and name != "scopefs-ring"
            for valgrind in (False, True) if counted else (False,):
                deps.log(f"bench: {name}{' under callgrind' if valgrind else ''}")
                daemon = FloorDaemon(
                    os.path.join(tmp, f"{name}-{valgrind}"), name, fsops, ptll, valgrind, args.ring_threads
                )
                try:
                    daemon.requests("open", 50)  # worker threads, the first app process
                    if name == "scopefs-ring" and (transport := daemon.transport())["transport"] != "io_uring":
                        sys.exit(f"bench: the mount asked for io_uring serves through {transport}")
                    for kind in KINDS:
                        if valgrind:
                            small, large = daemon.requests(kind, 1000), daemon.requests(kind, 3000)
                            counts[kind][name] = (large - small) / 2000
                        else:
                            runs = [daemon.requests(kind, args.count) for _ in range(args.runs)]
                            micros[kind][name] = statistics.median(runs) / args.count * 1e6
                finally:
                    daemon.stop()
    finally:
        if uring_before is not None:
            set_enable_uring(uring_before)
        if not any(os.path.ismount(m) for m, _, _ in os.walk(tmp) if m.endswith("mnt")):
            shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"\nThe per-request floor ({args.count:,} requests per run, median of {args.runs}; load {load:.1f}):\n")
    ring = "scopefs-ring" in systems
    ring_head = " ScopeFS io_uring µs | × passthrough_ll | io_uring × /dev/fuse |" if ring else ""
    print(
        "| request | native µs | passthrough_ll µs | ScopeFS µs | × passthrough_ll |"
        f"{ring_head} instructions passthrough_ll | ScopeFS |"
    )
    print("|---|---|---|---|---|" + ("---|---|---|" if ring else "") + "---|---|")
    for kind in KINDS:
        m, c = micros[kind], counts[kind]
        ratio = m["scopefs"] / m["passthrough_ll"]
        instr = [f"{c[n]:,.0f}" if n in c else "-" for n in ("passthrough_ll", "scopefs")]
        ring_cells = (
            f" {m['scopefs-ring']:.1f} | {m['scopefs-ring'] / m['passthrough_ll']:.2f}× "
            f"| {m['scopefs-ring'] / m['scopefs']:.2f}× |"
            if ring
            else ""
        )
        print(
            f"| {REQUESTS[kind]} | {m['native']:.1f} | {m['passthrough_ll']:.1f} | {m['scopefs']:.1f} "
            f"| {ratio:.2f}× |{ring_cells} {instr[0]} | {instr[1]} |"
        )


def read_enable_uring():
    try:
        with open(ENABLE_URING) as f:
            return f.read().strip()
    except OSError:
        return None


def set_enable_uring(value):
    try:
        with open(ENABLE_URING, "w") as f:
            f.write(value)
        return read_enable_uring() == value
    except OSError:
        return False


if __name__ == "__main__":
    main()
