"""Export and move of several container items in one request (issue 17, like
UIDocumentPickerViewController(forExporting: [URL], asCopy:)): an app's pick
request names them all, the owner's agent shows them all, the chosen folder
receives every one, the reply lists each new path in order; the owner's
`scopefs export`/`move` take several items too. A failing item is reported
by name, and nothing is lost (SPEC S19, S20, S34). Real mount, real agent
processes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

import pytest
from client_builds import c_build, swift_check  # noqa: F401  (fixtures: the C library, the Swift check app)
from doc_scope_helpers import mount
from pick_agent import PYTHON_CLIENT, Agent
from scopefs_harness import ALPHA, LOCAL, describe, wait_for_agent

NAMES = ["a.txt", "b.md", "c.txt"]

PY_TRANSFER = """
import scopefs
mode, items = sys.argv[1], json.loads(sys.argv[2])
try:
    emit({"paths": scopefs.pick(mode=mode, items=items)})
except OSError as exc:
    emit({"error": type(exc).__name__, "message": str(exc), "paths": getattr(exc, "paths", None)})
"""

PY_MOVE_AND_READ = """
import scopefs
paths = scopefs.pick(mode="move", items=json.loads(sys.argv[1]))
contents = []
for p in paths:
    scopefs.start_accessing(p)
    contents.append(read_text(p))
