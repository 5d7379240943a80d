#!/usr/bin/env python3
"""ScopeFS benchmark (SPEC S38): the native directory, libfuse's C
passthrough_ll, xdg-document-portal and ScopeFS in strict mode, side by side
on the same backing directory.

    python3 bench/run.py [--backing tmpfs|ext4] [--quick] [--out bench-results/]
    python3 bench/run.py --set remote [--quick] ...   (cloud storage: bench/remote.py)

See bench/README.md.
"""

import argparse
import datetime
import os
import platform
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import deps  # noqa: E402
import folder_walk  # noqa: E402
import remote  # noqa: E402
import report  # noqa: E402
import scopefs_costs  # noqa: E402
import systems as sysmod  # noqa: E402
import workloads as wl  # noqa: E402
from deps import log  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKINGS = {"tmpfs": "/dev/shm", "ext4": "/var/tmp"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--set",
        choices=["local", "remote"],
        default="local",
        help="local: the folder systems (default); remote: cloud-storage clients on one S3 server "
        "(`bench/run.py --set remote --help` lists its own options)",
    )
    p.add_argument(
        "--backing",
        choices=sorted(BACKINGS),
        default="tmpfs",
        help="where the backing directory lives: tmpfs (/dev/shm, default) or ext4 (/var/tmp)",
    )
    p.add_argument("--quick", action="store_true", help="1 repetition and small sizes (smoke run)")
    p.add_argument(
        "--out",
        default=os.path.join(REPO, "bench-results"),
        help="folder for results.json and chart.png (default: bench-results/)",
    )
    p.add_argument("--reps", type=int, help="repetitions (default 5, or 1 with --quick)")
    p.add_argument(
        "--systems",
        default=",".join(c.name for c in sysmod.DEFAULT),
        help="comma-separated subset of: "
        + ", ".join(c.name for c in sysmod.ALL)
        + " (default: all but "
        + ", ".join(c.name for c in sysmod.ALL if c not in sysmod.DEFAULT)
        + ", which starts a PostgreSQL server)",
    )
    group_names = [g.__name__ for g, _ in wl.GROUPS]
    p.add_argument(
        "--groups",
        help="comma-separated subset of the workload groups ("
        + ", ".join(group_names)
        + "): a partial run for development, without the ScopeFS-specific costs; docs/ untouched",
    )
    p.add_argument(
        "--scopefs-mount-args",
        default=os.environ.get("SCOPEFS_BENCH_MOUNT_ARGS", ""),
        help="extra arguments for `scopefs mount`, one shell-quoted string (default: "
        '$SCOPEFS_BENCH_MOUNT_ARGS), e.g. "--open-files keep"',
    )
    p.add_argument(
        "--folder-walk",
        type=int,
        metavar="N",
        help="also walk a granted tree of N folders through ScopeFS (opt-in row, e.g. 1000000; "
        "bench/folder_walk.py runs it alone)",
    )
    p.add_argument(
        "--node-budget-walk",
        type=int,
        metavar="N",
        help="walk a granted tree of N folders with the default node budget and with none "
        "(`--max-nodes 0`): RSS, node count and time of each (default 200000 in full runs, "
        "skipped with --quick; 0: skip)",
    )
    docs = p.add_mutually_exclusive_group()
    docs.add_argument(
        "--docs",
        dest="docs",
        action="store_true",
        default=None,
        help="update docs/PERFORMANCE.md (default for full runs)",
    )
    docs.add_argument("--no-docs", dest="docs", action="store_false", help="do not touch docs/ (default for --quick)")
    a = p.parse_args()
    a.systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    unknown = set(a.systems) - {c.name for c in sysmod.ALL}
    if unknown or "native" not in a.systems:
        p.error("--systems: unknown " + ", ".join(sorted(unknown)) if unknown else "--systems must include native")
    a.scopefs_mount_args = shlex.split(a.scopefs_mount_args)
    a.partial = a.groups is not None
    a.groups = [g.strip() for g in (a.groups or ",".join(group_names)).split(",") if g.strip()]
    if set(a.groups) - set(group_names):
        p.error("--groups: unknown " + ", ".join(sorted(set(a.groups) - set(group_names))))
    if a.docs is None:
        a.docs = not (a.quick or a.partial)
    if a.node_budget_walk is None:
        a.node_budget_walk = 0 if a.quick else 200_000
    return a


