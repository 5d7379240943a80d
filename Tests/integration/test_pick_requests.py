"""Apps ask for documents (issue 17, SPEC S21a): an app process sends a pick request
over its control endpoint, the owner's agent (`scopefs agent --script`)
answers, the choice is applied as `scopefs open` / `import` would, and the
app receives paths in its own view. Every surface gets an attack test: an
app process cannot run an agent, take requests or answer its own.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from client_builds import c_build, compile_c_example, swift_check  # noqa: F401  (fixtures: the C library, the Swift check app)
from pick_agent import PY_CLAIMER, PY_HOLDER, PYTHON_CLIENT, REPORT, Agent, world  # noqa: F401  (world: the fixture)
from scopefs_harness import (
    ALPHA,
    FD_SLACK,
    ITEMS_MOVE,
    LOCAL,
    REPORT_BYTES,
    describe,
    fd_count,
    wait_for,
    wait_for_agent,
)

REPO = Path(__file__).resolve().parents[2]

PY_PICK = """
import scopefs
kwargs = json.loads(sys.argv[1])
started = time.monotonic()
try:
    paths = scopefs.pick(**kwargs)
    result = {"paths": paths}
except OSError as exc:
    result = {"error": type(exc).__name__, "message": str(exc)}
result["seconds"] = time.monotonic() - started
if "paths" in result and kwargs.get("mode", "open") == "open":
    # Apple's rule: a picked URL is security-scoped; start before reading.
    p = result["paths"][0]
    result["beforeStart"] = attempt(read_bytes, p)
    scopefs.start_accessing(p)
    result["content"] = read_text(p)
emit(result)
"""


def pick_as_app(env, **kwargs) -> dict:
    return env.app_json(ALPHA, "import time\n" + PY_PICK, json.dumps(kwargs))


def test_open_request_answered_by_a_scripted_agent(world):
    """Issue 17, SPEC S17, S6: the app asks to open a plain-text document;
    the agent chooses report.txt; the app gets a security-scoped path in
    its view (EPERM before a start, the content after), and a reference
    document arrives in its container, as after `scopefs open`."""
    agent = Agent(world, [{"choose": [f"{LOCAL}:{REPORT}"]}])
    got = pick_as_app(world, mode="open", content_types=["public.plain-text"])
    log = agent.finish()
    assert got.get("paths") == [world.prov(ALPHA, LOCAL, REPORT)], (got, log)
    assert got["beforeStart"] == "EPERM", got
    assert got["content"].encode() == REPORT_BYTES, got
    assert (world.state / "containers" / ALPHA / "Documents" / "report.txt").exists() or "report.txt" in json.dumps(
        world.cli("query", "--app", ALPHA, "--json").stdout
    ), log
    assert f"{ALPHA}\topen\t" in log, log


def test_multiple_selection_and_import(world):
    """Issue 17, SPEC S17, S18: several items when the app allows it; an
    import gives inbox copies, readable without a scope."""
    agent = Agent(
        world, [{"choose": [f"{LOCAL}:{REPORT}", f"{LOCAL}:docs/notes.md"]}, {"choose": [f"{LOCAL}:docs/notes.md"]}]
    )
    opened = pick_as_app(world, mode="open", allows_multiple_selection=True)
    imported = world.app_json(
        ALPHA, "import scopefs\np = scopefs.pick(mode='import')\nemit({'paths': p, 'content': read_text(p[0])})"
    )
    agent.finish()
    assert opened["paths"] == [world.prov(ALPHA, LOCAL, REPORT), world.prov(ALPHA, LOCAL, "docs/notes.md")], opened
    assert imported["paths"] == [world.container(ALPHA, f"tmp/{ALPHA}-Inbox/notes.md")], imported
    assert imported["content"] == "# notes\n", imported


def test_one_item_asked_several_chosen_is_refused(world):
    """Issue 17: an app that asked for one item gets a clear refusal when
    the agent chooses two, and no grant is made."""
    before = world.cli("privacy", "--json").stdout
    agent = Agent(world, [{"choose": [f"{LOCAL}:{REPORT}", f"{LOCAL}:docs/notes.md"]}])
    got = pick_as_app(world, mode="open")
    agent.finish()
    assert got.get("error") == "ScopeDenied" and "one item" in got["message"], got
    assert world.cli("privacy", "--json").stdout == before


def test_cancel_and_no_agent(world):
    """Issue 17: a cancel is PickCancelled; with no agent the request fails
    within a second with NoPickerAgent."""
    agent = Agent(world, [{"cancel": True}])
    cancelled = pick_as_app(world, mode="open")
    agent.finish()
    assert cancelled.get("error") == "PickCancelled", cancelled
    # The daemon counts the agent present for a grace after its last poll.
    alone = wait_for(
        "a pick to find no agent at once",
        lambda: pick_as_app(world, mode="open"),
        lambda got: got.get("error") == "NoPickerAgent" and got["seconds"] < 1.0,
    )
    assert alone.get("error") == "NoPickerAgent" and alone["seconds"] < 1.0, alone
    assert "scopefs agent" in alone["message"], alone


def test_pick_request_from_a_shell_in_the_sandbox(world):
    """Issue 17, SPEC S5: `scopefs pick --request` inside the sandbox goes
    over the app endpoint and prints the path in the app's view."""
    agent = Agent(world, [{"choose": [f"{LOCAL}:{REPORT}"]}])
    p = world.run_app(
        ALPHA,
        ["sh", "-c", 'scopefs pick --request --type public.plain-text && echo "mount=$SCOPEFS_MOUNT"'],
        sandbox=True,
    )
    agent.finish()
    assert p.returncode == 0, describe(p)
    lines = p.stdout.split()
    mount_root = lines[-1].split("=", 1)[1]
    assert lines[0] == f"{mount_root}/Providers/{LOCAL}/{REPORT}", describe(p)


