"""Revocation propagation across a fleet (issue 34, docs/PERFORMANCE.md).

Runs Tests/fleet's `test_revocation_propagation_figures` (hosts in network
namespaces sharing a throwaway PostgreSQL server; a revoke on host A, the
time to EPERM on host B) over ROUNDS revokes, once on a plain veth link and
once with DELAY ms of netem delay on host B's link, and prints the load
average before and after each run next to the test's figures.

    SCOPEFS_BIN=.../scopefs python3 bench/fleet.py [--rounds 1000] [--delay-ms 20]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def run(rounds: int, delay_ms: float) -> str:
    env = dict(os.environ, SCOPEFS_FLEET_ROUNDS=str(rounds), SCOPEFS_FLEET_DELAY_MS=str(delay_ms))
    before = load()
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:benchmark",
         "Tests/fleet/test_fleet.py", "-k", "propagation"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=7200,
    )  # fmt: skip
    found = re.search(r"revocation propagation .*", p.stdout)
    if p.returncode != 0 or not found:
        sys.exit(f"the propagation run failed ({p.returncode}):\n{p.stdout[-4000:]}{p.stderr[-2000:]}")
    return f"{found.group(0)} (load average {before} before, {load()} after)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--delay-ms", type=float, default=20)
    args = parser.parse_args()
    if "SCOPEFS_BIN" not in os.environ:
        sys.exit("set SCOPEFS_BIN to the scopefs binary (`make bench-fleet` does)")
    print(run(args.rounds, 0), flush=True)
    if args.delay_ms:
        print(run(args.rounds, args.delay_ms), flush=True)


if __name__ == "__main__":
    main()
