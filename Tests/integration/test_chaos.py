"""`scopefs chaos` (issue 18): random revocations and restorations of an
app's grants while a command runs as the app, with faults, every random
choice drawn from the seed and printed, so a run replays exactly."""

from __future__ import annotations

import json
import sys

import pytest
from doc_scope_helpers import mount as mount_with_scopes
from scopefs_harness import ALPHA, LOCAL, RUNNERS, confines_by_default, describe, snippet

pytestmark = pytest.mark.sqlite_store(RUNNERS)

# Reads its granted files in a loop until stopped; counts what happened.
READER = """
import signal, time
paths = sys.argv[1:]
started = set()  # a start made while chaos has the grant revoked fails: tried again (SPEC S9)
seen = {}
def stop(*_):
    emit(seen)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
end = time.monotonic() + 20
while time.monotonic() < end:
    for path in paths:
        if path not in started and attempt(start_accessing, path) == "OK":
            started.add(path)
        key = attempt(read_bytes, path)
        seen[key] = seen.get(key, 0) + 1
    time.sleep(0.005)  # the reader's pace while the chaos runs, not a wait
emit(seen)
"""


def chaos(env, seed, *options, cmd):
    view = ["--no-sandbox"] if confines_by_default() else []
    return env.cli("chaos", "--app", ALPHA, "--seed", seed, *view, *options, "--", *cmd, expect=None, timeout=60)


def actions(p) -> list[str]:
    return [line for line in p.stderr.splitlines() if line.startswith("chaos +")]


def test_the_same_seed_replays_the_same_actions(env):
    """Two runs with seed 42 (20 actions a second for 1.5 s over three
    grants) print the same revoke/restore lines with the same offsets; seed
    43 prints others. The app saw EPERM (it ran under the revocations), and
    after each run every grant is active again and no fault rule is left."""
    grants = [env.grant(ALPHA, f"{LOCAL}:{rel}") for rel in ("docs", "photos", "deep/a")]
    env.mount()
    files = [env.prov(ALPHA, LOCAL, rel) for rel in ("docs/report.txt", "photos/p.jpg", "deep/a/other.txt")]
    cmd = [sys.executable, "-c", snippet(READER), *files]
    runs = []
    for seed in (42, 42, 43):
        p = chaos(env, seed, "--revoke-rate", "20/s", "--duration", "1500ms", "--fault", "read:EIO:1%", cmd=cmd)
        assert p.returncode == 0, describe(p)
        runs.append(p)
        states = {row["grant"]: row["state"] for row in json.loads(env.cli("privacy", ALPHA, "--json").stdout)}
        assert all(states[int(g)] == "active" for g in grants), states
        assert json.loads(env.cli("fault", "list", "--json").stdout) == []
    first, again, other = (actions(p) for p in runs)
    assert len(first) >= 10, runs[0].stderr
    assert first == again, (first, again)
    assert first != other
    seen = json.loads(runs[0].stdout.strip().splitlines()[-1])
    assert seen.get("EPERM", 0) > 0 and seen.get("OK", 0) > 0, seen
    for line in first:
        assert " revoke grant " in line or " restore grant " in line, line


def test_chaos_exits_with_the_commands_status_and_injects_its_faults(env):
    """The command's exit status is chaos's; a `--fault open:EACCES` rule
    holds for the app while it runs (and is gone after); a latency rule is
    listed; bad options are usage errors (64)."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    probe = """
start_accessing(sys.argv[1])
fd = outcome(lambda: os.close(os.open(sys.argv[1], os.O_RDONLY)))
emit(fd)
sys.exit(7 if fd == {"errno": "EACCES"} else 1)
"""
    cmd = [sys.executable, "-c", snippet(probe), env.prov(ALPHA, LOCAL, "docs/report.txt")]
    p = chaos(env, 1, "--revoke-rate", "0/s", "--fault", "open:EACCES", "--latency", "getattr:1ms:50%", cmd=cmd)
    assert p.returncode == 7, describe(p)
    assert "chaos fault #" in p.stderr and "open EACCES 100%" in p.stderr and "getattr +1ms 50%" in p.stderr, p.stderr
    assert json.loads(env.cli("fault", "list", "--json").stdout) == []
    for bad in (
        ["--fault", "read:EWHAT"],
        ["--latency", "open:fast"],
        ["--revoke-rate", "lots"],
        ["--duration", "soon"],
    ):
        p = chaos(env, 1, *bad, cmd=["true"])
        assert p.returncode == 64, describe(p)


def test_a_healthy_app_stopped_at_the_duration_passes(env):
    """Issue 31, point 5: with `--duration`, an app that runs until chaos
    stops it (SIGTERM at the deadline) passes: chaos exits 0 and says PASS,
    in the default mount and sandbox. One that fails before the deadline
    fails with its status and says FAIL. Seen failing on the old main: the
    healthy app made chaos exit 143, so no run ever passed."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    mount_with_scopes(env)
    forever = ["sh", "-c", "while true; do sleep 0.1; done"]
    p = env.cli("chaos", "--app", ALPHA, "--seed", 5, "--duration", "1s", "--", *forever, expect=None, timeout=60)
    assert p.returncode == 0 and "chaos seed 5: PASS" in p.stderr, describe(p)
    failing = ["sh", "-c", "sleep 0.2; exit 3"]
    p = env.cli("chaos", "--app", ALPHA, "--seed", 5, "--duration", "5s", "--", *failing, expect=None, timeout=60)
    assert p.returncode == 3 and "chaos seed 5: FAIL: the command exited with 3" in p.stderr, describe(p)
