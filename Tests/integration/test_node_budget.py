"""The node budget (issue 52; SPEC S40, S14): the kernel holds a node in
the daemon for every entry in its dentry cache, and it keeps entries until
the machine runs short of memory, so a walk of a large tree used to grow
the daemon by about 1 KiB per folder (1,097 MiB after a million). With
`--max-nodes N` the daemon asks the kernel to forget the least recently
used nodes once it holds more than N (FUSE_NOTIFY_PRUNE), and frees them
at their FORGET.

A walk of 20,000 folders under `--max-nodes 2000` must list every folder
while `status --json`'s node count stays near the budget; a file in a
folder forgotten long ago reads its content again through fresh nodes, and
revoking the grant still cuts those nodes exactly (S14: EPERM for a new
open, a listing and a descriptor held open). As users run it: the default
strict scopes, an app in the default sandbox holding a scope on its grant.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from scopefs_harness import ALPHA, LOCAL, wait_for

BUDGET = 2000
TOP, BELOW = 20, 1000  # 20 + 20 * 1,000 folders under the grant, and the grant's own
# Above the budget while the pruner catches up with the walk and the
# kernel's FORGETs arrive; a walk without a budget ends at 20,000 and more.
SLACK = BUDGET

WALK_AND_HOLD = r"""
import errno
import subprocess
folder = sys.argv[1]
note = os.path.join(folder, "d0", "s0", "note.txt")
os.setxattr(folder, "user.scopefs.start", b"")
step("ready")
p = subprocess.run(["find", folder, "-type", "d"], capture_output=True)
errors = p.stderr.decode(errors="replace").splitlines()
with open(note) as f:
    text = f.read()
held = os.open(note, os.O_RDONLY)
step({"folders": p.stdout.count(b"\n"), "status": p.returncode, "errors": errors[:3], "text": text,
      "held": os.pread(held, 64, 0).decode()})

def attempt(use):
    try:
        use()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))

emit({"held": attempt(lambda: os.pread(held, 64, 0)), "open": attempt(lambda: open(note).read()),
      "list": attempt(lambda: os.listdir(os.path.dirname(note)))})
"""


def daemon_nodes(env) -> int:
    p = env.cli("status", "--json")
    return json.loads(p.stdout)["daemon"]["inodes"]


def make_tree(top) -> int:
    for i in range(TOP):
        for j in range(BELOW):
            os.makedirs(top / f"d{i}" / f"s{j}")
    return TOP + TOP * BELOW + 1


@pytest.mark.scopefs_timeout(240)
def test_walk_beyond_the_node_budget_lists_all_and_revokes_exactly(env):
    """SPEC S40 (folder nodes have a bound), S14: `find` lists all 20,021
    folders while the daemon's node count stays under the budget plus
    SLACK; afterwards a file under the first folder walked (forgotten by
    then) reads its content, and a revoke makes its held descriptor, a new
    open and its folder's listing fail with EPERM."""
    tree = env.backing(LOCAL) / "tree"
    created = make_tree(tree)
    (tree / "d0" / "s0" / "note.txt").write_text("still here\n")
    grant = env.grant(ALPHA, f"{LOCAL}:tree")
    env.mount_args = lambda *a, **k: ["mount", env.mnt, "--max-nodes", str(BUDGET)]
    env.mount()

    session = env.app_session(ALPHA, WALK_AND_HOLD, env.prov(ALPHA, LOCAL, "tree"), sandbox=True)
    assert session.recv() == "ready"
    peak = [daemon_nodes(env)]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            peak[0] = max(peak[0], daemon_nodes(env))

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.monotonic()
    try:
        session.send()
        walked = session.recv(timeout=180)
    finally:
        stop.set()
        sampler.join()
    print(f"walk of {created} folders in {time.monotonic() - started:.1f} s: {walked}; peak nodes {peak[0]}")
    assert (walked["folders"], walked["status"], walked["errors"]) == (created, 0, []), walked
    assert (walked["text"], walked["held"]) == ("still here\n", "still here\n"), walked
    assert peak[0] <= BUDGET + SLACK, f"the daemon held {peak[0]} nodes under --max-nodes {BUDGET}"
    # Once the walk is over, the pruner brings the table down to the budget.
    wait_for(f"the node count back under {BUDGET}", lambda: daemon_nodes(env), lambda n: n <= BUDGET, timeout=10)

    env.revoke(ALPHA, grant)
    session.send()
    after = session.recv()
    session.finish()
    assert after == {"held": "EPERM", "open": "EPERM", "list": "EPERM"}, after
