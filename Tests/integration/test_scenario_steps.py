"""`scopefs test` steps and expectations of issue 18 beyond the first
runner: the trigger `after: first start of grant ITEM` / `after: N starts
of grant ITEM` (the daemon's start events), the steps `forget`,
`answer-pick` (the scripted agent's answer, only to the scenario's app)
and host `recreate`, and the expectation `stale_bookmark_resolved` (a
`stale-bookmark` event, SPEC S26, S29). Attack tests: hostile scenario
files are refused with their line, and a scenario acts only on its app."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from scopefs_harness import ALPHA, BETA, LOCAL, REPO_ROOT, RUNNERS, describe, snippet, wait_for_agent

pytestmark = pytest.mark.sqlite_store(RUNNERS)

PYTHON_CLIENT = REPO_ROOT / "clients" / "python"


def scopefs_test(env, scenario, *cmd, app=ALPHA, extra=()):
    return env.cli("test", scenario, "--app", app, "--no-sandbox", *extra, "--", *cmd, expect=None, timeout=60)


def write_scenario(env, name: str, text: str) -> Path:
    path = env.root / f"{name}.yaml"
    path.write_text(text)
    return path


def events(env, kind: str) -> list:
    out = env.cli("events", "--app", ALPHA, "--kind", kind, "--json").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def states(env, app=ALPHA) -> dict:
    return {row["grant"]: row["state"] for row in json.loads(env.cli("privacy", app, "--json").stdout)}


STARTER = """
import scopefs, time
path = sys.argv[1]
for index in range(100):
    try:
        with scopefs.accessing(path):
            read_bytes(path)
    except OSError as exc:
        print(f"lost at {index}: {ename(exc)}", flush=True)
        break
    time.sleep(0.1)  # the pace of the starts the scenario counts, not a wait
"""

FORGET_AFTER_FIRST_START = """
steps:
  - after: first start of grant local:docs
    forget: local:docs
expect:
  exit: 0
  prints: "lost at"
  no_leaked_scope: true
"""


def test_forget_after_the_first_start_of_a_grant(env):
    """`after: first start of grant local:docs` fires once the daemon
    recorded the app's first start on that grant (events are written every
    100 ms, so within a few passes of a 100 ms loop); `forget` removes the
    grant for good: the app's next start fails, the grant is gone from
    `privacy`, a forget event is in the log, and the runner does not bring
    it back at the end."""
    env.base_env["PYTHONPATH"] = str(PYTHON_CLIENT)
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    scenario = write_scenario(env, "forget", FORGET_AFTER_FIRST_START)
    p = scopefs_test(
        env,
        scenario,
        sys.executable,
        "-c",
        snippet(STARTER),
        env.prov(ALPHA, LOCAL, "docs/report.txt"),
        extra=("--json",),
    )
    assert p.returncode == 0, describe(p)
    report = json.loads(p.stdout)
    assert any(action["action"].startswith("forget grant ") for action in report["actions"]), report
    lost = [line for line in p.stderr.splitlines() if line.startswith("lost at ")]
    assert len(lost) == 1 and 1 <= int(lost[0].split()[2].rstrip(":")) <= 8, p.stderr
    assert states(env) == {}
    forgets = events(env, "forget")
    assert len(forgets) == 1, forgets


AFTER_THREE_STARTS = """
steps:
  - after: 3 starts of grant local:docs
    revoke: local:docs
expect:
  prints: "lost at"
"""


def test_after_n_starts_counts_the_starts_of_that_grant_only(env):
    """`after: 3 starts of grant local:docs`: starts on another grant
    (local:work, started first, five times) do not count; the revocation
    comes after the third start on docs, so the app is cut off at its
    third pass or soon after (events reach the log every 100 ms)."""
    env.base_env["PYTHONPATH"] = str(PYTHON_CLIENT)
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.grant(ALPHA, f"{LOCAL}:work")
    (env.backing(LOCAL) / "work" / "a.txt").write_text("a\n")
    env.mount()
    scenario = write_scenario(env, "three", AFTER_THREE_STARTS)
    code = "import scopefs\nfor _ in range(5):\n    with scopefs.accessing(sys.argv[2]):\n        pass\n" + STARTER
    p = scopefs_test(
        env,
        scenario,
        sys.executable,
        "-c",
        snippet(code),
        env.prov(ALPHA, LOCAL, "docs/report.txt"),
        env.prov(ALPHA, LOCAL, "work/a.txt"),
    )
    assert p.returncode == 0, describe(p)
    lost = [line for line in p.stderr.splitlines() if line.startswith("lost at ")]
    assert len(lost) == 1 and 3 <= int(lost[0].split()[2].rstrip(":")) <= 8, p.stderr
    assert set(states(env).values()) == {"active"}  # restored at the end


PICKER = """
import scopefs
for _ in range(2):
    try:
        paths = scopefs.pick(mode="open", timeout=15)
        rel = paths[0].split("/Providers/", 1)[1]
        with scopefs.accessing(paths[0]):
            print("picked", rel, read_text(paths[0]).strip(), flush=True)
    except OSError as exc:
        print("pick:", ename(exc), flush=True)
