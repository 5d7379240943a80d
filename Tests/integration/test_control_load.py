"""The control socket answers while many app processes start at once
(issue 15 finding 8; SPEC S30, S34).

200 `scopefs run` start together (cheap apps: `sleep`), each registering
over the control socket, while `scopefs status` is asked again and again.
Every run must register (two registrations at once once removed each
other's new cgroup), every status must answer and list what has
registered, and do so within a generous bound (the issue saw no answer
within 5 s): this is a 2-core machine shared with other work, where one
`scopefs` process costs ~40 ms of CPU to start, so the strict latencies
(p99) are measured by bench/control_load.py and kept in
docs/PERFORMANCE.md, not asserted here.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import threading
import time

import pytest
from scopefs_harness import ALPHA, LOCAL, WaitTimeout, kill_group, wait_for

APPS = 200
WORST_STATUS_SECONDS = 5.0


@pytest.mark.scopefs_timeout(240)
def test_status_answers_while_200_app_processes_start(env):
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    samples: list[tuple[float, int, int]] = []  # (seconds, exit code, roots listed)
    done = threading.Event()

    def ask_status():
        while not done.is_set():
            start = time.monotonic()
            p = subprocess.run(env.cli_argv("status", "--json"), env=env.base_env, capture_output=True, timeout=60)
            took = time.monotonic() - start
            roots = -1
            if p.returncode == 0:
                processes = json.loads(p.stdout)["daemon"]["processes"]
                roots = sum(1 for process in processes if process.get("parent") is None)
            samples.append((took, p.returncode, roots))
            time.sleep(0.1)  # the pace of the owner's status queries during the load, not a wait

    asker = threading.Thread(target=ask_status)
    asker.start()
    # One shell starts them all, as fast as it can fork: at once.
    argv = " ".join(shlex.quote(a) for a in env.run_argv(ALPHA, ["sleep", "300"]))
    errors = env.root / "runs.err"
    starter = subprocess.Popen(
        ["sh", "-c", f"for i in $(seq {APPS}); do {argv} >/dev/null 2>>{errors} & done; wait"],
        env=env.base_env,
        start_new_session=True,
    )
    try:
        try:
            wait_for(
                f"status to list all {APPS} runs",
                lambda: samples[-1] if samples else None,
                lambda newest: newest is not None and newest[2] >= APPS,
                timeout=120,
                interval=0.2,
            )
        except WaitTimeout:
            pass  # the assertions below say what the samples show
    finally:
        done.set()
        asker.join()
        # `scopefs run` passes SIGTERM on to its app.
        os.killpg(starter.pid, signal.SIGTERM)
        try:
            starter.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        kill_group(starter.pid)
        starter.wait()

    failed = [s for s in samples if s[1] != 0]
    assert not failed, f"`scopefs status` failed {len(failed)} of {len(samples)} times under load: {failed[:5]}"
    problems = sorted(set(line for line in errors.read_text().splitlines() if "warning: --no-sandbox" not in line))
    assert samples and samples[-1][2] >= APPS, (
        f"status never listed all {APPS} runs (last sample: {samples[-1] if samples else None}); runs said: {problems[:5]}"
    )
    worst = max(s[0] for s in samples)
    assert worst < WORST_STATUS_SECONDS, (
        f"`scopefs status` took up to {worst:.2f} s while {APPS} app processes started "
        f"({len(samples)} samples, median {sorted(s[0] for s in samples)[len(samples) // 2]:.2f} s)"
    )
