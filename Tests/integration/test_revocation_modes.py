"""Revocation as other systems do it (issue 48): a revoke that ends the
app, as Android's `pm revoke` does (`scopefs revoke --kill`, a scenario's
`revoke: {item: ..., kill: true}`), after which the app is started again
and must come back clean. Default sandbox, default strict scopes."""

from __future__ import annotations

import json
import time

import pytest
from scopefs_harness import ALPHA, BETA, LOCAL, RUNNERS, snippet, wait_for, wait_for_exit

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


# Saves v1 durably, then v2 (open with O_TRUNC, write, close) with or
# without an fsync, says "saved v2" and goes on running.
SAVER = """
import time
path, mode = sys.argv[1], sys.argv[2]
start_accessing(os.path.dirname(path))
def save(text, durable):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644)
    os.write(fd, text.encode())
    if durable:
        os.fsync(fd)
    os.close(fd)
save("v1\\n", True)
save("v2\\n", mode == "fsync")
print("saved v2", flush=True)
while True:
    time.sleep(0.05)
"""

CRASH = """
timeout: 20s
steps:
  - when: app prints saved v2
    revoke: {item: "local:docs", kill: true, relaunch: false, lose_unsynced: true}
expect:
  exit: 137
  files:
    - {path: "local:docs/notes.txt", content: "v2\\n"}
"""


def test_a_crash_loses_what_was_not_fsynced(env):
    """`revoke: {kill: true, lose_unsynced: true}`: the app is ended and
    what it wrote and did not fsync is lost, as LazyFS loses it at a crash
    (issue 48), so a scenario tests an app's durability claim. The app that
    fsyncs its save keeps v2 and passes; the one that does not is back to
    v1, its last fsync, and the same scenario fails, naming the file."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    scenario = env.root / "crash.yaml"
    scenario.write_text(CRASH)
    notes = env.prov(ALPHA, LOCAL, "docs/notes.txt")
    reports = {}
    for mode in ("fsync", "no-fsync"):
        p = env.cli(
            "test",
            scenario,
            "--app",
            ALPHA,
            "--json",
            "--",
            "python3",
            "-c",
            snippet(SAVER),
            notes,
            mode,
            expect=None,
            timeout=60,
        )
        reports[mode] = (p.returncode, json.loads(p.stdout))
    code, report = reports["fsync"]
    assert code == 0 and report["passed"], report["expectations"]
    assert any("lose unsynced writes (0 files)" in a["action"] for a in report["actions"]), report["actions"]
    code, report = reports["no-fsync"]
    assert any("lose unsynced writes (1 files)" in a["action"] for a in report["actions"]), report["actions"]
    assert code == 1 and not report["passed"]
    failed = [e for e in report["expectations"] if not e["passed"]]
    assert [e["name"] for e in failed] == ["host file local:docs/notes.txt holds the expected content"], failed
    assert failed[0]["detail"] == 'it holds "v1\\n"', failed
    assert json.loads(env.cli("fault", "list", "--json").stdout) == []


WRITER = """
path = sys.argv[1]
start_accessing(os.path.dirname(path))
with open(path, "w") as f:
    f.write(sys.argv[2])
    f.flush()
    if sys.argv[3] == "fsync":
        os.fsync(f.fileno())
emit("written")
"""


def test_fault_lose_unsynced_puts_files_back_to_their_last_fsync(env):
    """`fault add --op write --unsynced` fails nothing; `fault
    lose-unsynced` then puts a file written without an fsync back as it
    was (here: as on the host before), leaves one that was fsynced, and
    drops the page cache so the app reads the host's bytes; with the rule
    cleared nothing is losable. `revoke --lose-unsynced` does the same
    for the revoked app."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    host = env.backing(LOCAL) / "docs"
    (host / "a.txt").write_text("a0\n")
    (host / "b.txt").write_text("b0\n")
    env.cli("fault", "add", "--app", ALPHA, "--op", "write", "--unsynced")
    a, b = env.prov(ALPHA, LOCAL, "docs/a.txt"), env.prov(ALPHA, LOCAL, "docs/b.txt")
    env.app_json(ALPHA, WRITER, a, "a1\n", "none", sandbox=True)
    env.app_json(ALPHA, WRITER, b, "b1\n", "fsync", sandbox=True)
    assert (host / "a.txt").read_text() == "a1\n"  # written through, as always
    assert "1 file back to their last fsync" in env.cli("fault", "lose-unsynced").stdout
    assert (host / "a.txt").read_text() == "a0\n" and (host / "b.txt").read_text() == "b1\n"
    code = "path = sys.argv[1]; start_accessing(os.path.dirname(path)); emit(read_bytes(path).decode())"
    assert env.app_json(ALPHA, code, a, sandbox=True) == "a0\n"
    env.app_json(ALPHA, WRITER, a, "a2\n", "none", sandbox=True)
    p = env.cli("revoke", ALPHA, f"{LOCAL}:docs", "--lose-unsynced")
    assert "1 files back to their last fsync" in p.stderr and (host / "a.txt").read_text() == "a0\n"
    env.cli("restore", ALPHA, f"{LOCAL}:docs")
    env.app_json(ALPHA, WRITER, a, "a3\n", "none", sandbox=True)
    env.cli("fault", "clear", "--all")
    assert "0 files back" in env.cli("fault", "lose-unsynced").stdout
    assert (host / "a.txt").read_text() == "a3\n"


def test_a_daemon_killed_under_an_unsynced_rule_loses_those_writes(env):
    """The daemon crash of issue 48: SIGKILL the daemon while an app's
    write is not fsynced under an `unsynced` rule; the next mount puts
    the file back to its last fsync (the copy was journalled in the state
    directory), and keeps the fsynced file. A clean unmount loses nothing."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    host = env.backing(LOCAL) / "docs"
    (host / "a.txt").write_text("a0\n")
    (host / "b.txt").write_text("b0\n")
    env.cli("fault", "add", "--app", ALPHA, "--op", "write", "--unsynced")
    a, b = env.prov(ALPHA, LOCAL, "docs/a.txt"), env.prov(ALPHA, LOCAL, "docs/b.txt")
    env.app_json(ALPHA, WRITER, a, "a1\n", "none", sandbox=True)
    env.app_json(ALPHA, WRITER, b, "b1\n", "fsync", sandbox=True)
    env.kill_daemon()
    assert (host / "a.txt").read_text() == "a1\n"
    env.mount()
    assert (host / "a.txt").read_text() == "a0\n" and (host / "b.txt").read_text() == "b1\n"
    env.cli("fault", "add", "--app", ALPHA, "--op", "write", "--unsynced")
    env.app_json(ALPHA, WRITER, a, "a2\n", "none", sandbox=True)
    pid = env.daemon_pid()
    env.cli("unmount", env.mnt)
    env.mounted = False
    assert wait_for_exit(pid, 10)[0] != "alive"
    env.mount()
    assert (host / "a.txt").read_text() == "a2\n"
    assert list((env.state / "unsynced").iterdir()) == []