ATTACK = """
import socket
def ask(request):
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.path.join(os.environ["SCOPEFS_STATE"], "control.sock"))
    s.sendall(json.dumps(request).encode() + b"\\n")
    data = b""
    while not data.endswith(b"\\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return json.loads(data)
emit({"next": ask({"op": "agentNext", "waitSeconds": 1}),
      "answer": ask({"op": "agentAnswer", "pickID": 1, "answer": {"cancelled": False, "paths": ["Providers/local"]}})})
"""


@pytest.mark.parametrize("sandbox", [False, True], ids=["no-sandbox", "sandbox"])
def test_an_app_cannot_act_as_the_agent(world, sandbox):
    """Issue 17, SPEC S5 (attack): an app process that takes requests or
    answers one is refused (77) on either endpoint, and `scopefs agent`
    run as an app exits 77."""
    got = world.app_json(ALPHA, ATTACK, sandbox=sandbox)
    assert got["next"]["ok"] is False and got["next"]["code"] == 77, got
    assert got["answer"]["ok"] is False and got["answer"]["code"] == 77, got
    script = world.root / "evil.json"
    script.write_text(json.dumps({"steps": [{"choose": [f"{LOCAL}:."]}]}))
    p = world.run_app(ALPHA, [world.bin, "--state", world.state, "agent", "--script", script, "--count", "1"])
    assert p.returncode == 77, describe(p)


def test_malformed_requests_are_usage_errors(world):
    """Issue 17, SPEC S34 (attack): an app's oversized or inconsistent
    request is refused (64) before any agent sees it."""
    agent = Agent(world, [{"cancel": True}], count=1)
    got = world.app_json(
        ALPHA,
        """
import scopefs
out = {}
for name, kwargs in [("types", {"content_types": ["t"] * 33}), ("open-items", {"items": ["Documents/x"]}),
                     ("export-no-items", {"mode": "export"}), ("long", {"directory": "x" * 5000})]:
    try:
        scopefs.pick(timeout=2, **kwargs)
        out[name] = "accepted"
    except OSError as exc:
        out[name] = str(exc)
emit(out)
""",
    )
    agent.popen.kill()
    agent.finish()
    assert all("bad pick request" in message for message in got.values()), got


