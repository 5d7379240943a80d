"""Grants at scale (issue 34, docs/PERFORMANCE.md "A fleet"): APPS apps
each granted the same GRANTS files of one provider folder (100 x 10,000 by
default: 1,000,000 grant rows on 10,000 item rows), on the fleet's store
(a throwaway PostgreSQL 15, Tests/integration/postgres_server.py) and on SQLite.

For each store it measures:
- install: each app's `grant --from LIST` (`fleet grant` on the fleet's
  store), one transaction per app; the first app records the items too;
- mount: a host joining with `scopefs mount --database` and a host role
  (SQLite: `scopefs mount`), timed until the mount is ready, i.e. after
  the daemon's first snapshot; then the daemon's VmRSS and VmHWM;
- revoke to EPERM: an app process (default sandbox, strict scopes) reads
  one granted file every 2 ms; the owner revokes that one grant and
  restores it, ROUNDS times: p50/p99 from the CLI's start and from the
  commit (the revoke event's time), and the daemon's own reload times
  (its debug log: snapshot read, then install);
- one more grant, and revoking and restoring all of one app's grants, at
  this scale (CLI wall time).

With `--resolvers N`, another app keeps N bookmark resolutions in flight
(threads of one process, through the app's control socket) during the
revoke rounds: what a busy app's requests cost another app's revocation.

The load average is printed next to every figure. Results go to
bench-results/fleet-scale.json.

    SCOPEFS_BIN=.build/release/scopefs python3 bench/fleet_scale.py \\
        [--apps 100] [--grants 10000] [--rounds 30] [--stores postgresql,sqlite] [--resolvers 8]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "Tests" / "integration"))

from postgres_server import PostgresServer  # noqa: E402
from transition_reader import TransitionReader, reader_command  # noqa: E402

PROVIDER = "bench"
HOST_ROLE = "scopefs_host_bench"
FILES_PER_FOLDER = 100
MOUNT_TIMEOUT = 1800  # seconds: the first snapshot of a million grants, before any fix, took minutes

# The daemon's line after each snapshot it installs (PolicyReloader, debug
# level): what it read (the changes, or the whole policy), how long that and
# the install took.
RELOAD_LINE = re.compile(
    r"policy version (\d+): read (\d+ changed grants of \d+|the whole policy) in ([\d.]+) ms, "
    r"installed in ([\d.]+) ms"
)


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def log(text: str) -> None:
    print(f"fleet-scale: {text} (load {load()})", file=sys.stderr, flush=True)


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "max": ordered[-1],
        "n": len(ordered),
    }


class State:
    """One state directory and the CLI that runs on it."""

    def __init__(self, binary: str, path: Path, env: dict):
        self.binary, self.path, self.env = binary, path, env

    def argv(self, *args) -> list[str]:
        return [self.binary, "--state", str(self.path), *map(str, args)]

    def cli(self, *args, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run(
            self.argv(*args), capture_output=True, text=True, env=self.env, timeout=timeout, stdin=subprocess.DEVNULL
        )
        if check and p.returncode != 0:
            raise RuntimeError(f"scopefs {' '.join(map(str, args))[:200]} exited {p.returncode}: {p.stderr[-2000:]}")
        return p

    def timed(self, *args, timeout: float = 600) -> float:
        started = time.monotonic()
        self.cli(*args, timeout=timeout)
        return time.monotonic() - started

    def daemon_pid(self) -> int:
        return int(json.loads(self.cli("status", "--json").stdout)["daemon"]["pid"])


def app_reader(state: State, app: str, path: str, seconds: float) -> TransitionReader:
    """The reader (Tests/integration/transition_reader.py) as an app process."""
    return TransitionReader(state.argv("run", "--app", app, "--", *reader_command(path, seconds)), state.env)


# Resolves a bookmark of argv[1] in argv[2] threads until stdin closes;
# prints how many resolutions were answered, and how many refused.
RESOLVER = """
import sys, threading
sys.path.insert(0, sys.argv[3])
import scopefs
token = scopefs.bookmark_data(sys.argv[1])
counts = {"answered": 0, "refused": 0}
lock = threading.Lock()
done = threading.Event()
def loop():
    while not done.is_set():
        try:
            scopefs.resolve_bookmark(token)
            key = "answered"
        except Exception:
            key = "refused"
        with lock:
            counts[key] += 1
threads = [threading.Thread(target=loop) for _ in range(int(sys.argv[2]))]
for t in threads:
    t.start()
print("ready", flush=True)
sys.stdin.read()
done.set()
for t in threads:
    t.join()
