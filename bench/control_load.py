#!/usr/bin/env python3
"""Latency of the control socket while many app processes start at once
(issue 15 finding 8, SPEC S30). Mounts a fresh world (the integration
harness's), starts N `scopefs run --no-sandbox -- sleep` at once, and
meanwhile times, in a loop each:
  - `scopefs status` (the CLI, process start included),
  - a raw `status` request on the control socket (the daemon's share),
  - `scopefs restore` of a revoked grant (revoke untimed in between).
  - /bin/true, the scheduler's floor on this machine at that moment.
Prints p50/p99/max per series. Usage:
  SCOPEFS_BIN=.build/debug/scopefs python3 bench/control_load.py [N] [ROUNDS]
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "integration"))
from scopefs_harness import ALPHA, LOCAL, Env, set_child_subreaper  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def summary(name: str, values: list[float]) -> str:
    if not values:
        return f"{name:14} no samples"
    return (
        f"{name:14} n={len(values):4}  p50={percentile(values, 50) * 1000:7.1f} ms  "
        f"p99={percentile(values, 99) * 1000:7.1f} ms  max={max(values) * 1000:7.1f} ms"
    )


def raw_request(path: str, request: dict) -> float:
    """One request on the control socket, timed: the daemon's own share."""
    start = time.monotonic()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(path)
        s.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    answer = json.loads(data)
    if not answer.get("ok"):
        raise RuntimeError(f"{request['op']}: {answer}")
    return time.monotonic() - start


def raw_status(path: str) -> float:
    return raw_request(path, {"op": "status"})


def timed(argv: list[str], env: dict) -> float:
    start = time.monotonic()
    p = subprocess.run(argv, env=env, capture_output=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"{argv} exited {p.returncode}: {p.stderr.decode()[-300:]}")
    return time.monotonic() - start


def measure(env: Env, count: int, apps: bool) -> dict[str, list[float]]:
    grant = env.grant(ALPHA, f"{LOCAL}:docs")
    series: dict[str, list[float]] = {"status (CLI)": [], "status (raw)": [], "restore (CLI)": [], "/bin/true": []}
    done = threading.Event()

    def loop(name, body):
        while not done.is_set():
            series[name].append(body())
            time.sleep(0.05)

    def restore_once():
        env.cli("revoke", ALPHA, grant)
        return timed(env.cli_argv("restore", ALPHA, grant), env.base_env)

    threads = [
        threading.Thread(target=loop, args=a)
        for a in (
            ("status (CLI)", lambda: timed(env.cli_argv("status"), env.base_env)),
            ("status (raw)", lambda: raw_status(str(env.state / "control.sock"))),
            ("restore (CLI)", restore_once),
            ("/bin/true", lambda: timed(["/bin/true"], env.base_env)),
        )
    ]
    started = []
    for t in threads:
        t.start()
    t0 = time.monotonic()
    if apps:
        for _ in range(count):
            started.append(
                subprocess.Popen(
                    env.run_argv(ALPHA, ["sleep", "600"]),
                    env=env.base_env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
    # Until every run has registered (status lists it), plus a moment.
    deadline = time.monotonic() + 60
    while apps and time.monotonic() < deadline:
        p = env.cli("status", "--json", expect=None)
        listed = json.loads(p.stdout)["daemon"]["processes"] if p.returncode == 0 else []
        if sum(1 for p in listed if p.get("parent") is None) >= count:
            break
        time.sleep(0.2)
    registered = time.monotonic() - t0
    time.sleep(1 if apps else 5)
    done.set()
    for t in threads:
        t.join()
    for p in started:
        p.terminate()  # `scopefs run` passes SIGTERM on to its app
    for p in started:
        p.wait()
    print(f"{count if apps else 0} app processes started; all registered after {registered:.1f} s")
    return series


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    set_child_subreaper()
    env = Env()
    try:
        env.init_world()
        env.mount(lenient=True)  # it measures the daemon's answers, not scopes
        for apps in (False, True):
            for name, values in measure(env, count, apps).items():
                print(summary(name, values))
    finally:
        problems = env.teardown()
        if problems:
            print("teardown:", problems)


if __name__ == "__main__":
    main()
