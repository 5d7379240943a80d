"""Revocation as other systems do it (issue 48): a revoke that ends the
app, as Android's `pm revoke` does (`scopefs revoke --kill`, a scenario's
`revoke: {item: ..., kill: true}`), after which the app is started again
and must come back clean. Default sandbox, default strict scopes."""

from __future__ import annotations

import json
import time

import pytest
from scopefs_harness import ALPHA, BETA, LOCAL, RUNNERS, snippet, wait_for

pytestmark = pytest.mark.sqlite_store(RUNNERS)

# Reads its document in scope until it is killed; started again without
# the grant, it says so and exits 0 (a clean relaunch).
READER = """
import time
path = sys.argv[1]
try:
    start_accessing(path)
except OSError as exc:
    print(f"no access: {ename(exc)}", flush=True)
    sys.exit(0)
fd = os.open(path, os.O_RDONLY)
print("READY", flush=True)
while True:
    os.pread(fd, 10, 0)  # a cached descriptor: a plain revoke would end this with EPERM
    time.sleep(0.05)
"""

KILL_AND_RELAUNCH = """
timeout: 20s
steps:
  - when: app prints READY
    revoke: {item: "local:docs", kill: true}
expect:
  exit: 0
  prints: "no access: EPERM"
  not_prints: Traceback
  no_leaked_scope: true
"""


def run_scenario(env, text: str, *args: str):
    scenario = env.root / "scenario.yaml"
    scenario.write_text(text)
    p = env.cli(
        "test",
        scenario,
        "--app",
        ALPHA,
        "--json",
        "--",
        "python3",
        "-c",
        snippet(READER),
        env.prov(ALPHA, LOCAL, "docs/report.txt"),
        *args,
        expect=None,
        timeout=60,
    )
    return p, json.loads(p.stdout)


def test_a_revoke_that_kills_the_app_and_a_clean_relaunch(env):
    """`revoke: {kill: true}` revokes, then the daemon kills every process
    of the app (its run's cgroup: the sandbox's too); the runner starts the
    command again, which finds no access and exits 0. `exit` is the
    relaunched app's; the scope the killed process held is the kill's, not
    a leak of the app's (the daemon still records it)."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    p, report = run_scenario(env, KILL_AND_RELAUNCH)
    assert p.returncode == 0 and report["passed"], p.stdout + p.stderr
    actions = [a["action"] for a in report["actions"]]
    assert any("kill the app" in a and "started again" in a for a in actions), actions
    assert report["exitStatus"] == 0
    assert "READY" in report["output"] and "no access: EPERM" in report["output"]
    leaks = [e for e in report["events"] if e["kind"] == "leak"]
    assert leaks, report["events"]  # the killed reader's scope
    privacy = json.loads(env.cli("privacy", ALPHA, "--json").stdout)
    assert [row["state"] for row in privacy] == ["active"]  # restored at the end


def test_a_kill_without_relaunch_ends_the_run(env):
    """`relaunch: false`: the run ends with the kill (SIGKILL: 137)."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    text = KILL_AND_RELAUNCH.replace("kill: true}", "kill: true, relaunch: false}").replace("exit: 0", "exit: 137")
    text = text.replace('  prints: "no access: EPERM"\n', "")
    p, report = run_scenario(env, text)
    assert p.returncode == 0 and report["passed"], p.stdout + p.stderr
    assert report["exitStatus"] == 137
    assert "no access" not in report["output"]


HOLDER = """
path = sys.argv[1]
start_accessing(path)
fd = os.open(path, os.O_RDONLY)
step({"pid": os.getpid()})
"""


def test_scopefs_revoke_kill_ends_every_process_of_the_app(env):
    """`scopefs revoke APP ITEM --kill`: the grant is revoked, then every
    process of the app is killed (its `scopefs run` too), and stderr says
    how many. A process of another app is untouched."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.grant(BETA, f"{LOCAL}:docs")
    env.mount()
    alpha = env.app_session(ALPHA, HOLDER, env.prov(ALPHA, LOCAL, "docs/report.txt"), sandbox=True)
    beta = env.app_session(BETA, HOLDER, env.prov(BETA, LOCAL, "docs/report.txt"), sandbox=True)
    alpha.recv(), beta.recv()
    p = env.cli("revoke", ALPHA, f"{LOCAL}:docs", "--kill")
    assert "killed" in p.stderr and f"of {ALPHA}" in p.stderr, p.stderr
    wait_for("the app's run to end", lambda: alpha.popen.poll(), lambda code: code is not None, timeout=5)
    assert alpha.popen.returncode != 0
    time.sleep(0.2)
    assert beta.popen.poll() is None  # the other app runs on
    privacy = json.loads(env.cli("privacy", ALPHA, "--json").stdout)
    assert [row["state"] for row in privacy] == ["revoked"]
    beta.kill()
    alpha.kill()
    p = env.cli("revoke", "com.example.nobody", "1", "--kill", expect=None)
    assert p.returncode == 67, p.stderr
