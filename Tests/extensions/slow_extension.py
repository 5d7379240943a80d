"""A test extension on the Python SDK whose requests take as long as asked.

- ``item {id: "sleep:S"}`` answers after S seconds (printing to stdout on
  the way, which the SDK must keep off the protocol's stream);
- ``fetch {id: "slow"}`` reports progress every 20 ms and never finishes
  until cancelled (or 30 s pass);
- ``item {id: "crash"}`` raises an unexpected exception;
- ``item {id: "announce"}`` sends ``log`` and ``changed`` before answering.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))

from scopefs_extension import Fetched, Item, NoSuchItem, ReplicatedExtension, run  # noqa: E402


class SlowExtension(ReplicatedExtension):
    name = "slow"

    def item(self, identifier: str) -> Item:
        if identifier == "crash":
            raise RuntimeError("an unexpected failure")
        if identifier == "announce":
            self.log("info", "the store changed")
            self.signal_changed()
            identifier = "sleep:0"
        if not identifier.startswith("sleep:"):
            raise NoSuchItem(identifier)
        print("stray output that must not reach the daemon")
        time.sleep(float(identifier[len("sleep:") :]))
        return Item(identifier, "root", identifier.replace(":", "-"), "file", 0, 0.0, 0o644, "c", "m")

    def fetch_contents(self, identifier, version, byte_range, request) -> Fetched:
        deadline = time.monotonic() + 30
        step = 0
        while time.monotonic() < deadline:
            request.check_cancelled()
            step += 1
            request.progress(step, 1_000_000)
            time.sleep(0.02)
        raise NoSuchItem("never cancelled")


if __name__ == "__main__":
    run(SlowExtension())
