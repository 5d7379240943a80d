"""The FUSE requests the kernel sends to one mount's daemon, counted by
the kernel itself: the `fuse:fuse_request_send` tracepoint in a tracefs
instance of the test's own, filtered to the mount's connection."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from collections import Counter
from pathlib import Path

TRACEFS = Path("/sys/kernel/tracing")


def connection_of(mountpoint: Path) -> int:
    """The mount's FUSE connection number (its device, from mountinfo:
    the test process itself never touches the mount)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == str(mountpoint):
                major, minor = map(int, fields[2].split(":"))
                return (major << 20) | minor
    raise AssertionError(f"{mountpoint} is not in mountinfo")


class RequestTrace:
    """Counts the FUSE requests the kernel sends to one mount's daemon,
    by opcode name (READ, WRITE, ...), in a tracefs instance of its own."""

    def __init__(self, mountpoint: Path):
        if not (TRACEFS / "instances").is_dir():
            subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True, timeout=20)
        assert (TRACEFS / "events" / "fuse" / "fuse_request_send").is_dir(), (
            "tracefs with the fuse:fuse_request_send event is needed to count the daemon's requests"
        )
        self.instance = TRACEFS / "instances" / f"scopefs-passthrough-{os.getpid()}-{secrets.token_hex(3)}"
        self.instance.mkdir()
        self.event = self.instance / "events" / "fuse" / "fuse_request_send"
        (self.event / "filter").write_text(f"connection == {connection_of(mountpoint)}\n")

    def __enter__(self) -> RequestTrace:
        (self.instance / "trace").write_text("")
        (self.event / "enable").write_text("1\n")
        return self

    def __exit__(self, *_) -> None:
        (self.event / "enable").write_text("0\n")
        self.counts = Counter(re.findall(r"\(FUSE_([A-Z_]+)\)", (self.instance / "trace").read_text()))
        self.instance.rmdir()
