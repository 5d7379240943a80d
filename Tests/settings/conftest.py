"""pytest configuration for the settings page's browser tests (issue 36).

They use the integration suite's harness (Tests/integration: a real mount,
a real daemon, app processes through `scopefs run`) and run as their own
`make test-settings`, outside the integration suite's time budget.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))

from scopefs_harness import FUSE_DEVICE, fresh_world, set_child_subreaper  # noqa: E402


def pytest_configure(config):
    set_child_subreaper()


def pytest_collection_modifyitems(config, items):
    if not os.path.exists(FUSE_DEVICE):
        for item in items:
            item.add_marker(pytest.mark.skip(reason=f"{FUSE_DEVICE} is missing: the page's tests need a real mount"))


@pytest.fixture
def env():
    """A fresh ScopeFS world (the integration suite's `env`): state dir,
    providers `local` and `drive`, apps ALPHA and BETA, not mounted."""
    yield from fresh_world()