emit({"paths": paths, "contents": contents})
"""


@pytest.fixture
def world(env):
    env.base_env["PYTHONPATH"] = str(PYTHON_CLIENT)
    (env.backing(LOCAL) / "out").mkdir()
    mount(env)
    documents = env.state / "containers" / ALPHA / "Documents"
    documents.mkdir(parents=True, exist_ok=True)
    for name in NAMES:
        (documents / name).write_text(f"content of {name}\n")
    return env


def documents(world):
    return world.state / "containers" / ALPHA / "Documents"


def moved_out(world, name: str) -> bool:
    """The original left the container: at most a reference document to
    the moved item (SPEC S20) has its name now."""
    left = documents(world) / name
    return not left.exists() or left.read_bytes().startswith(b"scopefs-reference 1\n")


def transfer(world, mode: str, names: list[str]) -> dict:
    return world.app_json(ALPHA, PY_TRANSFER, mode, json.dumps([f"Documents/{n}" for n in names]))


def test_export_of_three_items(world):
    """Three items exported into the folder the agent chose: the reply lists
    the three copies in order, each equal to its original, and the originals
    stay in the container (SPEC S19)."""
    agent = Agent(world, [{"choose": [f"{LOCAL}:out"]}])
    got = transfer(world, "export", NAMES)
    log = agent.finish()
    assert got.get("paths") == [world.prov(ALPHA, LOCAL, f"out/{n}") for n in NAMES], (got, log)
    for name in NAMES:
        assert (world.backing(LOCAL) / "out" / name).read_text() == f"content of {name}\n"
        assert (documents(world) / name).read_text() == f"content of {name}\n"


def test_move_of_two_items(world):
    """Two items moved: gone from the container, present in the folder with
    the same content, and the app reads them through the paths it got
    (a grant and a reference each, SPEC S20)."""
    agent = Agent(world, [{"choose": [f"{LOCAL}:out"]}])
    got = world.app_json(ALPHA, PY_MOVE_AND_READ, json.dumps(["Documents/a.txt", "Documents/c.txt"]))
    log = agent.finish()
    assert got.get("paths") == [world.prov(ALPHA, LOCAL, "out/a.txt"), world.prov(ALPHA, LOCAL, "out/c.txt")], (
        got,
        log,
    )
    assert got["contents"] == ["content of a.txt\n", "content of c.txt\n"], got
    for name in ("a.txt", "c.txt"):
        assert moved_out(world, name)
        assert (world.backing(LOCAL) / "out" / name).read_text() == f"content of {name}\n"
    assert (documents(world) / "b.md").exists()


def test_a_name_collision_fails_clearly_and_moves_nothing(world):
    """The second of three items would replace a file in the folder: the app
    hears which item and why, and nothing was moved, copied or replaced
    (SPEC S34: no lost data, no half-done request)."""
    (world.backing(LOCAL) / "out" / "b.md").write_text("already here\n")
    agent = Agent(world, [{"choose": [f"{LOCAL}:out"]}])
    got = transfer(world, "move", NAMES)
    log = agent.finish()
    assert got.get("error") == "ScopeDenied", (got, log)
    assert "out/b.md already exists" in got["message"] and "Documents/b.md" in got["message"], got
    assert got["paths"] == [], got
    for name in NAMES:
        assert (documents(world) / name).read_text() == f"content of {name}\n"
    assert sorted(p.name for p in (world.backing(LOCAL) / "out").iterdir()) == ["b.md"]
    assert (world.backing(LOCAL) / "out" / "b.md").read_text() == "already here\n"


def test_a_missing_item_fails_clearly_and_exports_nothing(world):
    """An item that is not in the container: named in the error; the others
    were not exported either."""
    agent = Agent(world, [{"choose": [f"{LOCAL}:out"]}])
    got = world.app_json(ALPHA, PY_TRANSFER, "export", json.dumps(["Documents/a.txt", "Documents/gone.txt"]))
    agent.finish()
    assert got.get("error") == "ScopeDenied" and "Documents/gone.txt does not exist" in got["message"], got
    assert list((world.backing(LOCAL) / "out").iterdir()) == []


def test_a_failure_midway_keeps_what_was_placed_and_names_the_rest(world):
    """The second of three items cannot be copied (a socket: its bytes
    cannot be read, found only while copying): the first stays moved (its
    path is in the error's `paths`, and the app can read it), the second is
    not half-moved and stays in the container, the third is not tried; the
    message names all three (SPEC S34)."""
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(documents(world) / "b.sock"))
        agent = Agent(world, [{"choose": [f"{LOCAL}:out"]}])
        got = world.app_json(
            ALPHA, PY_TRANSFER, "move", json.dumps(["Documents/a.txt", "Documents/b.sock", "Documents/c.txt"])
        )
        log = agent.finish()
    message = got.get("message", "")
    assert got.get("error") == "ScopeDenied", (got, log)
    assert "item 2 of 3 (Documents/b.sock) was not moved" in message, message
    assert "moved before it: Documents/a.txt -> local:out/a.txt" in message, message
    assert "not tried, still in the container: Documents/c.txt" in message, message
    assert got["paths"] == [world.prov(ALPHA, LOCAL, "out/a.txt")], got
    assert moved_out(world, "a.txt")
    assert (world.backing(LOCAL) / "out" / "a.txt").read_text() == "content of a.txt\n"
    assert (documents(world) / "b.sock").is_socket() and not (world.backing(LOCAL) / "out" / "b.sock").exists()
    assert (documents(world) / "c.txt").read_text() == "content of c.txt\n"
    assert sorted(p.name for p in (world.backing(LOCAL) / "out").iterdir()) == ["a.txt"]


def test_an_app_cannot_hang_the_agent_with_a_fifo(world):
    """Attack: the app puts a FIFO in its container and asks to export it
    with a file. Copying a FIFO would block the owner's agent (which serves
    every app) forever; it is refused at once, by name (SPEC S34), and the
    agent answers the next request."""
    os.mkfifo(documents(world) / "trap")
    agent = Agent(world, [{"choose": [f"{LOCAL}:out"]}, {"choose": [f"{LOCAL}:out"]}])
    started = time.monotonic()
    got = world.app_json(ALPHA, PY_TRANSFER, "export", json.dumps(["Documents/a.txt", "Documents/trap"]))
    took = time.monotonic() - started
    after = transfer(world, "export", ["c.txt"])
    agent.finish()
    assert took < 10, took
    assert got.get("error") == "ScopeDenied" and "item 2 of 2 (Documents/trap) was not exported" in got["message"], got
    assert "not a file, folder or link" in got["message"], got
    assert got["paths"] == [world.prov(ALPHA, LOCAL, "out/a.txt")], got
    assert after.get("paths") == [world.prov(ALPHA, LOCAL, "out/c.txt")], after
    assert sorted(p.name for p in (world.backing(LOCAL) / "out").iterdir()) == ["a.txt", "c.txt"]


def test_the_agent_shows_every_item(world):
    """The owner's terminal agent says how many items the app wants to export
    and names each, before asking for the folder."""
    popen = subprocess.Popen(
        world.cli_argv("agent", "--count", "1"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=world.base_env,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for_agent(popen.pid)
        popen.stdin.write(f"{LOCAL}:out\n")
        popen.stdin.flush()
        got = transfer(world, "export", NAMES)
        out, _ = popen.communicate(timeout=30)
    finally:
        if popen.poll() is None:
            popen.kill()
            popen.wait()
    assert "wants to export 3 items (Documents/a.txt, Documents/b.md, Documents/c.txt)" in out, out
    assert len(got.get("paths", [])) == 3, (got, out)


def test_owner_commands_take_several_items(world):
    """`scopefs export APP ITEM... PROVIDER:DIR` and `scopefs move`: a line
    per item in order; a collision is refused before anything is placed."""
    exported = world.cli("export", ALPHA, "Documents/a.txt", "Documents/b.md", f"{LOCAL}:out")
    assert exported.stdout.split() == [f"{LOCAL}:out/a.txt", f"{LOCAL}:out/b.md"], describe(exported)
    refused = world.cli("move", ALPHA, "Documents/c.txt", "Documents/a.txt", f"{LOCAL}:out", expect=65)
    assert "out/a.txt already exists (for Documents/a.txt)" in refused.stderr, describe(refused)
    assert not moved_out(world, "c.txt") and not (world.backing(LOCAL) / "out" / "c.txt").exists()
    moved = world.cli("move", "--force", ALPHA, "Documents/c.txt", "Documents/a.txt", f"{LOCAL}:out")
    assert moved.stdout.count("grant ") == 2, describe(moved)
    assert moved_out(world, "c.txt") and moved_out(world, "a.txt")
    assert (world.backing(LOCAL) / "out" / "c.txt").read_text() == "content of c.txt\n"
    usage = world.cli("export", ALPHA, f"{LOCAL}:out", expect=64)
    assert "at least one container path" in usage.stderr, describe(usage)


C_PICK_ITEMS = """
import ctypes
lib = ctypes.CDLL(sys.argv[1], use_errno=True)
lib.scopefs_pick_items.restype = ctypes.POINTER(ctypes.c_char_p)
lib.scopefs_pick_items.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_char_p]
lib.scopefs_free_paths.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
items = json.loads(sys.argv[2])
array = (ctypes.c_char_p * (len(items) + 1))(*[i.encode() for i in items], None)
got = lib.scopefs_pick_items(b"move", array, None)
if not got:
    emit({"error": errno.errorcode[ctypes.get_errno()]})