print(counts, flush=True)
"""


def start_resolvers(state: State, app: str, path: str, threads: int) -> subprocess.Popen:
    """An app process resolving a bookmark of PATH in THREADS threads."""
    argv = state.argv(
        "run", "--app", app, "--no-sandbox", "--", sys.executable, "-c", RESOLVER, path, threads,
        ROOT / "clients" / "python",
    )  # fmt: skip
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=state.env
    )
    if process.stdout.readline().strip() != "ready":
        raise RuntimeError("the resolving app did not start")
    return process


def make_files(folder: Path, count: int) -> list[str]:
    """COUNT small files in folders of 100; their provider-relative paths."""
    paths = []
    for index in range(count):
        rel = f"d{index // FILES_PER_FOLDER:04}/f{index % FILES_PER_FOLDER:03}.txt"
        file = folder / rel
        file.parent.mkdir(exist_ok=True)
        file.write_bytes(b"%d\n" % index)
        paths.append(rel)
    (folder / "extra.txt").write_bytes(b"one more\n")
    return paths


def memory(pid: int) -> dict:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) // 1024  # MiB
    return {"rss_mib": fields["VmRSS"], "hwm_mib": fields["VmHWM"], "load": load()}


def reloads(state: State, since: int) -> list[dict]:
    """The daemon's reload lines logged after byte SINCE of its log."""
    text = (state.path / "daemon.log").read_bytes()[since:].decode(errors="replace")
    return [
        {"version": int(m[1]), "read": m[2], "read_ms": float(m[3]), "install_ms": float(m[4])}
        for m in RELOAD_LINE.finditer(text)
    ]


def log_size(state: State) -> int:
    path = state.path / "daemon.log"
    return path.stat().st_size if path.exists() else 0


class Store:
    """How one store is set up and changed; `owner` changes it, `host` mounts."""

    name = "?"

    def __init__(self, binary: str, root: Path, env: dict):
        self.binary, self.root, self.env = binary, root, env
        self.owner = State(binary, root / "owner", env)
        self.host = self.owner

    def grant_all(self, app: str, listed: Path) -> None:
        raise NotImplementedError

    def revoke(self, app: str, grant: int | None) -> None:
        raise NotImplementedError

    def restore(self, app: str, grant: int | None) -> None:
        raise NotImplementedError


class FleetStore(Store):
    name = "postgresql"

    def setup(self, apps: list[str], folder: Path) -> None:
        self.server = PostgresServer()
        self.owner.cli(
            "init", "--database", self.server.url(), "--password-file", self.server.password_file,
            "--host-name", "owner",
        )  # fmt: skip
        self.owner.cli("fleet", "add-provider", PROVIDER, folder)
        for app in apps:
            self.owner.cli("fleet", "add-app", app)
        self.password = self.root / "host.pw"
        self.password.write_text("host-" + os.urandom(8).hex() + "\n")
        os.chmod(self.password, 0o600)
        self.owner.cli("fleet", "add-host", HOST_ROLE, "--password-file", self.password)
        self.host = State(self.binary, self.root / "host", self.env)

    def grant_all(self, app, listed):
        self.owner.cli("fleet", "grant", app, "--from", listed)

    def grant_one(self, app, rel):
        self.owner.cli("fleet", "grant", app, f"{PROVIDER}:{rel}")

    def mount_args(self, mnt: Path) -> list:
        return ["mount", mnt, "--log", "file", "--database", self.server.url(HOST_ROLE),
                "--password-file", self.password, "--host-name", "bench-host"]  # fmt: skip

    def grant_ids(self, app: str) -> dict[str, int]:
        grants = json.loads(self.owner.cli("fleet", "grants", app, "--json").stdout)
        return {g["relativePath"]: g["id"] for g in grants}

    def revoke(self, app, grant):
        self.owner.cli("fleet", "revoke", app, *(["--grant", grant] if grant else []))

    def restore(self, app, grant):
        self.owner.cli("fleet", "restore", app, *(["--grant", grant] if grant else []))

    def revoke_times(self, app: str, grant: int) -> list[float]:
        events = json.loads(self.owner.cli("fleet", "events", "--app", app, "--limit", "100000", "--json").stdout)
        return [e["time"] for e in events if e["kind"] == "revoke" and e.get("grant") == grant]

    def size(self) -> int:
        out = self.server.psql("SELECT pg_database_size(current_database())").stdout.strip()
        return int(out)

    def close(self) -> None:
        if hasattr(self, "server"):
            self.server.close()


