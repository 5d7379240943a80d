"""Costs only ScopeFS has: revocation latency, daemon memory and fds under a
large walk, and the policy-decision microbenchmark (a Swift executable).

Every function returns a JSON-able dict and never raises for a failure of
ScopeFS itself: the failure is recorded under "error" instead.
"""

import json
import math
import os
import random
import select
import subprocess
import sys
import threading
import time

from systems import alive, wait_until
from workloads import PhaseError

APP = "bench.app"


def percentile(values, p):
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)] if s else None


class _Lines:
    """Reads lines from a non-blocking fd with a deadline."""

    def __init__(self, fd):
        self.fd, self.buf = fd, b""

    def next(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                time.sleep(0.01)  # no writer yet, or it went away
                continue
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode().split()


def revocation(ctx, sfs, count):
    """Revokes and restores the working folder's grant COUNT times while a
    reader app process preads a file it keeps open; latency = reader's
    CLOCK_MONOTONIC at its first EPERM minus the harness's time.monotonic()
    when `scopefs revoke` returned."""
    target_dir = os.path.join(ctx.workdir, "revoke")
    os.makedirs(target_dir, exist_ok=True)
    with open(os.path.join(target_dir, "target"), "wb") as f:
        f.write(b"r" * 65536)
    events_path, control_path = (os.path.join(ctx.tmp, n) for n in ("rev-events", "rev-control"))
    os.mkfifo(events_path)
    os.mkfifo(control_path)
    events = os.open(events_path, os.O_RDONLY | os.O_NONBLOCK)
    control = os.open(control_path, os.O_RDWR)
    grant = [sfs.grant] if sfs.grant else ["--all"]
    reader = subprocess.Popen(
        sfs.wrap(
            [
                ctx.fsops,
                "revoke-reader",
                os.path.join(sfs.root, "revoke", "target"),
                events_path,
                control_path,
                sfs.root,
            ]
        ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = _Lines(events)
    out = {"requested": count, "grant": grant[0], "samples": []}
    try:
        first = lines.next(60)
        if not first or first[0] != "READY":
            raise PhaseError(f"reader did not start: {first}")
        rng = random.Random(7)
        for _ in range(count):
            time.sleep(rng.uniform(0.002, 0.010))  # let the reader spin
            t_start = time.monotonic_ns()
            _cli(sfs, "revoke", APP, *grant)
            t_return = time.monotonic_ns()
            ev = lines.next(3.0)
            _cli(sfs, "restore", APP, *grant)
            if not ev:
                out["samples"].append({"timeout": True, "revoke_cli_ms": (t_return - t_start) / 1e6})
                if len(out["samples"]) == 3 and all(s.get("timeout") for s in out["samples"]):
                    raise PhaseError("stopped: the first 3 revokes never denied the open descriptor")
                continue  # the reader never saw EPERM and is still reading
            if ev[0] != "DENIED":
                raise PhaseError(f"reader said {ev}")
            out["samples"].append(
                {
                    "after_return_ms": (int(ev[1]) - t_return) / 1e6,
                    "after_start_ms": (int(ev[1]) - t_start) / 1e6,
                    "revoke_cli_ms": (t_return - t_start) / 1e6,
                    "errno": int(ev[2]),
                }
            )
            os.write(control, b"RESTORED\n")
            ev = lines.next(10.0)
            if not ev or ev[0] != "READY":
                raise PhaseError(f"reader could not read again after restore: {ev}")
    except (PhaseError, subprocess.SubprocessError, OSError) as e:
        out["error"] = str(e)
    finally:
        os.write(control, b"QUIT\n")
        try:
            reader.wait(timeout=10)
        except subprocess.TimeoutExpired:
            reader.kill()
            reader.wait()
        if reader.returncode:
            out["reader_stderr"] = reader.stderr.read().strip()[-300:]
        os.close(events)
        os.close(control)
        ctx.clean("revoke")
    _summarise_revocation(out)
    return out


def _summarise_revocation(out):
    ok = [s for s in out["samples"] if "after_return_ms" in s]
    out["timeouts"] = sum(1 for s in out["samples"] if s.get("timeout"))
    out["completed"] = len(ok)
    for key in ("after_return_ms", "after_start_ms", "revoke_cli_ms"):
        vals = [s[key] for s in ok]
        if vals:
            out[key] = {"p50": percentile(vals, 50), "p99": percentile(vals, 99), "min": min(vals), "max": max(vals)}


def _cli(sfs, *args):
    r = subprocess.run(sfs.cli(*args), capture_output=True, text=True, env=sfs.env, timeout=30)
    if r.returncode != 0:
        raise PhaseError(f"scopefs {' '.join(args)} exited {r.returncode}: {r.stderr.strip()[-300:]}")


def sample(pid):
    """VmRSS (KiB), open fds and threads of PID, or {"alive": False}."""
    if not pid or not alive(pid):
        return {"alive": False}
    try:
        status = {}
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                status[key] = value.split()
        return {
            "alive": True,
            "rss_kib": int(status["VmRSS"][0]),
            "fds": len(os.listdir(f"/proc/{pid}/fd")),
            "threads": int(status["Threads"][0]),
        }
    except (OSError, KeyError):
        return {"alive": False}


WALK_PY = r"""
import os, sys, time
t0, n = time.monotonic(), 0
for root, dirs, files in os.walk(sys.argv[1]):
    for name in files:
        os.stat(os.path.join(root, name))
        n += 1
with open(sys.argv[2], "a") as f:
    f.write(f"RESULT walk {time.monotonic() - t0:.9f} {n}\n")
"""


def memory(ctx, sfs, nfiles):
    """Daemon RSS and fds before, during and after an app process walks NFILES
    files (os.walk + stat), after the kernel forgets them, and after unmount."""
    pid = sfs.daemon_pid()
    out = {"files": nfiles, "daemon_pid": pid}
    if not pid:
        out["error"] = '`scopefs status --json` gave no ["daemon"]["pid"]'
        return out
    per_dir = 1000
    os.makedirs(os.path.join(ctx.workdir, "walk"))
    for d in range(math.ceil(nfiles / per_dir)):
        ctx.native_create(sfs, f"walk/d{d:03d}", min(per_dir, nfiles - d * per_dir), 0)
    out["before"] = sample(pid)
    peak, stop = {"rss_kib": 0, "fds": 0, "threads": 0}, threading.Event()

    def watch():
        while not stop.wait(0.1):
            s = sample(pid)
            for k in peak:
                peak[k] = max(peak[k], s.get(k, 0))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        open(ctx.resfile, "w").close()
        r = subprocess.run(
            sfs.wrap([sys.executable, "-c", WALK_PY, os.path.join(sfs.root, "walk"), ctx.resfile]),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
        )
        with open(ctx.resfile) as f:
            res = [ln.split() for ln in f if ln.startswith("RESULT ")]
        if r.returncode != 0 or not res:
            err = r.stderr.strip().splitlines()
            out["error"] = f"walker exited {r.returncode}: {err[-1] if err else 'no output'}"
        else:
            out["walk_seconds"], out["walked"] = float(res[-1][2]), int(res[-1][3])
    except subprocess.TimeoutExpired:
        out["error"] = "walker timed out"
    finally:
        stop.set()
        watcher.join()
    out["during_peak"] = peak
    out["after"] = sample(pid)
    ctx.drop_caches()  # the kernel forgets the walked inodes
    time.sleep(3)  # the daemon trims its memory within a second or two of that
    out["after_forget"] = sample(pid)
    ctx.clean("walk")
    sfs.unmount()
    wait_until(lambda: not alive(pid), 10)
    out["after_unmount"] = sample(pid)
    return out


def policy_bench(scopefs_bin):
    """Runs the policy-decision microbenchmark if its binary exists."""
    candidates = [os.environ.get("SCOPEFS_POLICY_BENCH", "")]
    if scopefs_bin:
        here = os.path.dirname(scopefs_bin)
        candidates += [os.path.join(here, n) for n in ("scopefs-bench-policy", "scopefs-policy-bench")]
    binary = next((c for c in candidates if c and os.access(c, os.X_OK)), None)
    if not binary:
        return None
    out = {"binary": binary}
    try:
        r = subprocess.run([binary], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        out["error"] = "timed out after 300 s"
        return out
    out["exit"] = r.returncode
    text = r.stdout.strip()
    try:
        out["result"] = json.loads(text)
    except ValueError:
        for line in reversed(text.splitlines()):  # a JSON line after other output
            try:
                out["result"] = json.loads(line)
                break
            except ValueError:
                continue
        else:
            out["error"] = "output is not JSON: " + text[-300:]
    return out
