#!/usr/bin/env python3
"""Instructions each FUSE daemon's own request handlers execute per file of
an untar, counted by callgrind. Where `make bench` times swing with this
VM's CPU steal, these counts repeat to within a few percent, so a change to
the daemon's hot path can be judged in one run.

    python3 bench/instructions.py [--files 1000,3000]

Each daemon runs under callgrind with collection on only inside its request
handlers (libfuse reads and replies the same way for both, and background
threads are left out): passthrough_ll's `lo_*` entry points, ScopeFS's
operation table and its wire hook. Two untars of different sizes give the
cost per file (their difference) and the cost per untar that does not grow
with it (for ScopeFS, identifying the new app processes).

valgrind comes from Debian. It cannot read the DWARF 5 of Swift 6 binaries,
so ScopeFS runs from a copy with its debug sections stripped (symbols stay).
`make bench-instructions`.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)

import deps  # noqa: E402
import workloads as wl  # noqa: E402
from run import scopefs_binary  # noqa: E402

# passthrough_ll's request handlers that an untar reaches, none called by another.
PTLL_HANDLERS = (
    "lo_lookup lo_create lo_mkdir lo_open lo_setattr lo_write_buf lo_flush lo_release "
    "lo_getattr lo_getxattr lo_forget lo_forget_multi"
).split()
# The @objc thunks libfuse calls (mangled names end in "To"); the closures they
# call match too, and a second match would toggle collection off.
SCOPEFS_HANDLERS = ("*10FuseBridge10Operations*To", "*13SetIDClearing*To")
APP, PROVIDER = "bench.app", "bench"


def callgrind(out, handlers):
    return [
        "valgrind",
        "--tool=callgrind",
        "--read-inline-info=no",
        f"--callgrind-out-file={out}",
        *(f"--toggle-collect={h}" for h in handlers),
    ]


def wait_mounted(path, daemon, timeout=120):
    deadline = time.monotonic() + timeout
    while not os.path.ismount(path):
        if daemon.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the daemon did not mount {path}")
        time.sleep(0.2)


def counted(out, dump):
    """Instructions in callgrind's dump number `dump`."""
    with open(f"{out}.{dump}") as f:
        for line in f:
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError(f"no summary in {out}.{dump}")


class Daemon:
    """One file system under callgrind, and how an untar reaches it."""

    def __init__(self, tmp, name, fsops, ptll):
        self.name, self.fsops = name, fsops
        self.backing = os.path.join(tmp, name, "backing")
        self.mnt = os.path.join(tmp, name, "mnt")
        self.out = os.path.join(tmp, name, "callgrind.out")
        os.makedirs(os.path.join(self.backing, "work"))
        os.makedirs(self.mnt)
        self.ptll_path = ptll
        if name == "passthrough_ll":
            argv = callgrind(self.out, PTLL_HANDLERS) + [ptll, "-f", "-o", "source=" + self.backing, self.mnt]
            self.root, self.wrap, self.env = os.path.join(self.mnt, "work"), [], None
        else:
            argv = self.scopefs(tmp)
        self.process = subprocess.Popen(
            self.start_argv(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env
        )
        wait_mounted(self.mnt, self.process)
        self.dumps = 0

    def scopefs(self, tmp):
        cli = scopefs_binary()
        stripped = os.path.join(tmp, "scopefs-stripped")
        if not os.path.exists(stripped):
            subprocess.run(["strip", "--strip-debug", "-o", stripped, cli], check=True)
        self.stripped = stripped
        state = os.path.join(tmp, "scopefs-state")
        self.env = dict(os.environ, SCOPEFS_STATE=state)
        for args in (
            ["init"],
            ["provider", "add", PROVIDER, self.backing],
            ["app", "add", APP],
            ["grant", APP, f"{PROVIDER}:work"],
        ):
            subprocess.run([cli, "--state", state, *args], check=True, env=self.env, capture_output=True)
        self.root = os.path.join(self.mnt, APP, "Providers", PROVIDER, "work")
        # As in `make bench`: an app process in scope runs fsops, which runs tar.
        # --no-sandbox where `run` confines by default: fsops and the tarball
        # are the bench's files on the host (SPEC S5).
        help_text = subprocess.run([cli, "run", "--help"], capture_output=True, text=True).stdout
        confine = ["--no-sandbox"] if "--no-sandbox" in help_text else []
        self.wrap = [
            cli,
            "--state",
            state,
            "run",
            "--app",
            APP,
            *confine,
            "--",
            cli,
            "--state",
            state,
            "scope",
            "exec",
            self.root,
            "--",
        ]
        return callgrind(self.out, SCOPEFS_HANDLERS) + [stripped, "--state", state, "mount", self.mnt, "--foreground"]

    def start_argv(self, argv):
        """The daemon's command line (bench/floor.py changes it)."""
        return argv

    def untar(self, tarball, tag):
        """Instructions the handlers executed for one untar into a new folder."""
        os.mkdir(os.path.join(self.backing, "work", tag))
        subprocess.run(["callgrind_control", "-z", str(self.process.pid)], check=True, capture_output=True)
        subprocess.run(
            self.wrap
            + [self.fsops, "run", "tar", "--no-same-owner", "-xf", tarball, "-C", os.path.join(self.root, tag)],
            check=True,
            env=self.env,
            capture_output=True,
            timeout=900,
        )
        subprocess.run(["callgrind_control", "-d", str(self.process.pid)], check=True, capture_output=True)
        self.dumps += 1
        return counted(self.out, self.dumps)

    def stop(self):
        subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # The larger one is `make bench`'s untar.
    parser.add_argument("--files", default="1000,3000", help="the two untar sizes (default 1000,3000)")
    args = parser.parse_args()
    small, large = sorted(int(n) for n in args.files.split(","))
    if shutil.which("valgrind") is None and not deps.apt_install(["valgrind"]):
        sys.exit("bench: valgrind is needed (apt-get install valgrind)")
    fsops, ptll = deps.build_helpers()
    tmp = tempfile.mkdtemp(prefix="scopefs-instructions-", dir="/dev/shm")
    rows = []
    try:
        tarballs = {}
        for n in (50, small, large):
            tarballs[n] = os.path.join(tmp, f"tree-{n}.tar")
            wl.make_tarball(tarballs[n], n)
        for name in ("passthrough_ll", "scopefs"):
            deps.log(f"bench: {name} under callgrind")
            daemon = Daemon(tmp, name, fsops, ptll)
            try:
                daemon.untar(tarballs[50], "warm-up")  # worker threads, first app process
                counts = {n: daemon.untar(tarballs[n], f"t{n}") for n in (small, large)}
            finally:
                daemon.stop()
            per_file = (counts[large] - counts[small]) / (large - small)
            rows.append((name, per_file, counts[small] - small * per_file))
    finally:
        if not any(os.path.ismount(os.path.join(tmp, d, "mnt")) for d in os.listdir(tmp)):
            shutil.rmtree(tmp, ignore_errors=True)
    base = rows[0][1]
    print(f"\nInstructions in the request handlers, untar of {small} and {large} files:\n")
    print("| daemon | per file | × passthrough_ll | per untar, not per file |")
    print("|---|---|---|---|")
    for name, per_file, fixed in rows:
        print(f"| {name} | {per_file:,.0f} | {per_file / base:.2f}× | {fixed / 1e6:,.1f} M |")


if __name__ == "__main__":
    main()