class SQLiteStore(Store):
    name = "sqlite"

    def setup(self, apps: list[str], folder: Path) -> None:
        self.owner.cli("init")
        self.owner.cli("provider", "add", PROVIDER, folder)
        for app in apps:
            self.owner.cli("app", "add", app)

    def grant_all(self, app, listed):
        self.owner.cli("grant", app, "--from", listed, "--read-only")

    def grant_one(self, app, rel):
        self.owner.cli("grant", app, f"{PROVIDER}:{rel}", "--read-only")

    def mount_args(self, mnt: Path) -> list:
        return ["mount", mnt, "--log", "file"]

    def grant_ids(self, app: str) -> dict[str, int]:
        grants = json.loads(self.owner.cli("privacy", app, "--json").stdout)
        return {g["path"]: g["grant"] for g in grants}

    def revoke(self, app, grant):
        self.owner.cli("revoke", app, *([grant] if grant else ["--all"]))

    def restore(self, app, grant):
        self.owner.cli("restore", app, *([grant] if grant else ["--all"]))

    def revoke_times(self, app: str, grant: int) -> list[float]:
        out = self.owner.cli("events", "--app", app, "--kind", "revoke", "--json").stdout
        events = [json.loads(line) for line in out.splitlines() if line.strip()]
        # ISO 8601 to the millisecond, as every `--json` writes times.
        return [
            datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()
            for e in events
            if e.get("grant") == grant
        ]

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.owner.path.glob("scopefs.sqlite*"))

    def close(self) -> None:
        pass


def measure(store: Store, apps: list[str], paths: list[str], folder: Path, rounds: int, resolvers: int) -> dict:
    """One store's figures; its server is stopped at the end, whatever happened."""
    try:
        return measure_store(store, apps, paths, folder, rounds, resolvers)
    finally:
        store.close()


def measure_store(store: Store, apps: list[str], paths: list[str], folder: Path, rounds: int, resolvers: int) -> dict:
    result: dict = {"store": store.name, "apps": len(apps), "grants_per_app": len(paths)}
    store.setup(apps, folder)
    listed = store.root / "items.txt"
    listed.write_text("".join(f"{PROVIDER}:{rel}\n" for rel in paths))

    log(f"{store.name}: installing {len(apps)} x {len(paths):,} grants")
    installs = []
    started = time.monotonic()
    for index, app in enumerate(apps):
        t = time.monotonic()
        store.grant_all(app, listed)
        installs.append(time.monotonic() - t)
        if index in (0, len(apps) - 1) or index % 10 == 9:
            log(f"{store.name}:   app {index + 1}: {installs[-1]:.2f} s")
    result["install"] = {
        "first_app_s": installs[0],
        "other_apps_median_s": statistics.median(installs[1:]) if len(installs) > 1 else None,
        "other_apps_max_s": max(installs[1:]) if len(installs) > 1 else None,
        "total_s": time.monotonic() - started,
        "load": load(),
        "store_bytes": store.size(),
    }
    log(f"{store.name}: install {result['install']}")

    mnt = store.root / "mnt"
    mnt.mkdir()
    t = time.monotonic()
    try:
        store.host.cli(*store.mount_args(mnt), timeout=MOUNT_TIMEOUT)
    except RuntimeError as e:
        result["mount"] = {"error": str(e)[-500:], "after_s": time.monotonic() - t, "load": load()}
        log(f"{store.name}: mount failed: {e}")
        store.host.cli("unmount", mnt, check=False, timeout=300)
        return result
    result["mount"] = {"ready_s": time.monotonic() - t, "load": load()}
    pid = store.host.daemon_pid()
    result["mount"]["after_first_snapshot"] = memory(pid)
    log(f"{store.name}: mount {result['mount']}")
    try:
        result.update(changes(store, apps, paths, mnt, pid, rounds, resolvers))
    finally:
        store.host.cli("unmount", mnt, check=False, timeout=300)
    return result


