"""An app process that reads one file over and over and prints each change
between readable and denied, with the time (a JSON line each): how the
fleet tests (Tests/fleet) and the fleet's scale bench (bench/fleet_scale.py)
see a revoke or a grant reach a mount. It starts a scope on the file while
it cannot read it, since the default mount is strict (SPEC S6-S9)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time

READER = r"""
import errno, json, os, sys, time
path, last, tried = sys.argv[1], None, 0.0
deadline = time.time() + float(sys.argv[2])
while time.time() < deadline:
    if last != "ok" and time.time() - tried > 0.05:
        # A read needs a scope, started by reading the control attribute,
        # until this process exits.
        tried = time.time()
        try:
            os.getxattr(path, "user.scopefs.start-until-exit")
            print(json.dumps({"start": "ok", "t": time.time()}), flush=True)
        except OSError as e:
            print(json.dumps({"start": errno.errorcode.get(e.errno), "t": time.time()}), flush=True)
    try:
        with open(path, "rb") as f:
            f.read(16)
        state = "ok"
    except OSError as e:
        state = errno.errorcode.get(e.errno, str(e.errno))
    if state != last:
        print(json.dumps({"state": state, "t": time.time()}), flush=True)
        last = state
    time.sleep(0.002)
"""


def reader_command(path: str, seconds: float) -> list[str]:
    """The reader's command line, to run as an app process (`scopefs run`)."""
    return ["python3", "-u", "-c", READER, path, str(seconds)]


class TransitionReader:
    """A reader started with ARGV (its `scopefs run` command line), and the
    transitions it printed."""

    def __init__(self, argv: list[str], env: dict):
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.transitions: list[dict] = []
        self.pending = b""

    def wait_for(self, state: str, timeout: float) -> dict:
        """The first transition to STATE (already seen or within TIMEOUT)."""
        end = time.time() + timeout
        while True:
            for seen in self.transitions:
                if seen.get("state") == state:
                    return seen
            left = end - time.time()
            if left <= 0 or self.process.poll() is not None:
                raise AssertionError(f"no {state!r} within {timeout} s; saw {self.transitions[-20:]}")
            # Raw reads: a buffered readline would keep lines select() cannot see.
            ready, _, _ = select.select([self.process.stdout], [], [], left)
            if ready:
                self.pending += os.read(self.process.stdout.fileno(), 65536)
                *lines, self.pending = self.pending.split(b"\n")
                self.transitions += [json.loads(line) for line in lines if line]

    def forget(self) -> None:
        self.transitions.clear()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
