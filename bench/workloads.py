"""The workloads, run identically on every system.

Each workload phase is one process of bench/fsops (or a real tool that
fsops starts and times), wrapped by the system so that on ScopeFS it runs
as an app process in scope. fsops measures the phase itself, so process
start-up, `scopefs run` and `scope exec` are not part of the numbers.
Set-up and clean-up (creating input files, deleting output) happen
directly in the backing directory and are not timed.
"""

import io
import os
import random
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass

import dev_workloads
from deps import log
from systems import WORKDIR


@dataclass
class Sizes:
    files: int  # create/stat/list/unlink
    small: int  # ls -lR and cat of files of 4 KiB
    big_mib: int  # sequential write/read
    rand: int  # random 4 KiB reads
    tree: int  # files in the untar tree
    revokes: int  # revocation latency samples
    walk: int  # files walked for the memory test
    reps: int
    find_files: int = 1_000  # find walk (dev_workloads)
    c_files: int = 10  # C files built by make
    sqlite_rows: int = 1_000  # rows inserted, one transaction each (dev_workloads)
    repo_usr_include: bool = False  # the git repository holds a copy of /usr/include too


FULL = Sizes(
    files=10_000,
    small=2_000,
    big_mib=512,
    rand=20_000,
    tree=3_000,
    revokes=100,
    walk=200_000,
    reps=5,
    find_files=50_000,
    c_files=30,
    sqlite_rows=5_000,
    repo_usr_include=True,
)
QUICK = Sizes(
    files=2_000,
    small=500,
    big_mib=64,
    rand=4_000,
    tree=600,
    revokes=20,
    walk=20_000,
    reps=1,
    find_files=5_000,
    c_files=10,
    repo_usr_include=False,
)


# Each phase's timed part starts this long after the previous phase ended:
# longer than the 1 s entry and attribute timeouts of every FUSE system here.
CACHE_GAP = 1.2
# Time given to a system's wrapper to start the phase's process.
STARTUP_ALLOWANCE = 0.3


class PhaseError(Exception):
    pass


def cpu_ticks(pids):
    """CPU time (user + system, all threads, in clock ticks) of PIDS."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total


def cpu_steal_seconds():
    """CPU time the hypervisor gave to other guests while this VM's CPUs
    wanted to run (/proc/stat "steal", all CPUs): noise no system here
    causes, so runs can be compared on how much of it they met."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def settle(pids, window=0.1, timeout=10.0):
    """Waits until the daemons of the systems under test (PIDS) have been
    idle — at most one clock tick of CPU — for two windows in a row (at most
    `timeout` seconds). Systems run in turn, and a daemon may go on working
    after its phase ended (the document portal keeps a core busy for
    seconds after a tree was deleted): without this the next system's phase
    would pay for it. Only our own daemons count, so other load on the
    machine does not stall the run."""
    if not pids:
        return 0.0
    began = time.monotonic()
    deadline = began + timeout
    before, quiet = cpu_ticks(pids), 0
    while quiet < 2 and time.monotonic() < deadline:
        time.sleep(window)
        now = cpu_ticks(pids)
        quiet = quiet + 1 if now - before <= 1 else 0
        before = now
    return time.monotonic() - began


