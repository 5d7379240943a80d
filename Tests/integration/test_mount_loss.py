"""App processes when their mount dies (issue 15 finding 7; SPEC S30, S30a, S34).

A daemon killed with SIGKILL leaves its mount dead (ENOTCONN) in every
namespace that holds a copy of it; a new `scopefs mount` does not reach the
app processes already running there. `scopefs run` ends its app and exits
69 (docs/CLI.md) when that happens, unless `--keep-on-mount-loss`; the next
daemon lists the processes left on the dead mount in `scopefs status`
(text and JSON) and records each as a `stranded` event.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

from scopefs_harness import ALPHA, LOCAL, _proc_stat, kill_group, wait_for

NO_DAEMON = 69


def alive(pid: int) -> bool:
    st = _proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def start_run(env, name: str, *extra: str) -> tuple[subprocess.Popen, os.PathLike]:
    err = env.root / f"{name}.err"
    with open(err, "w") as fe:
        p = subprocess.Popen(
            env.run_argv(ALPHA, ["sleep", "300"], extra=extra),
            env=env.base_env,
            stdout=subprocess.DEVNULL,
            stderr=fe,
            start_new_session=True,
        )
    return p, err


def app_children(launcher: int) -> list[int]:
    try:
        with open(f"/proc/{launcher}/task/{launcher}/children") as f:
            return [int(pid) for pid in f.read().split()]
    except OSError:
        return []


def registered_roots(env) -> set[int]:
    p = env.cli("status", "--json")
    return {proc["pid"] for proc in json.loads(p.stdout)["daemon"]["processes"] if proc.get("parent") is None}


def wait_for_app(env, run: subprocess.Popen, err) -> int:
    """The pid of the app `run` started, once the run registered with the daemon."""
    children = wait_for(
        lambda: f"run {run.pid} to register with the daemon and start its app (stderr: {err.read_text()[-400:]!r})",
        lambda: app_children(run.pid) if run.pid in registered_roots(env) else [],
        timeout=20,
    )
    return children[0]


def stop_runs(*runs: subprocess.Popen) -> None:
    for p in runs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)  # passed on to the app
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        kill_group(p.pid)


def test_run_ends_its_app_and_exits_69_when_its_mount_dies(env):
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    ended, ended_err = start_run(env, "ended")
    try:
        app = wait_for_app(env, ended, ended_err)
        env.kill_daemon()
        try:
            code = ended.wait(timeout=15)
        except subprocess.TimeoutExpired:
            code = None
        message = ended_err.read_text()
        assert code == NO_DAEMON, (
            f"`scopefs run` must end its app and exit {NO_DAEMON} when its mount dies (got {code}); "
            f"stderr: {message[-400:]}"
        )
        assert "died" in message and ALPHA in message, f"no clear message on stderr: {message[-400:]}"
        wait_for(f"the app {app} of the ended run to end", lambda: alive(app), lambda running: not running)
        env.mount()
        assert not json.loads(env.cli("status", "--json").stdout)["daemon"].get("stranded"), (
            "an ended run leaves nothing on the dead mount"
        )
    finally:
        stop_runs(ended)


def test_next_daemon_lists_and_records_apps_kept_on_a_dead_mount(env):
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    kept, kept_err = start_run(env, "kept", "--keep-on-mount-loss")
    try:
        kept_app = wait_for_app(env, kept, kept_err)
        env.kill_daemon()
        wait_for("the run to see its mount die", lambda: kept_err.read_text(), lambda text: "keeps running" in text)
        assert kept.poll() is None and alive(kept_app), (
            f"--keep-on-mount-loss must keep the app running; stderr: {kept_err.read_text()[-400:]}"
        )
        assert "keeps running" in kept_err.read_text()

        env.mount()
        status = json.loads(env.cli("status", "--json").stdout)["daemon"]
        stranded = {proc["pid"]: proc for proc in status.get("stranded") or []}
        assert {kept.pid, kept_app} <= set(stranded), (
            f"status --json must list the processes left on the dead mount: {status.get('stranded')}"
        )
        assert all(
            stranded[pid]["app"] == ALPHA and stranded[pid]["state"] == "on a dead mount"
            for pid in (kept.pid, kept_app)
        )
        assert f"{kept_app}\t{ALPHA} (Alpha)\ton a dead mount" in env.cli("status").stdout

        def stranded_events() -> list[dict]:
            out = env.cli("events", "--kind", "stranded", "--json").stdout
            return [json.loads(line) for line in out.splitlines() if line.strip()]

        wait_for(  # the recorder writes in batches
            f"stranded events of {kept.pid} and {kept_app}",
            stranded_events,
            lambda events: {kept.pid, kept_app} <= {e.get("pid") for e in events},
            timeout=10,
        )

        # Once they are gone, status stops listing them.
        stop_runs(kept)
        wait_for(
            "status to stop listing the stranded processes",
            lambda: json.loads(env.cli("status", "--json").stdout)["daemon"].get("stranded"),
            lambda stranded: not stranded,
            timeout=10,
        )
    finally:
        stop_runs(kept)
