"""The picker's export and move coordinate (issue 17, like NSFileCoordinator
for the document picker): before the owner's `scopefs export`/`move` (the
commands, and an agent answering an app's pick request) writes, it claims
the container item and its destination for writing through the daemon.
An app holding a claim on either is asked to relinquish (its presenter
hears `relinquish`) and the transfer waits for it; an app that does not let
go holds the owner back only for `--coordination-wait`, never forever. Two
real app processes, a real mount.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from doc_scope_helpers import mount
from pick_agent import PY_CLAIMER, PY_HOLDER, PYTHON_CLIENT, REPORT, Agent
from scopefs_harness import ALPHA, BETA, LOCAL, REPORT_BYTES

NEW = b"the app's new version\n"


@pytest.fixture
def world(env):
    env.base_env["PYTHONPATH"] = str(PYTHON_CLIENT)
    mount(env)
    documents = env.state / "containers" / ALPHA / "Documents"
    documents.mkdir(parents=True, exist_ok=True)
    (documents / "report.txt").write_bytes(NEW)
    env.cli("open", BETA, f"{LOCAL}:docs")  # BETA presents the destination folder
    return env


def start_cli(world, *args) -> tuple[subprocess.Popen, float]:
    popen = subprocess.Popen(
        world.cli_argv(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=world.base_env,
        text=True,
        start_new_session=True,
    )
    return popen, time.time()


def finish_cli(popen: subprocess.Popen, timeout: float = 30) -> tuple[int, str, str, float]:
    out, err = popen.communicate(timeout=timeout)
    return popen.returncode, out, err, time.time()


def test_export_waits_for_another_apps_reader_to_relinquish(world):
    """A reader in another app holds the destination; the owner's export
    --force waits, the reader's presenter hears relinquish, lets go, and
    only then is the file replaced."""
    reader = world.app_session(BETA, "import time\n" + PY_HOLDER, world.prov(BETA, LOCAL, REPORT), "read")
    assert reader.recv() == {"holding": "read"}
    export, _ = start_cli(world, "export", "--force", ALPHA, "Documents/report.txt", f"{LOCAL}:docs")
    time.sleep(1.0)  # not a wait: the export must not finish while the reader holds the file
    assert export.poll() is None, "the export did not wait for the reader's claim"
    assert (world.backing(LOCAL) / REPORT).read_bytes() == REPORT_BYTES
    reader.send("go")  # now the reader looks at its notices
    relinquished = reader.recv()
    assert relinquished.get("relinquish") == world.prov(BETA, LOCAL, REPORT), relinquished
    reader.recv()  # released
    status, out, err, ended = finish_cli(export)
    assert status == 0, err
    assert ended >= relinquished["at"], (ended, relinquished)
    assert "went ahead" not in err, err
    assert (world.backing(LOCAL) / REPORT).read_bytes() == NEW
    reader.send("go")


def test_an_app_cannot_hold_the_owners_move_back_forever(world):
    """Attack: an app takes a write claim on the destination and never lets
    go. The owner's move waits --coordination-wait seconds, then goes ahead,
    and says which app held it back."""
    writer = world.app_session(BETA, "import time\n" + PY_HOLDER, world.prov(BETA, LOCAL, REPORT), "write")
    assert writer.recv() == {"holding": "write"}
    started = time.monotonic()
    p = world.cli("move", "--force", "--coordination-wait", "1", ALPHA, "Documents/report.txt", f"{LOCAL}:docs")
    took = time.monotonic() - started
    assert 0.9 <= took < 8, took
    assert "went ahead although com.example.beta still held a claim" in p.stderr, p.stderr
    assert (world.backing(LOCAL) / REPORT).read_bytes() == NEW
    writer.send("go")
    assert "released" in writer.recv()


def test_own_processes_claim_on_the_container_item_holds_a_move(world):
    """The moved item itself: another process of the same app reads
    Container/Documents/report.txt under a read claim; the owner's move
    waits until its presenter relinquishes. Another app's claim on its own
    container item of the same name holds nothing (claims on container
    items are per app)."""
    other_documents = world.state / "containers" / BETA / "Documents"
    other_documents.mkdir(parents=True, exist_ok=True)
    (other_documents / "report.txt").write_bytes(b"beta's own\n")
    bystander = world.app_session(
        BETA, "import time\n" + PY_HOLDER, world.container(BETA, "Documents/report.txt"), "write"
    )
    assert bystander.recv() == {"holding": "write"}
    reader = world.app_session(
        ALPHA, "import time\n" + PY_HOLDER, world.container(ALPHA, "Documents/report.txt"), "read"
    )
    assert reader.recv() == {"holding": "read"}
    move, _ = start_cli(world, "move", ALPHA, "Documents/report.txt", f"{LOCAL}:")
    time.sleep(1.0)  # not a wait: the move must not finish while the reader holds the file
    assert move.poll() is None, "the move did not wait for the app's own reader"
    reader.send("go")
    relinquished = reader.recv()
    assert relinquished.get("relinquish") == world.container(ALPHA, "Documents/report.txt"), relinquished
    reader.recv()  # released
    status, out, err, ended = finish_cli(move)
    assert status == 0 and ended >= relinquished["at"], err
    assert "went ahead" not in err, err  # BETA's claim on its own report.txt was not in the way
    assert (world.backing(LOCAL) / "report.txt").read_bytes() == NEW
    reader.send("go")
    bystander.send("go")


def test_agent_answering_a_move_request_coordinates(world):
    """An app's pick request in move mode: the agent's move waits for a
    reader in another app to relinquish the destination, then the app
    receives the moved document's path."""
    reader = world.app_session(BETA, "import time\n" + PY_HOLDER, world.prov(BETA, LOCAL, REPORT), "read")
    assert reader.recv() == {"holding": "read"}
    reader.send("go")  # it relinquishes as soon as it is asked
    (world.backing(LOCAL) / REPORT).unlink()  # the destination name is free; the claim still holds it
    agent = Agent(world, [{"choose": [f"{LOCAL}:docs"]}])
    picked = world.app_json(
        ALPHA, "import scopefs\nemit({'paths': scopefs.pick(mode='move', items=['Documents/report.txt'])})"
    )
    relinquished = reader.recv()
    released = reader.recv()["released"]
    agent.finish()
    assert relinquished.get("relinquish") == world.prov(BETA, LOCAL, REPORT), relinquished
    assert picked["paths"] == [world.prov(ALPHA, LOCAL, REPORT)], picked
    assert (world.backing(LOCAL) / REPORT).read_bytes() == NEW
    assert released > 0
    reader.send("go")