def test_content_types_decide_what_can_be_chosen(world):
    """Issue 17: the agent applies only items of a type the app asked for,
    by shared-mime-info (markdown is a kind of plain text; it is not an
    image); a folder needs public.folder."""
    agent = Agent(
        world,
        [{"choose": [f"{LOCAL}:docs/notes.md"]}, {"choose": [f"{LOCAL}:docs/notes.md"]}, {"choose": [f"{LOCAL}:docs"]}],
    )
    image = pick_as_app(world, mode="open", content_types=["public.image"])
    text = pick_as_app(world, mode="open", content_types=["public.plain-text"])
    folder = pick_as_app(world, mode="open", content_types=["public.plain-text"])
    agent.finish()
    assert image.get("error") == "ScopeDenied" and "text/markdown" in image["message"], image
    assert text.get("paths") == [world.prov(ALPHA, LOCAL, "docs/notes.md")], text
    assert folder.get("error") == "ScopeDenied" and "inode/directory" in folder["message"], folder


def test_swift_app_presents_a_picker(world, swift_check):
    """Issue 17, SPEC S31: an app written against the Swift client presents
    a picker (`DocumentPicker.present`), gets a URL from a scripted agent,
    and reads it in scope; a cancel is `.cancelled`."""
    agent = Agent(world, [{"choose": [f"{LOCAL}:{REPORT}"]}, {"cancel": True}])
    picked = world.run_app(ALPHA, [swift_check, "pick", "public.plain-text"])
    cancelled = world.run_app(ALPHA, [swift_check, "pick"])
    agent.finish()
    assert picked.returncode == 0, describe(picked)
    got = json.loads(picked.stdout.strip().splitlines()[-1])
    assert got.get("paths") == world.prov(ALPHA, LOCAL, REPORT), got
    assert got.get("content", "").encode() == REPORT_BYTES, got
    assert json.loads(cancelled.stdout.strip().splitlines()[-1]).get("error") == "cancelled ECANCELED", describe(
        cancelled
    )


C_PICK = """
import ctypes
lib = ctypes.CDLL(sys.argv[1], use_errno=True)
lib.scopefs_pick.restype = ctypes.POINTER(ctypes.c_char_p)
lib.scopefs_pick.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_char_p]
lib.scopefs_free_paths.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
def pick(types):
    array = (ctypes.c_char_p * (len(types) + 1))(*[t.encode() for t in types], None)
    ctypes.set_errno(0)
    got = lib.scopefs_pick(b"open", array, 1, None)
    if not got:
        return {"error": errno.errorcode[ctypes.get_errno()]}
    paths, k = [], 0
    while got[k]:
        paths.append(got[k].decode())
        k += 1
    lib.scopefs_free_paths(got)
    return {"paths": paths}
emit({"picked": pick(["text/plain"]), "cancelled": pick([])})
"""


def test_c_app_picks(world, c_build):
    """Issue 17, SPEC S31: the C library's scopefs_pick returns the paths
    (several allowed), and ECANCELED for a cancel."""
    agent = Agent(world, [{"choose": [f"{LOCAL}:{REPORT}", f"{LOCAL}:docs/notes.md"]}, {"cancel": True}])
    got = world.app_json(ALPHA, C_PICK, c_build / "libscopefs.so")
    agent.finish()
    assert got["picked"] == {"paths": [world.prov(ALPHA, LOCAL, REPORT), world.prov(ALPHA, LOCAL, "docs/notes.md")]}, (
        got
    )
    assert got["cancelled"] == {"error": "ECANCELED"}, got


