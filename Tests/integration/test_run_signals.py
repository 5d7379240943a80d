"""Signals reach the sandboxed app (SPEC S5; docs/CLI.md `scopefs run`,
docs/SCENARIOS.md `signal:`): what a process sends `scopefs run` (a
`kill`, a service manager's stop, the scenario runner's `signal:` step)
is passed on to the app's own process inside the default sandbox, which
handles it and goes on; bubblewrap neither dies of it nor turns it into
the SIGKILL of `--die-with-parent`. Default sandbox, default (strict)
scopes, with a root owner (the app runs as the app account, SPEC S39)
and with a non-root owner (the owner in a user namespace).

The terminal's own signals (Ctrl-C) reach the app once: it shares the
terminal's process group, and `scopefs run` does not pass the kernel's
signal on a second time.

Seen failing on the old main (/tmp/base/scopefs): the launcher passed
the signal to bubblewrap, which died of it, and `--die-with-parent`
killed the app before its handler ran: `scopefs run` exited 129 on the
first SIGHUP, both scenarios failed with "exit status is 0: it was 129",
and after Ctrl-C the terminal closed with no "interrupts" line.
"""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from scopefs_harness import (
    ALPHA,
    LOCAL,
    NOBODY,
    NON_ROOT_OWNER_PRELUDE,
    RUNNERS,
    describe,
    mount_count,
    run_bounded,
    scopefs_bin,
)

# Each signal `scopefs run` passes on, in the order the test sends them.
FORWARDED = ("SIGHUP", "SIGTERM", "SIGINT", "SIGUSR1")

# An app that counts the signals it handles and reports them one by one.
COUNTING_APP = """
import time
got = []
for name in sys.argv[1:]:
    signal.signal(getattr(signal, name), lambda number, frame: got.append(signal.Signals(number).name))
step({"ready": os.getpid()})
for expected in sys.argv[1:]:
    deadline = time.monotonic() + 10
    while expected not in got and time.monotonic() < deadline:
        time.sleep(0.01)  # polls the handler's list; the test waits on this report
    step({"got": list(got)})
"""


def test_scopefs_run_passes_each_signal_on_to_the_sandboxed_app(env):
    """`kill -HUP` (then TERM, INT, USR1) of `scopefs run` reaches the app
    inside the default sandbox: its handler runs each time, it keeps
    running, and the run exits with the app's own status, 0."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    app = env.app_session(ALPHA, COUNTING_APP, *FORWARDED, sandbox=True)
    ready = app.recv()
    assert "ready" in ready, app.stderr()
    for index, name in enumerate(FORWARDED):
        os.kill(app.pid, getattr(signal, name))
        app.send()
        report = app.recv()
        assert report["got"] == list(FORWARDED[: index + 1]), (name, report, app.stderr())
    assert app.finish() == 0, app.stderr()


# Counts its SIGINTs: a second copy would come within milliseconds.
INTERRUPTED_APP = textwrap.dedent("""
    import signal, time
    got = []
    signal.signal(signal.SIGINT, lambda number, frame: got.append(number))
    print("READY", flush=True)
    deadline = time.monotonic() + 20
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    print(f"interrupts {len(got)}", flush=True)
""")


def read_until(master: int, text: bytes, seen: bytearray, timeout: float = 20) -> re.Match:
    """Reads the terminal's output into `seen` until `text` (a pattern) shows."""
    deadline = time.monotonic() + timeout
    while not (found := re.search(text, seen)):
        left = deadline - time.monotonic()
        assert left > 0, f"no {text!r} within {timeout}s: {bytes(seen)!r}"
        if select.select([master], [], [], left)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every slave end closed
                chunk = b""
            assert chunk, f"the terminal closed before {text!r}: {bytes(seen)!r}"
            seen += chunk
    return found


def test_the_terminals_interrupt_reaches_the_sandboxed_app_once(env):
    """^C on the run's terminal goes to its foreground process group, the
    app included: the app handles it once (`scopefs run` does not pass the
    kernel's signal on a second time), bubblewrap ignores it, and the run
    exits with the app's status, 0."""
    env.mount()
    master, slave = pty.openpty()
    argv = ["setsid", "--ctty", *env.run_argv(ALPHA, ["python3", "-c", INTERRUPTED_APP], sandbox=True)]
    run = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env.base_env)
    os.close(slave)
    seen = bytearray()
    try:
        read_until(master, b"READY", seen)
        os.write(master, b"\x03")
        count = read_until(master, rb"interrupts (\d+)", seen).group(1)
        assert count == b"1", bytes(seen)
        assert run.wait(timeout=20) == 0, bytes(seen)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=10)
        os.close(master)