class Context:
    def __init__(self, tmp, backing, fsops, passthrough_ll, scopefs, sizes):
        self.tmp, self.backing = tmp, backing
        self.fsops, self.passthrough_ll, self.scopefs = fsops, passthrough_ll, scopefs
        self.sizes = sizes
        self.workdir = os.path.join(backing, WORKDIR)
        self.resfile = os.path.join(tmp, "phase-result")
        self.tarball = os.path.join(tmp, "tree.tar")
        self.drop_method = None
        self.last_end = {}  # system name -> when its last phase ended (monotonic)
        self.daemon_pids = []  # every started system's daemon processes (settle)
        self.settled = 0.0  # seconds spent waiting for them to go idle
        self.phase_seconds = 0.0  # wall time of the timed phases' processes
        self.phase_steal = 0.0  # CPU seconds stolen by the hypervisor meanwhile
        self.mount_args = []  # extra arguments for `scopefs mount` (--scopefs-mount-args)
        self.templates = None  # dev_workloads' source trees, made on first use
        self.repo_files = 0  # files in the git workload's repository

    def phase(self, system, argv, timeout=600, fresh_cache=True, gap=CACHE_GAP):
        """Runs one fsops phase through SYSTEM; returns its seconds.

        With `fresh_cache`, the timed part starts GAP seconds (default
        CACHE_GAP) after the system's previous phase ended (fsops -s waits
        for that moment):
        every FUSE system here caches entries and attributes for 1 s, so each
        phase meets the same cache state however long the system's wrapper
        takes to start (`scopefs run` + `scope exec` take 0.1-0.2 s, a bare
        fsops a few ms)."""
        self.settled += settle(self.daemon_pids)
        start = time.monotonic() + STARTUP_ALLOWANCE
        if fresh_cache:
            start = max(start, self.last_end.get(system.name, 0.0) + gap)
        open(self.resfile, "w").close()
        cmd = system.wrap([self.fsops, "-o", self.resfile, "-s", f"{start:.6f}", *map(str, argv)])
        steal_before, began = cpu_steal_seconds(), time.monotonic()
        try:
            r = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise PhaseError(f"{argv[0]} timed out after {timeout} s")
        self.last_end[system.name] = time.monotonic()
        self.phase_seconds += self.last_end[system.name] - began
        self.phase_steal += cpu_steal_seconds() - steal_before
        with open(self.resfile) as f:
            lines = [ln.split() for ln in f if ln.startswith("RESULT ")]
        if r.returncode != 0 or not lines:
            err = r.stderr.strip().splitlines()
            # fsops says last that its command failed; the command's own
            # last words (a traceback's error line) come before.
            said = " — ".join(err[-2:]) if len(err) > 1 else err[-1] if err else "no output"
            raise PhaseError(f"{argv[0]} exited {r.returncode}: {said}")
        late = float(lines[-1][4]) if len(lines[-1]) > 4 else 0.0
        if late > 0.05:
            log(
                f"bench: {system.name} {argv[0]} started {late:.2f} s after its start time "
                "(its wrapper took longer than the allowance)"
            )
        return float(lines[-1][2])

    def drop_caches(self):
        """Drops clean page cache, dentries and inodes of every filesystem,
        FUSE mounts included (root only); fsops also fadvises the file."""
        os.sync()
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            self.drop_method = "sync; echo 3 > /proc/sys/vm/drop_caches; posix_fadvise(DONTNEED)"
        except OSError:
            self.drop_method = "posix_fadvise(POSIX_FADV_DONTNEED) on the file only (not root)"

    def native_create(self, system, rel, n, size):
        """Creates N files directly in SYSTEM's host folder (set-up, untimed)."""
        path = os.path.join(system.host_workdir, rel)
        subprocess.run(
            [self.fsops, "-o", "/dev/null", "create", path, str(n), str(size)], check=True, stdout=subprocess.DEVNULL
        )

    def clean(self, rel, system=None):
        """Removes a workload's leftovers from SYSTEM's host folder (the
        backing directory unless given; never a mount)."""
        path = os.path.join(system.host_workdir if system else self.workdir, rel)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)


def many_files(ctx, system, tag):
    d, n = os.path.join(system.root, tag), ctx.sizes.files
    yield "create", ctx.phase(system, ["create", d, n, 0])
    yield "stat", ctx.phase(system, ["stat", d, n])
    yield "list", ctx.phase(system, ["list", d, n])
    yield "unlink", ctx.phase(system, ["unlink", d, n])


def small_files(ctx, system, tag):
    ctx.native_create(system, tag, ctx.sizes.small, 4096)
    d = os.path.join(system.root, tag)
    yield "ls-lR", ctx.phase(system, ["run", "ls", "-lR", d])
    yield "ls-lR-expired", ctx.phase(system, ["run", "ls", "-lR", d], gap=dev_workloads.AFTER_EXPIRY)
    names = [os.path.join(d, f"f{i:05d}") for i in range(ctx.sizes.small)]
    yield "cat", ctx.phase(system, ["run", "cat", *names])


