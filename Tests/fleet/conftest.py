"""The fleet suite (SPEC S44): a real PostgreSQL server and several hosts,
each its own state directory, daemon and mount, on one machine. `make
test-fleet` runs it; it reuses the integration suite's harness."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from scopefs_harness import set_child_subreaper  # noqa: E402


def pytest_configure(config):
    # The daemons `scopefs mount` leaves in the background are reaped here.
    set_child_subreaper()
