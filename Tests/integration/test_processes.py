"""`scopefs run`: app identity of processes, exit status, --sandbox. SPEC S5."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from scopefs_harness import ALPHA, BETA, LOCAL, REPORT_BYTES, describe, last_json_line, snippet, wait_for

DOUBLE_FORK = """
import time

def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except OSError:
        return True

granted, foreign = sys.argv[1], sys.argv[2:]
app_pid, app_sid = os.getpid(), os.getsid(0)
if os.fork() == 0:
    os.setsid()
    if os.fork() != 0:
        os._exit(0)                      # the intermediate child exits at once
    # grandchild: wait until the original app process has exited, then report
    deadline = time.monotonic() + 10
    while not gone(app_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    emit({"orphaned": gone(app_pid),
          "new_session": os.getsid(0) != app_sid,
          # its ancestors are gone, so it holds no scope but its own (S9)
          "start": attempt(start_accessing, granted),
          "read": outcome(lambda: read_bytes(granted)[:16].hex()),
          "foreign": {p: attempt(os.stat, p) for p in foreign}})
    os._exit(0)
os.wait()
"""


def test_double_forked_descendant_stays_the_app(env):
    """SPEC S5: a descendant that double-forks (fork, setsid, fork, parent
    exits) is still an app process: it reads the app's granted file and
    another app's paths are ENOENT for it."""
    env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    env.grant(BETA, f"{LOCAL}:docs")
    env.mount()
    got = env.app_json(
        ALPHA,
        DOUBLE_FORK,
        env.prov(ALPHA, LOCAL, "docs/report.txt"),
        env.app_dir(BETA),
        env.prov(BETA, LOCAL, "docs/report.txt"),
    )
    assert got["orphaned"] and got["new_session"], got
    assert got["start"] == "OK" and got["read"] == {"ok": REPORT_BYTES[:16].hex()}, got
    assert got["foreign"] == {env.app_dir(BETA): "ENOENT", env.prov(BETA, LOCAL, "docs/report.txt"): "ENOENT"}


@pytest.mark.parametrize("target", [BETA, ALPHA], ids=["other-app", "same-app"])
def test_app_process_cannot_start_an_app(env, target):
    """SPEC S5, CLI.md exit 77: an app process that runs `scopefs run --app
    ANY` is refused with exit code 77 and a message on stderr."""
    env.mount()
    got = env.app_json(
        ALPHA,
        """
        import subprocess
        p = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=30)
        emit({"rc": p.returncode, "stderr": p.stderr, "stdout": p.stdout})
    """,
        *env.run_argv(target, ["true"]),
    )
    assert got["rc"] == 77, got
    assert got["stderr"].strip(), "refusal must explain itself on stderr"


def _not_executable(env):
    path = env.root / "not-executable.sh"
    path.write_text("#!/bin/sh\nexit 0\n")
    os.chmod(path, 0o644)
    return [str(path)]


@pytest.mark.parametrize(
    "make_cmd,expected",
    [
        (lambda env: ["sh", "-c", "exit 3"], 3),
        (lambda env: ["sh", "-c", "exit 0"], 0),
        (lambda env: ["sh", "-c", "kill -TERM $$"], 128 + 15),
        (lambda env: [str(env.root / "no-such-command")], 127),
        (_not_executable, 126),
    ],
    ids=["exit-3", "exit-0", "killed-by-SIGTERM", "not-found", "not-executable"],
)
def test_run_propagates_exit_status(env, make_cmd, expected):
    """SPEC S5, CLI.md: `scopefs run` exits with CMD's status (128+N when
    killed by signal N; 126/127 when CMD cannot be executed / is missing)."""
    env.mount()
    p = env.run_app(ALPHA, make_cmd(env))
    assert p.returncode == expected, p.stderr


SANDBOX_VIEW = """
mnt, alpha, beta = sys.argv[1], sys.argv[2], sys.argv[3]
mine = os.path.join(mnt, alpha)
start_accessing(os.path.join(mine, "Providers/local/docs/report.txt"))
emit({"view": os.environ.get("SCOPEFS_VIEW"),
      "mount-env": os.environ.get("SCOPEFS_MOUNT"),
      "own": listing(mine),
      "home": os.environ.get("HOME"),
      "cwd": os.getcwd(),
      "report": outcome(lambda: read_bytes(os.path.join(mine, "Providers/local/docs/report.txt"))[:16].hex()),
      "write-own-container": attempt(write_text, os.path.join(mine, "Container/Documents/from-sandbox.txt"), "hi"),
      "mnt-other": attempt(os.stat, os.path.join(mnt, beta)),
      "mnt-listing": listing(mnt)})
"""


def test_sandbox_shows_only_the_app_directory(env):
    """SPEC S5 (amended): by default `scopefs run` confines the app; it sees
    its own view of the mount at $SCOPEFS_MOUNT (MOUNT/X, the same path as
    outside, Container and Providers), HOME and the working directory are its
    container, and no other app's directory exists in it."""
    env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    env.mount()
    got = env.app_json(ALPHA, SANDBOX_VIEW, env.mnt, ALPHA, BETA, sandbox=True)
    assert got["view"] == "sandbox" and got["mount-env"] == env.app_dir(ALPHA), got
    assert got["own"] == ["Container", "Providers"]
    assert got["home"] == env.container(ALPHA) and got["cwd"] == env.container(ALPHA), got
    assert got["report"] == {"ok": REPORT_BYTES[:16].hex()}
    assert got["write-own-container"] == "OK"
    assert got["mnt-other"] == "ENOENT", got
    assert got["mnt-listing"] == [ALPHA], got
    seen = env.app_json(ALPHA, "emit(listing(sys.argv[1]))", env.container(ALPHA, "Documents"))
    assert "from-sandbox.txt" in seen


def test_sandbox_exposes_only_what_it_is_told(env):
    """SPEC S5: `--expose PATH` shows one more host path read-only, even
    below /tmp (the sandbox's own /tmp is private), and nothing beside it."""
    shown = env.root / "shown"
    shown.mkdir()
    (shown / "note.txt").write_text("for the app")
    (env.root / "beside.txt").write_text("not for the app")
    env.mount()
    code = (
        "emit({'read': outcome(lambda: read_bytes(sys.argv[1]).decode()), "
        "'write': attempt(write_text, sys.argv[1], 'changed'), 'beside': attempt(os.stat, sys.argv[2]), "
        "'tmp': os.listdir('/tmp')})"
    )
    argv = env.run_argv(
        ALPHA,
        ["python3", "-c", snippet(code), str(shown / "note.txt"), str(env.root / "beside.txt")],
        sandbox=True,
        extra=("--expose", str(shown)),
    )
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env.base_env)
    assert p.returncode == 0, describe(p)
    got = last_json_line(p)
    assert got["read"] == {"ok": "for the app"} and got["write"] == "EROFS", got
    assert got["beside"] == "ENOENT", got
    assert (shown / "note.txt").read_text() == "for the app"


def test_status_lists_the_apps_processes_not_bubblewraps(env):
    """Issue 31, point 6: a sandboxed run's cgroup also holds bubblewrap
    (the sandbox's keeper and its pid 1); `status` lists the run and the
    app's own processes only. Seen failing on the old main: bwrap was
    counted as an app process."""
    from doc_scope_helpers import mount as mount_with_scopes

    mount_with_scopes(env)
    app = subprocess.Popen(
        [str(a) for a in env.run_argv(ALPHA, ["sleep", "30"], sandbox=True)],
        env=env.base_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def names() -> list[str]:
            listed = json.loads(env.cli("status", "--json").stdout)["daemon"]["processes"]
            return sorted(Path(f"/proc/{p['pid']}/comm").read_text().strip() for p in listed)

        listed = wait_for("the sandboxed sleep to be listed", names, lambda got: "sleep" in got, timeout=20)
        assert listed == ["scopefs", "sleep"], listed
    finally:
        app.terminate()
        app.wait(timeout=20)