"""

ANSWER_PICKS = """
steps:
  - answer-pick: {choose: "local:docs/notes.md", read_only: true}
  - answer-pick: cancel
expect:
  exit: 0
  prints: ["picked local/docs/notes.md # notes", "pick: ECANCELED"]
"""


def test_answer_pick_chooses_then_cancels(env):
    """`answer-pick` steps answer the app's pick requests in order, as
    `scopefs agent --script` would: the first gives the app a read-only
    grant of the chosen document (it reads it in scope), the second
    cancels. The runner is an agent from before the app starts, so the
    app's first request finds one."""
    env.base_env["PYTHONPATH"] = str(PYTHON_CLIENT)
    (env.backing(LOCAL) / "docs" / "notes.md").write_text("# notes\n")
    env.mount()
    scenario = write_scenario(env, "picks", ANSWER_PICKS)
    p = scopefs_test(env, scenario, sys.executable, "-c", snippet(PICKER), extra=("--json",))
    assert p.returncode == 0, describe(p)
    actions = json.loads(p.stdout)["actions"]
    assert [a["action"].split(":")[0] for a in actions] == ["answer pick 1 (open)", "answer pick 2 (open)"], actions
    grants = json.loads(env.cli("privacy", ALPHA, "--json").stdout)
    assert [(g["provider"], g["path"], g["access"]) for g in grants] == [(LOCAL, "docs/notes.md", "read")], grants


BOOKMARKER = """
import scopefs, time
path = sys.argv[1]
with scopefs.accessing(path):
    token = scopefs.bookmark_data(path)
print("READY", flush=True)
end = time.monotonic() + 10
while time.monotonic() < end:
    found = scopefs.resolve_bookmark(token)
    if found.is_stale:
        print("stale", found.provider_path, flush=True)
        break
    time.sleep(0.1)
"""

RECREATE = """
steps:
  - when: app prints READY
    recreate: local:docs/report.txt
expect:
  exit: 0
  prints: stale docs/report.txt
  stale_bookmark_resolved: true
"""


def test_recreate_on_the_host_makes_a_bookmark_stale(env):
    """Host `recreate`: the file is replaced by a new one with the same
    content under the same name (a new inode); the app's bookmark
    then resolves to the new file with isStale (SPEC S26), the daemon
    records a stale-bookmark event, and `stale_bookmark_resolved: true`
    holds. Without the recreate step the same expectation fails (1)."""
    env.base_env["PYTHONPATH"] = str(PYTHON_CLIENT)
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    before = (env.backing(LOCAL) / "docs" / "report.txt").stat()
    scenario = write_scenario(env, "recreate", RECREATE)
    cmd = [sys.executable, "-c", snippet(BOOKMARKER), env.prov(ALPHA, LOCAL, "docs/report.txt")]
    p = scopefs_test(env, scenario, *cmd)
    assert p.returncode == 0, describe(p)
    after = (env.backing(LOCAL) / "docs" / "report.txt").stat()
    assert after.st_ino != before.st_ino and after.st_size == before.st_size
    stale = events(env, "stale-bookmark")
    assert len(stale) == 1 and stale[0]["path"] == f"/{ALPHA}/Providers/{LOCAL}/docs/report.txt", stale

    scenario.write_text("timeout: 3s\nexpect:\n  stale_bookmark_resolved: true\n")
    p = scopefs_test(env, scenario, *cmd)
    assert p.returncode == 1, describe(p)
    assert "FAIL a stale bookmark was resolved: 0 stale resolutions" in p.stdout, p.stdout