def changes(store: Store, apps: list[str], paths: list[str], mnt: Path, pid: int, rounds: int, resolvers: int) -> dict:
    result: dict = {}
    app, rel = apps[0], paths[0]
    grant = store.grant_ids(app)[rel]
    reader = app_reader(store.host, app, f"{mnt}/{app}/Providers/{PROVIDER}/{rel}", seconds=3600)
    since = log_size(store.host)
    from_cli, cli_seconds, denied = [], [], []
    busy = None
    if resolvers:
        other = apps[1 % len(apps)]
        busy = start_resolvers(store.host, other, f"{mnt}/{other}/Providers/{PROVIDER}/{paths[-1]}", resolvers)
    try:
        reader.wait_for("ok", 600)
        log(f"{store.name}: {rounds} revokes of one grant, each restored")
        for _ in range(rounds):
            reader.forget()
            t = time.time()
            store.revoke(app, grant)
            cli_seconds.append(time.time() - t)
            denied.append(reader.wait_for("EPERM", 600)["t"])
            from_cli.append(denied[-1] - t)
            reader.forget()
            store.restore(app, grant)
            reader.wait_for("ok", 600)
    except (RuntimeError, AssertionError) as e:  # a CLI that failed, a reader that saw nothing
        result["revoke_to_eperm"] = {"error": str(e)[-500:], "after_rounds": len(denied), "load": load()}
        log(f"{store.name}: the revoke rounds failed: {e}")
    finally:
        reader.close()
        if busy is not None:
            out, _ = busy.communicate("", timeout=120)
            result["resolutions_meanwhile"] = {"threads": resolvers, "counts": out.strip()}
    if denied and "revoke_to_eperm" not in result:
        committed = store.revoke_times(app, grant)[-len(denied) :]
        result["revoke_to_eperm"] = {
            "from_cli_start": percentiles(from_cli),
            "from_commit": percentiles([d - c for d, c in zip(denied, committed, strict=True)]),
            "revoke_cli": percentiles(cli_seconds),
            "load": load(),
        }
    seen = reloads(store.host, since)
    if seen:
        result["daemon_reload"] = {
            "read_ms": percentiles([r["read_ms"] for r in seen]),
            "install_ms": percentiles([r["install_ms"] for r in seen]),
            "reads": sorted({r["read"] for r in seen}),
        }
    result["after_rounds"] = memory(pid)
    log(f"{store.name}: {result}")

    other = apps[1 % len(apps)]
    for key, body in (
        ("one_more_grant", lambda: store.grant_one(other, "extra.txt")),
        ("revoke_all_of_one_app", lambda: store.revoke(other, None)),
        ("restore_all_of_one_app", lambda: store.restore(other, None)),
    ):
        result[key] = timed(body)
        log(f"{store.name}: {key} {result[key]}")
    return result


def remove(tmp: str) -> None:
    """Removes the bench's folder, never while something is mounted in it."""
    with open("/proc/self/mountinfo") as mounts:
        inside = [line.split()[4] for line in mounts if line.split()[4].startswith(tmp + "/")]
    if inside:
        log(f"NOT removing {tmp}: still mounted: {', '.join(inside)}")
        return
    subprocess.run(["rm", "-rf", "--one-file-system", tmp], check=False)


def timed(body) -> dict:
    """BODY's wall time, or the error that ended it."""
    started = time.monotonic()
    try:
        body()
    except RuntimeError as e:
        return {"error": str(e)[-300:], "after_s": time.monotonic() - started, "load": load()}
    return {"s": time.monotonic() - started, "load": load()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=100)
    parser.add_argument("--grants", type=int, default=10_000, help="files granted to every app")
    parser.add_argument("--rounds", type=int, default=30, help="revokes of one grant timed to EPERM")
    parser.add_argument("--stores", default="postgresql,sqlite")
    parser.add_argument("--resolvers", type=int, default=0, help="another app's bookmark resolutions in flight")
    parser.add_argument("--out", default=str(ROOT / "bench-results" / "fleet-scale.json"))
    args = parser.parse_args()
    binary = os.environ.get("SCOPEFS_BIN") or str(ROOT / ".build" / "release" / "scopefs")
    if not os.access(binary, os.X_OK):
        sys.exit(f"no scopefs binary at {binary}: build it (swift build -c release) or set SCOPEFS_BIN")
    kinds = {"postgresql": FleetStore, "sqlite": SQLiteStore}
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    if set(stores) - set(kinds):
        sys.exit(f"--stores: unknown {', '.join(sorted(set(stores) - set(kinds)))}")
    apps = [f"com.example.app{index:03}" for index in range(args.apps)]
    # The daemon's reload lines are at debug level.
    env = dict(os.environ, SCOPEFS_LOG_LEVEL="debug")
    results = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "binary": binary,
        "version": subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip(),
        "git": subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "nproc": os.cpu_count(),
        "load_at_start": Path("/proc/loadavg").read_text().strip(),
        "stores": [],
    }
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="scopefs-fleet-scale-", dir="/var/tmp")
    try:
        folder = Path(tmp) / "provider"
        folder.mkdir()
        log(f"making {args.grants:,} files")
        paths = make_files(folder, args.grants)
        for name in stores:
            root = Path(tmp) / name
            root.mkdir()
            store = kinds[name](binary, root, env)
            results["stores"].append(measure(store, apps, paths, folder, args.rounds, args.resolvers))
    finally:
        remove(tmp)
    results["total_s"] = time.monotonic() - started
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    print(f"results: {args.out}; whole run {results['total_s']:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
