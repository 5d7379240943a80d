"""What the pick-request tests share with the other tests of apps that
pick, coordinate and follow their documents (SPEC S21a, S27a, S27b, S28a):
the owner's scripted agent, a mount whose apps have the Python client,
and the Python client's coordination scripts. A helper module, not a
test module, so that importing it collects no tests twice.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from doc_scope_helpers import mount
from scopefs_harness import LOCAL, wait_for_agent

REPO = Path(__file__).resolve().parents[2]
PYTHON_CLIENT = REPO / "clients" / "python"
REPORT = "docs/report.txt"


class Agent:
    """`scopefs agent --script FILE` in the background, as the owner."""

    def __init__(self, env, steps: list[dict], count: int | None = None):
        script = env.root / f"agent-{time.monotonic_ns()}.json"
        script.write_text(json.dumps({"steps": steps}))
        args = ["agent", "--script", script] + (["--count", str(count)] if count else [])
        self.out = env.root / f"agent-{time.monotonic_ns()}.out"
        with open(self.out, "w") as out:
            self.popen = subprocess.Popen(
                env.cli_argv(*args), stdout=out, stderr=subprocess.STDOUT, env=env.base_env, start_new_session=True
            )
        wait_for_agent(self.popen.pid)

    def finish(self, timeout: float = 20) -> str:
        try:
            self.popen.wait(timeout=timeout)
        finally:
            if self.popen.poll() is None:
                self.popen.kill()
                self.popen.wait()
        return self.out.read_text()


@pytest.fixture
def world(env):
    env.base_env["PYTHONPATH"] = str(PYTHON_CLIENT)
    (env.backing(LOCAL) / "docs" / "notes.md").write_text("# notes\n")
    mount(env)
    return env


PY_HOLDER = """
import scopefs
path, intent = sys.argv[1], sys.argv[2]
notices = scopefs.watch_documents(timeout=20)
with scopefs.coordinate(path, intent):
    step({"holding": intent})          # the test lets go of us, or a writer asks us to
    if intent == "read":
        for notice in notices:
            if notice["kind"] == "relinquish":
                emit({"relinquish": notice["path"], "at": time.time()})
                break
emit({"released": time.time()})
step({"done": True})
"""

PY_CLAIMER = """
import scopefs
path, intent, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
started = time.time()
try:
    with scopefs.coordinate(path, intent, timeout=timeout):
        emit({"granted": time.time(), "waited": time.time() - started})
except OSError as exc:
    emit({"error": type(exc).__name__, "waited": time.time() - started})
"""