else:
    paths, k = [], 0
    while got[k]:
        paths.append(got[k].decode())
        k += 1
    lib.scopefs_free_paths(got)
    bad = lib.scopefs_pick_items(b"open", array, None)
    emit({"paths": paths, "openRefused": errno.errorcode[ctypes.get_errno()] if not bad else None})
"""


def test_c_client_moves_several_items(world, c_build):
    """SPEC S31: the C library's scopefs_pick_items moves the items and
    returns their new paths in order; "open" is not a mode it takes."""
    agent = Agent(world, [{"choose": [f"{LOCAL}:out"]}])
    got = world.app_json(
        ALPHA, C_PICK_ITEMS, c_build / "libscopefs.so", json.dumps(["Documents/c.txt", "Documents/a.txt"])
    )
    agent.finish()
    assert got == {
        "paths": [world.prov(ALPHA, LOCAL, "out/c.txt"), world.prov(ALPHA, LOCAL, "out/a.txt")],
        "openRefused": "EINVAL",
    }, got
    assert moved_out(world, "c.txt")


def test_swift_app_exports_and_moves_urls(world, swift_check):
    """The Swift client's `DocumentPicker.present(exporting: urls, asCopy:)`
    (Apple's forExporting:asCopy:): container URLs in, the new URLs out in
    order; a URL outside the container is a usage error sent nowhere."""
    agent = Agent(world, [{"choose": [f"{LOCAL}:out"]}, {"choose": [f"{LOCAL}:out"]}])
    copied = world.run_app(
        ALPHA,
        [
            swift_check,
            "export-urls",
            "copy",
            world.container(ALPHA, "Documents/b.md"),
            world.container(ALPHA, "Documents/a.txt"),
        ],
    )
    moved = world.run_app(ALPHA, [swift_check, "export-urls", "move", world.container(ALPHA, "Documents/c.txt")])
    outside = world.run_app(ALPHA, [swift_check, "export-urls", "copy", world.prov(ALPHA, LOCAL, "docs/notes.md")])
    agent.finish()
    assert json.loads(copied.stdout.strip().splitlines()[-1]).get("paths") == "\n".join(
        [world.prov(ALPHA, LOCAL, "out/b.md"), world.prov(ALPHA, LOCAL, "out/a.txt")]
    ), describe(copied)
    assert json.loads(moved.stdout.strip().splitlines()[-1]).get("paths") == world.prov(ALPHA, LOCAL, "out/c.txt")
    assert moved_out(world, "c.txt") and (documents(world) / "a.txt").exists()
    assert json.loads(outside.stdout.strip().splitlines()[-1]).get("error", "").endswith("EINVAL"), describe(outside)


def test_pick_request_from_a_shell_prints_what_was_placed_before_a_failure(world):
    """`scopefs pick --request --mode move A B` in the app: B fails while
    copying; A's new path is printed, the error names B, the exit is 77."""
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(documents(world) / "b.sock"))
        agent = Agent(world, [{"choose": [f"{LOCAL}:out"]}])
        scopefs = world.cli_argv()[0]  # this build's binary, as the app's shell would run it
        p = world.run_app(
            ALPHA, [scopefs, "pick", "--request", "--mode", "move", "Documents/a.txt", "Documents/b.sock"]
        )
        agent.finish()
    assert p.returncode == 77, describe(p)
    assert p.stdout.split() == [world.prov(ALPHA, LOCAL, "out/a.txt")], describe(p)
    assert "item 2 of 2 (Documents/b.sock) was not moved" in p.stderr, describe(p)