def fit_descriptor_limit(sizes):
    """Raises the descriptor limit for the daemons the bench starts (they
    inherit it; ScopeFS's daemon raises its own soft limit itself), and
    shrinks the find walk to what passthrough_ll and the document portal
    can serve when it cannot: both hold a descriptor for every inode the
    kernel knows, so a walk over more files than their limit fails with
    EMFILE. (The walk starts with the kernel's caches dropped: the inodes
    of earlier workloads took them past a limit of 20,000 at 15,000 files.)"""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = sizes.find_files * 4 // 3 + 1_000
    if hard != resource.RLIM_INFINITY and hard < want:
        try:  # with CAP_SYS_RESOURCE, up to fs.nr_open
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
            soft = hard = want
        except (ValueError, OSError):
            pass
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    cap = sizes.find_files if hard == resource.RLIM_INFINITY else hard * 3 // 4 // 1000 * 1000
    if sizes.find_files > cap:
        log(
            f"bench: find walk over {cap:,} files, not {sizes.find_files:,}: the descriptor limit here is "
            f"{hard:,}, and passthrough_ll and the portal need one per file the kernel holds"
        )
        sizes = wl.Sizes(**{**vars(sizes), "find_files": cap})
    return sizes


def scopefs_binary():
    path = os.environ.get("SCOPEFS_BIN") or os.path.join(REPO, ".build", "release", "scopefs")
    return os.path.abspath(path)


def machine_info(backing, backing_path):
    def first(path, key):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(key):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return "?"

    def cmd(*argv):
        r = subprocess.run(argv, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else ""

    os_name = ""
    if os.path.exists("/etc/os-release"):
        with open("/etc/os-release") as f:
            os_name = next((ln.split("=", 1)[1].strip().strip('"') for ln in f if ln.startswith("PRETTY_NAME=")), "")
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": first("/proc/cpuinfo", "model name"),
        "memory_gib": int(first("/proc/meminfo", "MemTotal").split()[0]) / 1024 / 1024,
        "kernel": platform.release(),
        "os": os_name,
        "backing": backing,
        "backing_path": backing_path,
        "libfuse": cmd("pkg-config", "--modversion", "fuse3"),
        "portal": cmd("dpkg-query", "-W", "-f", "${Version}", "xdg-desktop-portal"),
        "git": cmd("git", "-C", REPO, "rev-parse", "--short", "HEAD"),
    }


def _sigterm(signum, frame):
    raise SystemExit(128 + signum)  # runs the finally blocks: unmount and clean up


def start_systems(ctx, names, results, started):
    """Sets up the systems; STARTED gets each one before its set-up begins, so
    that an interrupted set-up is torn down too."""
    for cls in sysmod.ALL:
        if cls.name not in names:
            continue
        s = cls(ctx)
        entry = {"label": s.label}
        results["systems"][s.name] = entry
        log(f"bench: starting {s.label}")
        started.append(s)
        try:
            s.setup()
            entry.update(status="ok", **s.info())
            log(f"bench:   {s.label} at {s.root}")
            continue
        except sysmod.Skip as e:
            entry.update(status="skipped", reason=str(e))
            log(f"bench: SKIPPING {s.label}: {e}")
        except (sysmod.SetupError, OSError, subprocess.SubprocessError) as e:
            entry.update(status="failed", reason=str(e))
            log(f"bench: FAILED to start {s.label}: {e}")
        s.teardown()
        started.remove(s)


class GroupRun:
    """One system's run of one workload group, a phase at a time."""

    def __init__(self, ctx, group, keys, system, rep, results):
        self.ctx, self.keys, self.system, self.results = ctx, keys, system, results
        self.tag = f"{group.__name__}-{system.name}-r{rep}"
        self.name = group.__name__
        self.phases = group(ctx, system, self.tag)
        self.done = set()
        self.finished = False

    def step(self):
        """Runs the next phase; False once the group has finished or failed."""
        if self.finished:
            return False
        try:
            key, seconds = next(self.phases)
        except StopIteration:
            return self._finish()
        except (wl.PhaseError, OSError, subprocess.SubprocessError) as e:
            log(f"bench:   {self.system.name} {self.name}: {e}")
            for key, _ in self.keys:
                if key not in self.done:
                    self._entry(key)["error"] = str(e)
            return self._finish()
        self._entry(key)["samples"].append(seconds)
        self.done.add(key)
        return True

    def _entry(self, key):
        return self.results["workloads"].setdefault(key, {}).setdefault(self.system.name, {"samples": []})

    def _finish(self):
        self.finished = True
        self.ctx.clean(self.tag, self.system)
        return False


