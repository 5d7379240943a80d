#!/usr/bin/env python3
"""Presenter and pick latencies (issue 17). Mounts a fresh world (the
integration harness's) and times, with the Python client in an app process:
  - host write -> the app's presenter yields `changed` (a granted file),
  - host rename -> the presenter yields `moved` (the new path),
  - another app's write through the mount (closed) -> `changed`,
  - pick round trip: the app's request -> a scripted agent's answer -> the
    app holds the URL (`scopefs.pick` returns).
Changes are spaced 150 ms apart, beyond the 100 ms folding of `changed`.
Prints p50/p99/max per series. Usage:
  SCOPEFS_BIN=.build/debug/scopefs python3 bench/presenter_latency.py [N]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "integration"))
from scopefs_harness import ALPHA, BETA, LOCAL, Env, set_child_subreaper  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from control_load import summary  # noqa: E402

REPORT = "docs/report.txt"

PY_PRESENTER = """
import scopefs
notices = scopefs.watch_documents()
os.stat(sys.argv[1])  # the app has looked its document up
emit({"ready": True})
for notice in notices:
    notice["at"] = time.time()
    emit(notice)
"""

PY_WRITER = """
path = sys.argv[1]
import scopefs
scopefs.start_accessing(path)
while step({"ready": True}) == "write":
    started = time.time()
    with open(path, "ab") as f:
        f.write(b"x")
    emit({"started": started})
"""

PY_PICKER = """
import scopefs
for _ in range(int(sys.argv[1])):
    started = time.time()
    paths = scopefs.pick(content_types=["public.plain-text"])
    emit({"seconds": time.time() - started, "paths": paths})
emit({"done": True})
"""


def wait_for(session, kind: str) -> dict:
    while True:
        notice = session.recv(timeout=10)
        if notice.get("kind") == kind:
            return notice


def measure(env: Env, count: int) -> dict[str, list[float]]:
    env.cli("open", ALPHA, f"{LOCAL}:{REPORT}")  # the granted file itself: a rename moves the grant
    env.cli("open", BETA, f"{LOCAL}:docs")
    presenter = env.app_session(ALPHA, "import time\n" + PY_PRESENTER, env.prov(ALPHA, LOCAL, REPORT))
    assert presenter.recv() == {"ready": True}
    series: dict[str, list[float]] = {"host write": [], "host rename": [], "app write": [], "pick": []}
    report = env.backing(LOCAL) / REPORT
    for _ in range(count):
        started = time.time()
        with open(report, "ab") as f:
            f.write(b"x")
        series["host write"].append(wait_for(presenter, "changed")["at"] - started)
        time.sleep(0.15)
    names = [report, report.with_name("renamed.txt")]
    for i in range(count):
        started = time.time()
        names[i % 2].rename(names[(i + 1) % 2])
        series["host rename"].append(wait_for(presenter, "moved")["at"] - started)
        time.sleep(0.05)
    if count % 2:
        names[1].rename(names[0])
        wait_for(presenter, "moved")
    writer = env.app_session(BETA, "import time\n" + PY_WRITER, env.prov(BETA, LOCAL, REPORT))
    assert writer.recv() == {"ready": True}
    for _ in range(count):
        writer.send("write")
        started = writer.recv()["started"]
        series["app write"].append(wait_for(presenter, "changed")["at"] - started)
        assert writer.recv() == {"ready": True}
        time.sleep(0.15)
    writer.send("stop")

    script = env.root / "agent.json"
    script.write_text(json.dumps({"steps": [{"choose": [f"{LOCAL}:{REPORT}"]}] * count}))
    agent = subprocess.Popen(
        env.cli_argv("agent", "--script", script, "--count", str(count)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env.base_env,
        start_new_session=True,
    )
    time.sleep(0.5)
    picker = env.app_session(ALPHA, "import time\n" + PY_PICKER, count)
    for _ in range(count):
        series["pick"].append(picker.recv(timeout=30)["seconds"])
    agent.wait(timeout=30)
    return series


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    set_child_subreaper()
    env = Env()
    env.base_env["PYTHONPATH"] = str(REPO / "clients" / "python")
    try:
        env.init_world()
        env.mount(lenient=True)  # it measures the daemon's answers, not scopes
        for name, values in measure(env, count).items():
            print(summary(name, values))
    finally:
        problems = env.teardown()
        if problems:
            print("teardown:", problems)


if __name__ == "__main__":
    main()
