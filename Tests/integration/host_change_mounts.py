"""A mount with a host-change channel and long cache timeouts (issue 21,
SPEC S37), for the tests that time how soon a host change reaches the
kernel's caches or an app's presenters. A helper module, not a test
module: test_host_changes.py and the presenter tests import it.
"""

from __future__ import annotations

import json
import os

from scopefs_harness import MOUNT_TIMEOUT, mount_count

CACHE_TIMEOUT = "300"


def mount_long(env, channel: str, *extra: str, scopes: str = "lenient") -> dict:
    """`scopefs mount` with a host-change channel and long timeouts; returns
    `status --json`'s daemon record, which must name both (issue 21).
    Lenient scopes unless asked: these tests time how soon a host change
    reaches the kernel's caches, probing every 5 ms, and grants still
    decide (S9)."""
    try:
        env.cli(
            *env.mount_args(),
            "--scopes",
            scopes,
            "--host-changes",
            channel,
            "--cache-timeout",
            CACHE_TIMEOUT,
            *extra,
            timeout=MOUNT_TIMEOUT,
        )
    finally:
        env.mounted = env.mounted or bool(mount_count(env.mnt))
    env.mounted = True
    env._record_daemon()
    daemon = json.loads(env.cli("status", "--json").stdout)["daemon"]
    # auto takes fanotify as root (CAP_SYS_ADMIN), else inotify.
    expected = channel if channel != "auto" else ("fanotify" if os.geteuid() == 0 else "inotify")
    assert daemon.get("hostChanges") == expected, daemon
    assert daemon.get("cacheTimeout") == float(CACHE_TIMEOUT), daemon
    return daemon