def run_all(ctx, started, results, group_names):
    """Systems alternate within each repetition, and their order rotates.
    Groups run phase by phase across the systems (A's create, B's create,
    ..., A's stat, ...), so that the pause each system's caches need
    between its phases (workloads.CACHE_GAP) is mostly spent on the others;
    a group that drops the page cache in the middle (big_file) runs one
    system at a time, or the drop would hit the others' warm reads."""
    ctx.daemon_pids = [pid for s in started for pid in s.pids()]
    sizes = ctx.sizes
    for rep in range(sizes.reps):
        # The document portal runs last in every repetition: the system
        # that follows it pays for work it leaves behind, and with a plain
        # rotation that was the same system (ScopeFS) in 4 of 5 repetitions.
        # The others rotate, so each follows it equally often.
        rotating = [s for s in started if not s.leaves_work_behind]
        last = [s for s in started if s.leaves_work_behind]
        shift = rep % len(rotating) if rotating else 0
        order = rotating[shift:] + rotating[:shift] + last
        for group, keys in wl.GROUPS:
            if group.__name__ not in group_names:
                continue
            log(f"bench: rep {rep + 1}/{sizes.reps} {group.__name__}: " + " ".join(s.name for s in order))
            runs = [GroupRun(ctx, group, keys, s, rep, results) for s in order]
            if getattr(group, "lockstep", True):
                while any([run.step() for run in runs]):
                    pass
            else:
                for run in runs:
                    while run.step():
                        pass


def scopefs_extras(ctx, sfs, results, folders=None, budget_folders=None):
    costs = results["scopefs_costs"]
    walks = [("folder_walk", f"walk of {folders:,} folders", folder_walk.folder_walk, folders)] if folders else []
    if budget_folders:
        walks.append(
            (
                "node_budget",
                f"walks of {budget_folders:,} folders with and without the node budget",
                folder_walk.budget_walks,
                budget_folders,
            )
        )
    # The memory row unmounts ScopeFS at its end: it comes last.
    for key, what, fn, n in walks + [
        (
            "revocation",
            f"revocation latency ({ctx.sizes.revokes} revokes)",
            scopefs_costs.revocation,
            ctx.sizes.revokes,
        ),
        ("memory", f"daemon memory while walking {ctx.sizes.walk:,} files", scopefs_costs.memory, ctx.sizes.walk),
    ]:
        log("bench: ScopeFS " + what)
        try:
            costs[key] = fn(ctx, sfs, n)
        except (wl.PhaseError, OSError, subprocess.SubprocessError) as e:
            costs[key] = {"error": str(e)}
            log(f"bench:   failed: {e}")


def cleanup(tmp, started):
    for s in reversed(started):
        try:
            s.teardown()
        except Exception as e:  # keep tearing the others down
            log(f"bench: teardown of {s.name} failed: {e}")
    left = [m for m in sysmod.mountpoints() if m == tmp or m.startswith(tmp + "/")]
    if left:
        log("bench: NOT removing " + tmp + ": still mounted: " + ", ".join(left))
        return
    subprocess.run(["rm", "-rf", "--one-file-system", tmp])


def workload_set(argv):
    """The --set argument ("local" unless given) and the other arguments."""
    pick = argparse.ArgumentParser(add_help=False)
    pick.add_argument("--set", choices=["local", "remote"], default="local")
    known, rest = pick.parse_known_args(argv)
    return known.set, rest


