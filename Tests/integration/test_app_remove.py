"""`scopefs app remove` while the app runs (issue 46, finding 5c): its
processes went on reading and writing its container after the app was
gone. Now `app remove` refuses while they run (exit 75, docs/CLI.md),
and `--force` ends them (SIGTERM, then SIGKILL) before it removes the
app. SPEC S5 (app processes), S34 (a clear error and a documented code)."""

from __future__ import annotations

import json
import subprocess
import time

from scopefs_harness import ALPHA, describe, wait_for

# One process, no short-lived children (a shell loop's `sleep` would come and go).
WRITER = """
import os, time
path = os.environ["SCOPEFS_MOUNT"] + "/Container/Documents/log"
while True:
    with open(path, "a") as f:
        f.write("x\\n")
    time.sleep(0.1)
"""


def apps(env) -> list[str]:
    return [a["id"] for a in json.loads(env.cli("app", "list", "--json").stdout)]


def listed(env) -> list[int]:
    processes = json.loads(env.cli("status", "--json").stdout)["daemon"]["processes"]
    return sorted(p["pid"] for p in processes if p["app"] == ALPHA)


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_app_remove_refuses_while_the_app_runs_and_force_ends_it(env):
    """A sandboxed run (the default) writing its container: `app remove`
    exits 75 naming the processes and --force, and changes nothing;
    `app remove --force` ends the run and then removes the app. Seen
    failing on the old main: `app remove` exited 0 and the app wrote on."""
    env.mount()
    # The container on disk: it stays after the app is removed (docs/CLI.md).
    log = env.state / "containers" / ALPHA / "Documents" / "log"
    app = subprocess.Popen(
        [str(a) for a in env.run_argv(ALPHA, ["python3", "-c", WRITER], sandbox=True)],
        env=env.base_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_for("the app to write its container", lambda: log.exists(), timeout=20)
        pids = wait_for("the app's processes to be listed", lambda: listed(env), lambda got: len(got) >= 2, timeout=20)

        refused = env.cli("app", "remove", ALPHA, expect=None)
        assert refused.returncode == 75, describe(refused)
        assert "running process" in refused.stderr and "--force" in refused.stderr, refused.stderr
        assert ALPHA in apps(env), "refused, yet the app was removed"
        assert app.poll() is None and all(running(p) for p in pids), "refused, yet the app was ended"

        started = time.monotonic()
        forced = env.cli("app", "remove", "--force", ALPHA, expect=None)
        assert forced.returncode == 0, describe(forced)
        assert ALPHA not in apps(env)
        app.wait(timeout=15)
        assert not any(running(p) for p in pids), [p for p in pids if running(p)]
        size = log.stat().st_size
        time.sleep(0.5)
        assert log.stat().st_size == size, "the container is still written"
        print(f"app remove --force took {time.monotonic() - started:.2f} s")
    finally:
        if app.poll() is None:
            app.terminate()
            app.wait(timeout=20)
