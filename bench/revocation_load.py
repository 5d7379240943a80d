#!/usr/bin/env python3
"""Revocation under load (issue 29, SPEC S14, S40): N reader processes of
one app loop open/read/close over granted files while the owner revokes
and restores the grant again and again and asks `status`. Reports the
CLI latency of revoke, restore and status (p50/p99), the readers' EMFILE
count, and the reads that succeeded inside a revoked window (a read that
started after a revoke returned and ended before the next restore began):
the target is zero of both.

The readers run as users run apps: the default mount (strict scopes), the
default sandbox, a security scope started on the grant. They are spread
over a few `scopefs run`s (each a sandbox with READERS_PER_RUN processes),
and learn the revoked windows from a file in an exposed folder at the end.

    SCOPEFS_BIN=.build/release/scopefs python3 bench/revocation_load.py [READERS] [SECONDS]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from control_load import raw_request, raw_status, summary, timed  # noqa: E402
from scopefs_harness import ALPHA, LOCAL, Env, set_child_subreaper  # noqa: E402

READERS_PER_RUN = 50
FILES = 20

# One `scopefs run`: forks its readers, each reading until the stop file
# appears; then each counts its reads inside the revoked windows.
READERS = r"""
import errno, json, os, sys, time
folder, shared, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.getxattr(folder, "user.scopefs.start")
names = sorted(os.listdir(folder))
children = []
for index in range(count):
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        ok, emfile, other, reads = 0, 0, 0, []
        i = index
        while not os.path.exists(os.path.join(shared, "stop")):
            path = os.path.join(folder, names[i % len(names)])
            i += 1
            began = time.monotonic()
            try:
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.read(fd, 4096)
                finally:
                    os.close(fd)
                reads.append((began, time.monotonic()))
                ok += 1
            except OSError as exc:
                if exc.errno == errno.EMFILE:
                    emfile += 1
                else:
                    other += 1
                time.sleep(0.001)
        while not os.path.exists(os.path.join(shared, "windows.json")):
            time.sleep(0.05)
        windows = json.load(open(os.path.join(shared, "windows.json")))
        inside = sum(1 for b, e in reads for start, end in windows if b > start and e < end)
        os.write(writer, json.dumps({"ok": ok, "emfile": emfile, "other": other, "inside": inside}).encode())
        os._exit(0)
    os.close(writer)
    children.append((pid, reader))
total = {"ok": 0, "emfile": 0, "other": 0, "inside": 0}
for pid, reader in children:
    data = b""
    while chunk := os.read(reader, 65536):
        data += chunk
    os.waitpid(pid, 0)
    for key, value in json.loads(data).items():
        total[key] += value
try:
    os.getxattr(folder, "user.scopefs.stop")
except OSError:
    pass
print(json.dumps(total), flush=True)
"""


def main() -> None:
    readers = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 30
    set_child_subreaper()
    env = Env()
    shared = env.root / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # the readers' account writes nothing, reads the windows
    try:
        env.init_world()
        docs = env.backing(LOCAL) / "load"
        docs.mkdir()
        for index in range(FILES):
            (docs / f"f{index:02}.txt").write_bytes(os.urandom(4096))
        grant = env.grant(ALPHA, f"{LOCAL}:load")
        env.cli("mount", env.mnt, timeout=60)  # the default: strict scopes
        env.mounted = True
        folder = env.prov(ALPHA, LOCAL, "load")
        runs = []
        for start in range(0, readers, READERS_PER_RUN):
            count = min(READERS_PER_RUN, readers - start)
            argv = env.cli_argv(
                "run", "--app", ALPHA, "--expose", shared, "--", "python3", "-c", READERS, folder, shared, count
            )
            runs.append(subprocess.Popen([str(a) for a in argv], env=env.base_env, stdout=subprocess.PIPE, text=True))
        time.sleep(10)  # the readers start (500 forks in 10 sandboxes take seconds)
        fds_before = len(os.listdir(f"/proc/{env.daemon_pid()}/fd"))
        # "status raw": the daemon's own share, one request on the control
        # socket; the CLI rows add the command's start among the readers.
        series: dict[str, list[float]] = {
            "revoke": [],
            "restore": [],
            "status": [],
            "revoke raw": [],
            "restore raw": [],
            "status raw": [],
        }
        socket_path = str(env.state / "control.sock")
        windows: list[tuple[float, float]] = []
        done = threading.Event()

        def status_loop():
            while not done.is_set():
                series["status"].append(timed(env.cli_argv("status"), env.base_env))
                series["status raw"].append(raw_status(socket_path))
                time.sleep(0.1)

        status_thread = threading.Thread(target=status_loop)
        status_thread.start()
        peak = fds_before
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            # Every other cycle as one request on the control socket: the
            # daemon's own share, without the command's start.
            raw = len(windows) % 2 == 1
            request = {"app": ALPHA, "grant": int(grant)}
            if raw:
                series["revoke raw"].append(raw_request(socket_path, {"op": "revoke", **request}))
            else:
                series["revoke"].append(timed(env.cli_argv("revoke", ALPHA, grant), env.base_env))
            revoked_at = time.monotonic()
            time.sleep(0.2)
            peak = max(peak, len(os.listdir(f"/proc/{env.daemon_pid()}/fd")))
            restore_began = time.monotonic()
            windows.append((revoked_at, restore_began))
            if raw:
                series["restore raw"].append(raw_request(socket_path, {"op": "restore", **request}))
            else:
                series["restore"].append(timed(env.cli_argv("restore", ALPHA, grant), env.base_env))
            time.sleep(0.2)
        done.set()
        status_thread.join()
        (shared / "stop").touch()
        # Whole or not at all: a reader may look while it is written.
        (shared / "windows.tmp").write_text(json.dumps(windows))
        (shared / "windows.tmp").rename(shared / "windows.json")
        totals = {"ok": 0, "emfile": 0, "other": 0, "inside": 0}
        for run in runs:
            out, _ = run.communicate(timeout=120)
            lines = [line for line in out.splitlines() if line.startswith("{")]
            for key, value in (json.loads(lines[-1]) if lines else {}).items():
                totals[key] += value
        print(f"{readers} readers in {len(runs)} sandboxes, {len(windows)} revoke/restore cycles in {seconds:.0f} s")
        for name, values in series.items():
            print(summary(name, values))
        print(
            f"reads: {totals['ok']} ok, {totals['emfile']} EMFILE, {totals['other']} other errors "
            f"(EPERM while revoked), {totals['inside']} inside a revoked window"
        )
        print(f"daemon descriptors: {fds_before} with the readers running, {peak} at most")
    finally:
        (shared / "stop").touch()
        problems = env.teardown()
        if problems:
            print("teardown:", problems)


if __name__ == "__main__":
    main()