def test_hostile_scenarios_for_the_new_steps_are_refused_with_their_line(env):
    """Unknown keys inside answer-pick, an answer that neither chooses nor
    cancels, a malformed start trigger, a trigger or a forget naming a
    grant the app does not have (another app's): exit 65 with FILE:LINE;
    nothing runs, no grant changes."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    beta = env.grant(BETA, f"{LOCAL}:work")
    env.mount()
    cases = {
        "steps:\n  - answer-pick: {choose: local:docs, as_app: com.example.beta}\n": (2, "unknown key 'as_app'"),
        "steps:\n  - answer-pick: maybe\n": (2, "answer-pick: 'cancel'"),
        "steps:\n  - answer-pick: {read_only: true}\n": (2, "either choose items or cancel"),
        "steps:\n  - answer-pick: {choose: [nocolon]}\n": (2, "PROVIDER:RELPATH"),
        "steps:\n  - after: first start of local:docs\n    revoke: local:docs\n": (2, "after:"),
        "steps:\n  - after: 0 starts of grant local:docs\n    revoke: local:docs\n": (2, "after:"),
        "\n\nsteps:\n  - after: first start of grant local:work\n    revoke: local:docs\n": (
            4,
            "no grant of local:work",
        ),
        "steps:\n  - at: 1s\n    forget: local:work\n": (2, "no grant of local:work"),
        "steps:\n  - at: 1s\n    recreate: local:../escape/outside.txt\n": (2, "no provider item"),
        "expect:\n  stale_bookmark_resolved: sometimes\n": (2, "stale_bookmark_resolved: expected true or false"),
    }
    for index, (text, (line, words)) in enumerate(cases.items()):
        path = env.root / f"hostile{index}.yaml"
        path.write_text(text)
        p = scopefs_test(env, path, "true")
        assert p.returncode == 65, (text, describe(p))
        assert f"hostile{index}.yaml:{line}:" in p.stderr or f"hostile{index}:{line}:" in p.stderr, (text, p.stderr)
        assert words in p.stderr, (text, p.stderr)
    assert states(env, BETA) == {int(beta): "active"}
    assert (env.backing(LOCAL).parent / "escape" / "outside.txt").exists()


BETA_PICKS = """
import scopefs
try:
    scopefs.pick(mode="open", timeout=3)
    print("beta got a pick", flush=True)
except OSError as exc:
    print("beta:", ename(exc), flush=True)
"""


def test_a_scenario_answers_only_its_own_apps_pick_requests(env):
    """SPEC S5 for scenarios: while a scenario for ALPHA waits to answer a
    pick, BETA's request is not taken by it (the runner asks the daemon
    for ALPHA's requests only): BETA's pick times out unanswered and BETA
    gains no grant; ALPHA's step is reported as never run."""
    env.base_env["PYTHONPATH"] = str(PYTHON_CLIENT)
    env.mount()
    scenario = write_scenario(env, "only-alpha", "timeout: 8s\nsteps:\n  - answer-pick: {choose: local:docs}\n")
    cmd = [sys.executable, "-c", snippet("import time\ntime.sleep(6)  # an app that runs for a while")]
    runner = subprocess.Popen(
        env.cli_argv("test", scenario, "--app", ALPHA, "--no-sandbox", "--", *cmd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env.base_env,
        text=True,
    )
    try:
        wait_for_agent(runner.pid)  # the scenario's step waits to answer ALPHA's pick
        beta = env.app_py(BETA, BETA_PICKS)
        assert "beta: ETIMEDOUT" in beta.stdout, describe(beta)
        out, err = runner.communicate(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == 1, (out, err)
    assert "FAIL step at line 3 ran" in out, out
    assert json.loads(env.cli("privacy", BETA, "--json").stdout) == []


def test_a_step_whose_trigger_never_came_says_when_the_app_exited(env, tmp_path):
    """Issue 31, point 4: an app that exits before a step's trigger fails
    that step with when it exited ("the app exited before its trigger,
    0.x s in"), in the default mount and sandbox, so a developer sees at
    once that the app ended early. Seen failing on the old main: "the app
    finished before its trigger", no time."""
    from doc_scope_helpers import mount as mount_with_scopes

    env.grant(ALPHA, f"{LOCAL}:docs")
    mount_with_scopes(env)
    scenario = tmp_path / "early.yaml"
    scenario.write_text(f"app: {ALPHA}\nsteps:\n  - when: app prints READY\n    revoke: local:docs\n")
    p = env.cli("test", scenario, "--", "true", expect=1)
    assert re.search(r"FAIL step at line 3 ran: the app exited before its trigger, \d+\.\d s in", p.stdout), p.stdout