def big_file(ctx, system, tag):
    # Entries do not matter here (one file), the page cache does: no cache
    # gap, and one system at a time (see run.run_all).
    f = os.path.join(system.root, tag)
    # Start from an empty page cache: the previous system's 512 MiB (the
    # document portal keeps the pages of its deleted file) made the next
    # system's write up to 3x slower even with every CPU idle.
    ctx.drop_caches()
    yield "write", ctx.phase(system, ["write", f, ctx.sizes.big_mib], fresh_cache=False)
    ctx.drop_caches()
    yield "read-cold", ctx.phase(system, ["read", f, "cold"], fresh_cache=False)
    yield "read-warm", ctx.phase(system, ["read", f, "warm"], fresh_cache=False)
    yield "randread", ctx.phase(system, ["randread", f, ctx.sizes.rand], fresh_cache=False)


big_file.lockstep = False


def source_tree(ctx, system, tag):
    os.mkdir(os.path.join(system.host_workdir, tag))
    d = os.path.join(system.root, tag)
    yield "untar", ctx.phase(system, ["run", "tar", "--no-same-owner", "-xf", ctx.tarball, "-C", d])
    yield "rm-rf", ctx.phase(system, ["run", "rm", "-rf", os.path.join(d, "tree")])


# (group function, [(key, label template)]) in run and report order
GROUPS = [
    (
        many_files,
        [
            ("create", "create {files:,} files"),
            ("stat", "stat {files:,} files"),
            ("list", "list a {files:,}-entry folder"),
            ("unlink", "unlink {files:,} files"),
        ],
    ),
    (
        small_files,
        [
            ("ls-lR", "ls -lR of {small:,} files"),
            ("ls-lR-expired", "the same ls -lR after 2 s"),
            ("cat", "cat {small:,} files of 4 KiB"),
        ],
    ),
    (
        big_file,
        [
            ("write", "write {big_mib} MiB (1 MiB blocks)"),
            ("read-cold", "read {big_mib} MiB cold"),
            ("read-warm", "read {big_mib} MiB warm"),
            ("randread", "{rand:,} random 4 KiB reads"),
        ],
    ),
    (source_tree, [("untar", "untar a {tree:,}-file tree"), ("rm-rf", "rm -rf the {tree:,}-file tree")]),
] + dev_workloads.GROUPS


def labels(sizes, repo_files=0):
    values = {**vars(sizes), **dev_workloads.label_values(sizes, repo_files)}
    return {key: tmpl.format(**values) for _, keys in GROUPS for key, tmpl in keys}


def make_tarball(path, nfiles, seed=20240601):
    """A deterministic synthetic source tree: tree/pkgNN/modNN/fileNNN.{c,h,txt},
    sizes spread from 64 B to 32 KiB (log-uniform), fixed owner and mtime."""
    rng = random.Random(seed)
    blob = rng.randbytes(64 * 1024)
    per_dir = max(1, nfiles // 100)
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:

        def add_dir(name):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 1_700_000_000
            tar.addfile(info)

        add_dir("tree")
        count = 0
        for top in range(10):
            add_dir(f"tree/pkg{top:02d}")
            for sub in range(10):
                add_dir(f"tree/pkg{top:02d}/mod{sub:02d}")
                for i in range(per_dir):
                    if count == nfiles:
                        break
                    size = int(2 ** rng.uniform(6, 15))
                    off = rng.randrange(len(blob) - size)
                    info = tarfile.TarInfo(
                        f"tree/pkg{top:02d}/mod{sub:02d}/file{i:03d}." + rng.choice(("c", "h", "txt"))
                    )
                    info.size, info.mode, info.mtime = size, 0o644, 1_700_000_000
                    tar.addfile(info, io.BytesIO(blob[off : off + size]))
                    count += 1
    return count