def main():
    chosen, rest = workload_set(sys.argv[1:])
    if chosen == "remote":
        return remote.main(rest)
    args = parse_args()
    t_start = time.monotonic()
    sizes = wl.QUICK if args.quick else wl.FULL
    if args.reps:
        sizes = wl.Sizes(**{**vars(sizes), "reps": args.reps})
    sizes = fit_descriptor_limit(sizes)
    scopefs = scopefs_binary() if any(name.startswith("scopefs") for name in args.systems) else None
    if scopefs and not os.access(scopefs, os.X_OK):
        sys.exit(
            f"bench: no ScopeFS binary at {scopefs}: build it (swift build -c release), set "
            "SCOPEFS_BIN, or leave it out with --systems native,passthrough_ll,portal"
        )
    if os.geteuid() != 0:
        log("bench: not root: cold reads fall back to posix_fadvise, apt installs will fail")
    deps.ensure_packages(portal="portal" in args.systems)
    fsops, ptll = deps.build_helpers()
    plt = deps.ensure_matplotlib()

    signal.signal(signal.SIGTERM, _sigterm)
    tmp = tempfile.mkdtemp(prefix="scopefs-bench-", dir=BACKINGS[args.backing])
    backing = os.path.join(tmp, "backing")
    os.makedirs(os.path.join(backing, sysmod.WORKDIR))
    ctx = wl.Context(tmp, backing, fsops, ptll, scopefs, sizes)
    ctx.mount_args = args.scopefs_mount_args
    results = {
        "machine": machine_info(args.backing, backing),
        "config": {
            "quick": args.quick,
            "reps": sizes.reps,
            "sizes": vars(sizes),
            "scopefs_mount_args": args.scopefs_mount_args,
        },
        "systems": {},
        "workloads": {},
        "scopefs_costs": {},
    }
    log(f"bench: backing directory {backing}")
    started = []
    try:
        results["config"]["tree_files"] = wl.make_tarball(ctx.tarball, sizes.tree)
        start_systems(ctx, args.systems, results, started)
        run_all(ctx, started, results, args.groups)
        results["config"]["repo_files"] = ctx.repo_files
        results["config"]["settle_seconds"] = round(ctx.settled, 1)
        results["config"]["phase_seconds"] = round(ctx.phase_seconds, 1)
        results["config"]["phase_steal_seconds"] = round(ctx.phase_steal, 1)
        log(f"bench: waited {ctx.settled:.0f} s in all for the daemons to go idle between phases")
        sfs = next((s for s in started if s.name == "scopefs"), None)
        if sfs and not args.partial:
            scopefs_extras(ctx, sfs, results, args.folder_walk, args.node_budget_walk)
    finally:
        cleanup(tmp, started)
    if scopefs and not args.partial:
        pol = scopefs_costs.policy_bench(scopefs)
        if pol:
            results["scopefs_costs"]["policy_bench"] = pol

    for per in results["workloads"].values():
        for entry in per.values():
            entry["summary"] = report.summarise(entry["samples"])
    results["config"]["drop_method"] = ctx.drop_method
    names = [n for n, v in results["systems"].items() if v["status"] != "skipped"]
    labels = wl.labels(sizes, ctx.repo_files)
    table = report.rows(results, names, labels, sizes)

    os.makedirs(args.out, exist_ok=True)
    chart_path = os.path.join(args.out, "chart.png")
    if not (plt and report.chart(plt, results, names, labels, chart_path)):
        chart_path = None
    results["total_seconds"] = time.monotonic() - t_start
    report.write_json(results, os.path.join(args.out, "results.json"))
    if args.docs:
        report.write_docs(results, table, chart_path, REPO, labels)

    print()
    for v in results["systems"].values():
        if v["status"] != "ok":
            print(f"{v['label']}: {v['status']} — {v['reason']}")
    print(report.text_table(table))
    print("\nGoals (issue 33)\n" + report.goals_section(results, labels))
    fleet = report.fleet_section(results, labels)
    if fleet:
        print("\nThe fleet's shared store against SQLite (issue 34)\n" + fleet)
    portal = report.portal_section(results, labels)
    if portal:
        print("\nScopeFS's portal layout against the reference portal (issue 52)\n" + portal)
    extra = report.scopefs_section(results)
    if extra:
        print("\nScopeFS-specific costs\n" + extra)
    print(
        f"\nresults: {os.path.join(args.out, 'results.json')}"
        + (f", chart: {chart_path}" if chart_path else "")
        + (", docs/PERFORMANCE.md updated" if args.docs else "")
    )
    print(f"whole run: {results['total_seconds']:.0f} s")
    failed = [n for n, v in results["systems"].items() if v["status"] == "failed"]
    comparison = {c.name for c in sysmod.ALL if c.comparison_only}
    failed += [
        f"{n}:{k}"
        for k, per in results["workloads"].items()
        for n, e in per.items()
        if "error" in e and n not in comparison
    ]
    failed += [f"scopefs:{k}" for k, v in results["scopefs_costs"].items() if "error" in v]
    if failed:
        print("FAILURES: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