# The scenario's app: SIGHUP makes it write a file in its container (no
# scope needed, SPEC S9) and say so; it exits 0 after the handler ran.
HUP_APP = textwrap.dedent("""
    import os, signal, sys, time
    done = []
    def on_hangup(number, frame):
        with open(os.path.join(os.environ["SCOPEFS_MOUNT"], "Container/Documents/hup.txt"), "w") as out:
            out.write("reloaded\\n")
        print("got SIGHUP", flush=True)
        done.append(number)
    signal.signal(signal.SIGHUP, on_hangup)
    print("READY", flush=True)
    deadline = time.monotonic() + 20
    while not done and time.monotonic() < deadline:
        time.sleep(0.01)
    sys.exit(0 if done else 3)
""")

HUP_SCENARIO = """
steps:
  - when: app prints READY
    signal: HUP
expect:
  exit: 0
  prints: "got SIGHUP"
"""


@pytest.mark.sqlite_store(RUNNERS)
def test_a_scenario_signal_step_reaches_the_sandboxed_app_of_a_root_owner(env):
    """`signal: HUP` once the app printed READY: the app (the app account,
    in the default sandbox) handles it, writes its file and exits 0, so
    every expectation holds and `scopefs test` exits 0."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    scenario = env.root / "hup.yaml"
    scenario.write_text(HUP_SCENARIO)
    p = env.cli("test", scenario, "--app", ALPHA, "--", "python3", "-c", HUP_APP, expect=None, timeout=60)
    assert p.returncode == 0, describe(p)
    assert "signal SIGHUP" in p.stdout + p.stderr, describe(p)
    assert Path(env.container(ALPHA, "Documents/hup.txt")).read_text() == "reloaded\n"


# A non-root owner's session in a private mount namespace: the same
# scenario, then the file the app wrote, read through the inspect view.
NON_ROOT_SESSION = r"""
s() { as_owner "$binary" --state "$root/state" "$@"; }
s init >/dev/null
s provider add local "$root/provider" >/dev/null
s app add com.example.alpha >/dev/null
s grant com.example.alpha local:docs >/dev/null
s mount "$root/mnt" >/dev/null
trap 's unmount "$root/mnt" >/dev/null 2>&1 || fusermount3 -u "$root/mnt"' EXIT
status=0
s test "$root/hup.yaml" --app com.example.alpha -- python3 -c "$app" || status=$?
echo "test exit $status"
as_owner cat "$root/mnt/com.example.alpha/Container/Documents/hup.txt"
"""


@pytest.mark.sqlite_store(RUNNERS)
def test_a_scenario_signal_step_reaches_the_sandboxed_app_of_a_non_root_owner():
    """The same scenario run by a non-root owner (uid 65534): the app is
    the owner in a user namespace, and the step reaches it too."""
    root = Path(tempfile.mkdtemp(prefix="scopefs-signals-", dir="/tmp"))
    try:
        os.chmod(root, 0o755)
        for folder in ("provider/docs", "mnt", "dev"):
            (root / folder).mkdir(parents=True)
        (root / "hup.yaml").write_text(HUP_SCENARIO)
        for path in [root, *root.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        script = "root=$1 binary=$2 app=$3" + NON_ROOT_OWNER_PRELUDE + NON_ROOT_SESSION
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "session"]
        argv += [str(root), str(scopefs_bin().resolve()), HUP_APP]
        p = run_bounded(argv, 90, dict(os.environ), what="a non-root owner's scenario")
        assert p.returncode == 0, describe(p)
        assert "test exit 0" in p.stdout, describe(p)
        assert "signal SIGHUP" in p.stdout + p.stderr, describe(p)
        assert p.stdout.rstrip().endswith("reloaded"), describe(p)
    finally:
        if not mount_count(root / "mnt"):
            shutil.rmtree(root, ignore_errors=True)