def test_apps_cannot_claim_for_transfers_or_others_containers(world):
    """Attack: claimForTransfer is the owner's (refused on the app endpoint,
    SPEC S5); an app cannot claim another app's container item, nor an item
    it was not given."""
    refused = world.app_json(
        ALPHA,
        """
import scopefs
r = scopefs._ask({"op": "claimForTransfer", "transferItems": [{"provider": "local", "path": "docs/report.txt"}]}, None, 10)
emit(r)
""",
    )
    assert refused.get("ok") is False and refused.get("code") == 77, refused
    foreign = world.app_json(
        ALPHA, "import time\n" + PY_CLAIMER, world.container(BETA, "Documents/report.txt"), "write", "1"
    )
    assert foreign.get("error") == "FileNotFoundError", foreign
    dotted = world.app_json(
        ALPHA,
        "import time\n" + PY_CLAIMER,
        world.container(ALPHA, f"../../{BETA}/Container/Documents/report.txt"),
        "write",
        "1",
    )
    assert dotted.get("error") == "FileNotFoundError", dotted
    hidden = world.app_json(ALPHA, "import time\n" + PY_CLAIMER, world.prov(ALPHA, LOCAL, REPORT), "write", "1")
    assert hidden.get("error") == "FileNotFoundError", hidden