PY_PRESENTER = """
import scopefs
notices = scopefs.watch_documents(timeout=8)
emit({"ready": True})
for notice in notices:
    notice["at"] = time.time()
    emit(notice)
emit({"done": True})
"""


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_presenter_hears_about_its_documents(world):
    """Issue 17, SPEC S27a (NSFilePresenter): an app watching its documents hears, in
    order and within a second or so each, that a document arrived (open),
    moved on the host (the item locator), was revoked, restored, and
    deleted on the host, with the paths in its view; another app hears
    nothing of it."""
    from scopefs_harness import BETA

    session = world.app_session(ALPHA, "import time\n" + PY_PRESENTER)
    other = world.app_session(BETA, "import time\n" + PY_PRESENTER)
    assert session.recv() == {"ready": True}
    assert other.recv() == {"ready": True}
    latencies = []

    def expect(kind: str, action) -> dict:
        started = time.time()
        action()
        notice = session.recv(timeout=10)
        assert notice.get("kind") == kind, notice
        latencies.append(notice["at"] - started)
        return notice

    backing = world.backing(LOCAL) / "docs"
    arrived = expect("arrived", lambda: world.cli("open", ALPHA, f"{LOCAL}:docs/notes.md"))
    assert arrived["path"] == world.prov(ALPHA, LOCAL, "docs/notes.md"), arrived
    grant = str(arrived["grant"])
    moved = expect("moved", lambda: (backing / "notes.md").rename(backing / "renamed.md"))
    assert moved["path"] == world.prov(ALPHA, LOCAL, "docs/renamed.md"), moved
    assert moved["oldPath"] == world.prov(ALPHA, LOCAL, "docs/notes.md"), moved
    expect("revoked", lambda: world.cli("revoke", ALPHA, grant))
    expect("restored", lambda: world.cli("restore", ALPHA, grant))
    expect("deleted", lambda: (backing / "renamed.md").unlink())
    assert other.recv(timeout=15) == {"done": True}, "another app heard of ALPHA's documents"
    assert max(latencies) < 3.0, latencies
    print(f"presenter latencies (s): {[round(x, 3) for x in latencies]}")


