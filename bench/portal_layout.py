"""The portal layout's per-read policy check, on each store (decision 65).

`scopefs portal`'s layout checks every lookup and read against a policy
version: on SQLite the file's version row; on a fleet the version the
host's daemon serves (the `servedPolicy` control request), or with no
daemon the fleet database's. This times a stat and a 4 KiB read of one
document through `by-app/APP/DOC/NAME`, side by side with the same on the
host file itself, and prints p50 and p99 per setup and the ratio to the
host file.

    SCOPEFS_BIN=.../scopefs python3 bench/portal_layout.py [--rounds 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "Tests" / "integration"))

import scopefs_harness  # noqa: E402
from postgres_server import PostgresServer  # noqa: E402
from scopefs_harness import ALPHA, LOCAL, Env  # noqa: E402
from test_portal import Portal, SessionBus  # noqa: E402


def timed(path: Path, rounds: int) -> list[float]:
    """Seconds per stat + open + 4 KiB read + close of PATH."""
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        os.stat(path)
        with open(path, "rb", buffering=0) as f:
            f.read(4096)
        samples.append(time.perf_counter() - started)
    return samples


def figures(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def measure(env: Env, rounds: int, daemon: bool) -> tuple[list[float], list[float]]:
    """The layout's and the host file's samples, interleaved in blocks."""
    if daemon:
        env.mount()
    bus = SessionBus(env.root)
    (env.root / "doc").mkdir()
    portal = Portal(env, bus, env.root / "doc")
    try:
        report = env.backing(LOCAL) / "docs" / "report.txt"
        exported = portal.flatpak("document-export", "--app", ALPHA, report).stdout.strip()
        layout = portal.mountpoint / "by-app" / ALPHA / Path(exported).parent.name / "report.txt"
        timed(layout, 50)  # warm
        through, native = [], []
        for _ in range(10):
            through += timed(layout, rounds // 10)
            native += timed(report, rounds // 10)
        return through, native
    finally:
        try:
            portal.stop()
        finally:
            bus.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    if "SCOPEFS_BIN" not in os.environ:
        sys.exit("set SCOPEFS_BIN to the scopefs binary")
    server = PostgresServer()
    setups = [("sqlite", True), ("postgresql", True), ("postgresql", False)]
    try:
        print(f"portal layout, stat + 4 KiB read, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}")
        for store, daemon in setups:
            scopefs_harness.STORE = store
            scopefs_harness._postgres = server
            env = Env()
            try:
                env.init_world()
                through, native = measure(env, args.rounds, daemon)
            finally:
                env.teardown()
            (p50, p99), (n50, n99) = figures(through), figures(native)
            where = {
                ("sqlite", True): "SQLite store, daemon mounted",
                ("postgresql", True): "fleet store, the daemon's served version",
                ("postgresql", False): "fleet store, no daemon: the database's version",
            }[(store, daemon)]
            print(
                f"{where}: layout p50 {p50 * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us; host file p50 "
                f"{n50 * 1e6:.0f} us, p99 {n99 * 1e6:.0f} us; ratio p50 {p50 / n50:.1f}x"
            )
    finally:
        server.close()


if __name__ == "__main__":
    main()