def test_coordination_between_two_apps(world):
    """Issue 17, SPEC S27b (NSFileCoordinator): a writer in one app blocks a reader in
    another until it lets go; a reader asked to relinquish by a waiting
    writer (its presenter hears `relinquish`) lets go first, then the
    writer is granted; a claim ends when its process exits; an app cannot
    claim an item it was not given."""
    from scopefs_harness import BETA

    world.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    world.cli("open", BETA, f"{LOCAL}:{REPORT}")
    item_a, item_b = world.prov(ALPHA, LOCAL, REPORT), world.prov(BETA, LOCAL, REPORT)

    writer = world.app_session(ALPHA, "import time\n" + PY_HOLDER, item_a, "write")
    assert writer.recv() == {"holding": "write"}
    blocked = world.app_json(BETA, "import time\n" + PY_CLAIMER, item_b, "read", "1")
    assert blocked.get("error") == "TimeoutError" and blocked["waited"] >= 0.9, blocked
    writer.send("go")
    assert "released" in writer.recv()
    reader_ok = world.app_json(BETA, "import time\n" + PY_CLAIMER, item_b, "read", "5")
    assert "granted" in reader_ok and reader_ok["waited"] < 1, reader_ok
    writer.send("go")

    reader = world.app_session(ALPHA, "import time\n" + PY_HOLDER, item_a, "read")
    assert reader.recv() == {"holding": "read"}
    reader.send("go")
    late_writer = world.app_json(BETA, "import time\n" + PY_CLAIMER, item_b, "write", "10")
    relinquished = reader.recv()
    reader.recv()
    assert relinquished.get("relinquish") == item_a, relinquished
    assert "granted" in late_writer and late_writer["granted"] >= relinquished["at"], (late_writer, relinquished)
    reader.send("go")

    # A claim ends with its process.
    world.app_py(ALPHA, "import scopefs\nscopefs.coordinate(sys.argv[1], 'write').__enter__()\nos._exit(0)\n", item_a)
    after_exit = world.app_json(BETA, "import time\n" + PY_CLAIMER, item_b, "write", "5")
    assert "granted" in after_exit and after_exit["waited"] < 3, after_exit

    hidden = world.app_json(
        ALPHA, "import time\n" + PY_CLAIMER, world.prov(ALPHA, LOCAL, "docs/secret.txt"), "write", "1"
    )
    assert hidden.get("error") == "FileNotFoundError", hidden


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_swift_example_app_story(world, swift_check):
    """Issue 17, done when: an app written against the Swift client
    presents a picker, gets a URL from a scripted agent, reads it in scope,
    hears about a host rename with the new URL, and coordinates a write
    with a second app (which holds a read claim and relinquishes when its
    presenter is asked); the write is Foundation's atomic one, a temporary
    beside the single-file grant renamed over it (SPEC S48)."""
    from scopefs_harness import BETA

    world.cli("open", BETA, f"{LOCAL}:docs")
    agent = Agent(world, [{"choose": [f"{LOCAL}:{REPORT}"]}])
    out = world.root / "story.out"
    with open(out, "w") as sink:
        app = subprocess.Popen(
            world.run_argv(ALPHA, [swift_check, "story"]),
            stdout=subprocess.PIPE,
            stderr=sink,
            env=world.base_env,
            start_new_session=True,
            text=True,
        )
    try:
        picked = json.loads(app.stdout.readline())
        agent.finish()
        assert picked["picked"] == world.prov(ALPHA, LOCAL, REPORT), picked
        assert picked["content"].encode() == REPORT_BYTES, picked
        # A second app reads the document under a read claim, and lets go when asked.
        reader = world.app_session(BETA, "import time\n" + PY_HOLDER, world.prov(BETA, LOCAL, "docs/final.txt"), "read")
        assert reader.recv() == {"holding": "read"}  # claimed before the Swift app can want to write
        backing = world.backing(LOCAL) / "docs"
        (backing / "report.txt").rename(backing / "final.txt")
        renamed_inode = (backing / "final.txt").stat().st_ino
        reader.send("go")
        moved = json.loads(app.stdout.readline())
        assert moved["moved"] == world.prov(ALPHA, LOCAL, "docs/final.txt"), moved
        try:
            relinquished = reader.recv()
        except AssertionError:
            app.kill()
            raise AssertionError(f"app said {app.stdout.read()!r}; its stderr: {out.read_text()}")
        reader.recv()
        wrote = json.loads(app.stdout.readline())
        assert relinquished.get("relinquish") == world.prov(BETA, LOCAL, "docs/final.txt"), (
            relinquished,
            out.read_text(),
        )
        assert wrote["wrote"] >= relinquished["at"], (wrote, relinquished)
        reader.send("go")
        assert app.wait(timeout=30) == 0, out.read_text()
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
    assert (backing / "final.txt").read_text() == "edited by the Swift app\n"
    # write(to:atomically: true): a temporary beside the single-file grant,
    # renamed over it (SPEC S48), not a write in place.
    assert (backing / "final.txt").stat().st_ino != renamed_inode


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_live_query_follows_documents(world):
    """Issue 17, SPEC S28, S28a (NSMetadataQuery, live): `query --follow --json`
    prints the initial result and finishedGathering, then an addition when
    a document is opened, a change when the original moves on the host,
    and a removal when the reference goes, each within a second or so."""
    import os
    import select

    world.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    follower = subprocess.Popen(
        world.cli_argv("query", "--app", ALPHA, "--follow", "--json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=world.base_env,
        start_new_session=True,
    )
    buffered = b""

    def next_event(timeout: float = 5) -> dict:
        nonlocal buffered
        deadline = time.monotonic() + timeout
        while b"\n" not in buffered:
            left = deadline - time.monotonic()
            assert left > 0, f"no query event within {timeout}s; got {buffered!r}"
            if select.select([follower.stdout], [], [], left)[0]:
                buffered += os.read(follower.stdout.fileno(), 65536)
        line, _, buffered = buffered.partition(b"\n")
        return json.loads(line)

    try:
        first = next_event()
        assert first["event"] == "finishedGathering", first
        assert [r["urlInLocalContainer"].rsplit("/", 1)[1] for r in first["results"]] == ["report.txt"], first
        started = time.monotonic()
        world.cli("open", ALPHA, f"{LOCAL}:docs/notes.md")
        added = next_event()
        assert added["event"] == "added" and added["result"]["urlInLocalContainer"].endswith("Documents/notes.md"), (
            added
        )
        backing = world.backing(LOCAL) / "docs"
        (backing / "notes.md").rename(backing / "notes-final.md")
        changed = next_event()
        assert changed["event"] == "changed" and changed["result"]["url"].endswith("docs/notes-final.md"), changed
        (world.state / "containers" / ALPHA / "Documents" / "notes.md").unlink()
        removed = next_event()
        assert removed["event"] == "removed" and removed["result"]["urlInLocalContainer"].endswith("notes.md"), removed
        assert time.monotonic() - started < 10
    finally:
        follower.kill()
        follower.wait()


def test_interactive_agent_shows_the_terminal_picker(world):
    """Issue 17: without a script, `scopefs agent` in a terminal shows the
    request and the terminal picker of `scopefs pick`; what the user picks
    there is what the waiting app receives."""
    import threading

    import pexpect
    from picker_terminal import COLS, ROWS, Terminal

    env = {k: v for k, v in world.base_env.items() if k != "SCOPEFS_STATE"}
    env.update(TERM="xterm-256color", LANG="C.UTF-8")
    agent = Terminal(
        pexpect.spawn(
            str(world.bin),
            ["--state", str(world.state), "agent", "--count", "1"],
            dimensions=(ROWS, COLS),
            env=env,
            encoding="utf-8",
            codec_errors="replace",
            timeout=15,
        )
    )
    wait_for_agent(agent.child.pid)
    result: dict = {}
    asker = threading.Thread(
        target=lambda: result.update(pick_as_app(world, mode="open", content_types=["text/plain"]))
    )
    asker.start()
    try:
        agent.wait_text("Open: choose a file or folder for com.example.alpha")
        agent.highlight("local/")
        agent.send("\x1b[C")
        agent.highlight("docs/")
        agent.send("\r")
        agent.highlight("report.txt")
        agent.send("\r")
        agent.wait_text("[y/N]")
        agent.send("y")
        agent.child.expect(pexpect.EOF, timeout=20)
    finally:
        asker.join(timeout=30)
        agent.child.close()
    assert agent.child.exitstatus == 0, agent.screen.transcript[-2000:]
    assert result.get("paths") == [world.prov(ALPHA, LOCAL, REPORT)], result
    assert "wants to open a document: text/plain" in agent.screen.transcript, agent.screen.transcript[:500]


def test_interactive_agent_honours_multiple_selection(world):
    """Issue 17: a request with allowsMultipleSelection opens the agent's
    terminal picker in --multiple mode: Space toggles several files, Enter
    confirms, and the app receives every path chosen, in order."""
    import threading

    import pexpect
    from picker_terminal import COLS, ROWS, Terminal

    env = {k: v for k, v in world.base_env.items() if k != "SCOPEFS_STATE"}
    env.update(TERM="xterm-256color", LANG="C.UTF-8")
    agent = Terminal(
        pexpect.spawn(
            str(world.bin),
            ["--state", str(world.state), "agent", "--count", "1"],
            dimensions=(ROWS, COLS),
            env=env,
            encoding="utf-8",
            codec_errors="replace",
            timeout=15,
        )
    )
    wait_for_agent(agent.child.pid)
    result: dict = {}
    asker = threading.Thread(
        target=lambda: result.update(pick_as_app(world, mode="open", allows_multiple_selection=True))
    )
    asker.start()
    try:
        agent.wait_text("Space/s toggle  Enter/c confirm")
        agent.highlight("local/")
        agent.send("\x1b[C")
        agent.highlight("docs/")
        agent.send("\r")
        agent.highlight("notes.md")
        agent.send(" ")
        agent.highlight("report.txt")
        agent.send(" ")
        agent.wait_text("2 selected")
        agent.send("\r")
        agent.wait_text("Open 2 items (notes.md, report.txt) for com.example.alpha? [y/N]")
        agent.send("y")
        agent.child.expect(pexpect.EOF, timeout=20)
    finally:
        asker.join(timeout=30)
        agent.child.close()
    assert agent.child.exitstatus == 0, agent.screen.transcript[-2000:]
    assert result.get("paths") == [world.prov(ALPHA, LOCAL, "docs/notes.md"), world.prov(ALPHA, LOCAL, REPORT)], result
    assert "several allowed" in agent.screen.transcript, agent.screen.transcript[:500]


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_examples_pick_read_and_follow(world, c_build, tmp_path):
    """Issue 17: docs/examples/picker.py (pick, read in scope under a read
    claim, follow a host rename) and picker.c (pick, read the first line)
    run as documented against a scripted agent."""
    examples = REPO / "docs" / "examples"
    agent = Agent(world, [{"choose": [f"{LOCAL}:{REPORT}"]}, {"choose": [f"{LOCAL}:docs/notes.md"]}])
    script = subprocess.Popen(
        world.run_argv(ALPHA, ["python3", examples / "picker.py", "8"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=world.base_env,
        text=True,
        start_new_session=True,
    )
    try:
        first = script.stdout.readline()
        assert first.startswith(f"picked {world.prov(ALPHA, LOCAL, REPORT)}:"), first
        # The pick itself is the first notice: the document arrived.
        assert script.stdout.readline().split() == ["arrived", world.prov(ALPHA, LOCAL, REPORT)]
        backing = world.backing(LOCAL) / "docs"
        (backing / "report.txt").rename(backing / "moved.txt")
        assert script.stdout.readline().split() == ["moved", world.prov(ALPHA, LOCAL, "docs/moved.txt")]
        (backing / "moved.txt").unlink()
        assert script.stdout.readline().split()[0] == "deleted"
        assert script.wait(timeout=20) == 0
    finally:
        if script.poll() is None:
            script.kill()
            script.wait()
    program = compile_c_example(examples / "picker.c", tmp_path / "picker", c_build)
    p = world.run_app(ALPHA, [program])
    agent.finish()
    assert p.returncode == 0 and p.stdout == f"{world.prov(ALPHA, LOCAL, 'docs/notes.md')}: # notes\n", describe(p)


HOG = """
import socket
state = os.environ["SCOPEFS_STATE"]
def open_watch():
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.path.join(state, "control.sock"))
    try:
        s.sendall(json.dumps({"op": "watch", "after": 0, "waitSeconds": 6}).encode() + b"\\n")
    except BrokenPipeError:
        pass  # refused before the request was read: the answer is waiting
    return s
held = [open_watch() for _ in range(int(sys.argv[1]))]
time.sleep(1)  # a wait with nothing to watch: the daemon has taken the held watches (no app sees that)
extra = open_watch()
extra.settimeout(5)
emit({"extra": json.loads(extra.recv(65536))})
step({"holding": len(held)})
"""


def test_one_app_cannot_take_every_control_slot(world):
    """Issue 17, SPEC S5 (attack): requests that wait (watch, pick,
    coordinate) hold a connection; one app gets at most 8 at once, so while
    it holds its share another app's requests are still served."""
    from scopefs_harness import BETA

    hog = world.app_session(ALPHA, "import time\n" + HOG, "8")
    first = hog.recv()
    assert first["extra"]["ok"] is False and first["extra"]["code"] == 75, first
    assert hog.recv() == {"holding": 8}
    other = world.app_json(
        BETA,
        """
import scopefs
watch = scopefs.watch_documents(timeout=0.5)
emit({"served": list(watch) == []})
""",
    )
    hog.send("go")
    assert other == {"served": True}, other
    # The hog's watches end in the daemon after their wait (6 s), before
    # teardown counts descriptors.
    wait_for(
        "the daemon to end the hog's watches",
        lambda: fd_count(world.daemon.pid),
        lambda count: count is None or count <= world.daemon.fd_baseline + FD_SLACK,
        timeout=15,
    )


C_WATCH = """
import ctypes
lib = ctypes.CDLL(sys.argv[1], use_errno=True)
class Notice(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_char_p), ("path", ctypes.c_char_p), ("old_path", ctypes.c_char_p),
                ("grant", ctypes.c_longlong)]
HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Notice), ctypes.c_void_p)
heard = []
def on_notice(notice, context):
    n = notice.contents
    heard.append({"kind": n.kind.decode(), "path": n.path.decode(),
                  "oldPath": n.old_path.decode() if n.old_path else None})
    return 1 if n.kind == b"moved" else 0
lib.scopefs_watch.argtypes = [HANDLER, ctypes.c_void_p, ctypes.c_double, ctypes.c_char_p]
emit({"ready": True})
rc = lib.scopefs_watch(HANDLER(on_notice), None, 10.0, None)
emit({"rc": rc, "heard": heard})
"""


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_c_presenter_callback(world, c_build):
    """Issue 17, SPEC S31: the C library's scopefs_watch calls back for each
    notice (arrived, then moved with both paths) until the handler stops it."""
    session = world.app_session(ALPHA, C_WATCH, c_build / "libscopefs.so")
    assert session.recv() == {"ready": True}
    time.sleep(0.5)  # a wait with nothing to watch: scopefs_watch subscribes after "ready", inside the C call
    world.cli("open", ALPHA, f"{LOCAL}:docs/notes.md")
    backing = world.backing(LOCAL) / "docs"
    time.sleep(0.3)  # a wait with nothing to watch: the rename comes after the open has settled
    (backing / "notes.md").rename(backing / "c-notes.md")
    got = session.recv(timeout=20)
    assert got["rc"] == 0, got
    assert [n["kind"] for n in got["heard"]] == ["arrived", "moved"], got
    assert got["heard"][1] == {
        "kind": "moved",
        "path": world.prov(ALPHA, LOCAL, "docs/c-notes.md"),
        "oldPath": world.prov(ALPHA, LOCAL, "docs/notes.md"),
    }, got


def test_two_apps_picking_at_once(world):
    """Issue 17: two apps ask at the same time; the agent answers each in
    turn (requests queue) and each app receives what was chosen for it."""
    import threading

    from scopefs_harness import BETA

    world.cli("open", BETA, f"{LOCAL}:docs/secret.txt")  # BETA's view of the provider
    agent = Agent(world, [{"waitMs": 300, "choose": [f"{LOCAL}:{REPORT}"]}, {"choose": [f"{LOCAL}:docs/notes.md"]}])
    results: dict = {}

    def ask(app):
        results[app] = world.app_json(app, "import time\nimport scopefs\nemit({'paths': scopefs.pick(mode='open')})")

    threads = [threading.Thread(target=ask, args=(app,)) for app in (ALPHA, BETA)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    log = agent.finish()
    got = {app: [Path(p).name for p in results[app]["paths"]] for app in (ALPHA, BETA)}
    assert sorted(got.values()) == [["notes.md"], ["report.txt"]], (got, log)
    for app in (ALPHA, BETA):
        assert all(p.startswith(world.prov(app, LOCAL)) for p in results[app]["paths"]), results
    assert log.count("\topen\t") == 2, log


def test_interactive_agent_shows_the_picker_for_a_single_item_export(world):
    """Issue 31, item 6: an app's request to export one container item
    opens the same terminal picker in the owner's `scopefs agent` as a
    request for several does (docs/PICKER.md), on the destination folder:
    the user browses to it, presses `.` and confirms, and the app receives
    the copy's path. Esc/Left at the top does not go back to choosing other
    container items: the app named its item. Seen failing on the old main:
    the agent printed "destination folder (PROVIDER:DIR), empty line
    cancels:" and waited for a typed path."""
    import threading

    import pexpect
    from picker_terminal import COLS, ROWS, Terminal

    documents = world.state / "containers" / ALPHA / "Documents"
    documents.mkdir(parents=True, exist_ok=True)
    (documents / "draft.txt").write_text("a draft\n")
    (world.backing(LOCAL) / "out").mkdir()
    env = {k: v for k, v in world.base_env.items() if k != "SCOPEFS_STATE"}
    env.update(TERM="xterm-256color", LANG="C.UTF-8")
    agent = Terminal(
        pexpect.spawn(
            str(world.bin),
            ["--state", str(world.state), "agent", "--count", "1"],
            dimensions=(ROWS, COLS),
            env=env,
            encoding="utf-8",
            codec_errors="replace",
            timeout=15,
        )
    )
    time.sleep(0.5)
    result: dict = {}
    asker = threading.Thread(
        target=lambda: result.update(pick_as_app(world, mode="export", items=["Documents/draft.txt"]))
    )
    asker.start()
    try:
        agent.wait_text("Export draft.txt: choose a destination folder")
        agent.highlight("local/")
        agent.send("\x1b[D")  # Left at the list of providers: stays, the item is the app's
        agent.highlight("local/")
        agent.send("\x1b[C")
        agent.highlight("out/")
        agent.send("\x1b[C")
        agent.send(".")
        agent.wait_text("Export draft.txt to local:out? [y/N]")
        agent.send("y")
        agent.child.expect(pexpect.EOF, timeout=20)
    finally:
        asker.join(timeout=30)
        agent.child.close()
    assert agent.child.exitstatus == 0, agent.screen.transcript[-2000:]
    assert result.get("paths") == [world.prov(ALPHA, LOCAL, "out/draft.txt")], result
    assert (world.backing(LOCAL) / "out" / "draft.txt").read_text() == "a draft\n"
    assert "wants to export Documents/draft.txt into a provider folder" in agent.screen.transcript
    assert "empty line cancels" not in agent.screen.transcript
