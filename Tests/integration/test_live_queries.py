"""Live queries from apps (issue 17, SPEC S28, like NSMetadataQuery): the
client libraries' query objects — Python's `query_documents` iterator, C's
`scopefs_query` callback, Swift's `MetadataQuery` — deliver the initial
results ("finished gathering"), then an addition when a document is opened
for the app, a change when its original is renamed on the host, and a
removal when its reference goes. An app sees only its own documents,
whatever its request says; the owner's processes are not apps.
"""

from __future__ import annotations

import json
import time

import pytest
from client_builds import c_build, swift_check  # noqa: F401  (fixtures)
from doc_scope_helpers import mount
from pick_agent import PYTHON_CLIENT, REPORT
from scopefs_harness import ALPHA, BETA, ITEMS_MOVE, LOCAL


@pytest.fixture
def world(env):
    env.base_env["PYTHONPATH"] = str(PYTHON_CLIENT)
    (env.backing(LOCAL) / "docs" / "notes.md").write_text("# notes\n")
    mount(env)
    env.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    return env


PY_QUERY = """
import scopefs
updates = 0
for event in scopefs.query_documents(timeout=20):
    emit(event)
    if event["event"] != "finishedGathering":
        updates += 1
        if updates == 3:
            break
emit({"done": True})
"""

C_QUERY = """
import ctypes
lib = ctypes.CDLL(sys.argv[1], use_errno=True)
class Result(ctypes.Structure):
    _fields_ = [("url", ctypes.c_char_p), ("url_in_local_container", ctypes.c_char_p),
                ("container_display_name", ctypes.c_char_p), ("is_external_document", ctypes.c_int)]
HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(Result), ctypes.c_void_p)
gathered, updates = [], 0
def on_event(event, result, context):
    global updates
    event = event.decode()
    item = None
    if result:
        r = result.contents
        item = {"url": r.url.decode(), "url_in_local_container": r.url_in_local_container.decode(),
                "is_external_document": bool(r.is_external_document),
                "container_display_name": r.container_display_name.decode()}
    if event == "result":
        gathered.append(item)
    elif event == "finishedGathering":
        emit({"event": event, "results": gathered})
    else:
        emit({"event": event, "result": item})
        updates += 1
    return 1 if updates == 3 else 0
lib.scopefs_query.argtypes = [ctypes.c_char_p, ctypes.c_char_p, HANDLER, ctypes.c_void_p, ctypes.c_double, ctypes.c_char_p]
rc = lib.scopefs_query(b"all", None, HANDLER(on_event), None, 20.0, None)
emit({"done": True, "rc": rc, "errno": ctypes.get_errno()})
"""


def normalized(event: dict) -> dict:
    """The Swift check prints shorter keys; one shape for the assertions."""

    def item(r):
        if r is None or "url_in_local_container" in r:
            return r
        return {
            "url": r["url"],
            "url_in_local_container": r["local"],
            "is_external_document": r["external"],
            "container_display_name": r["display"],
        }

    out = dict(event)
    if "result" in out:
        out["result"] = item(out["result"])
    if "results" in out:
        out["results"] = [item(r) for r in out["results"]]
    return out


def follow_changes(world, session) -> float:
    """Gathering, then opened → added, renamed on the host → changed,
    reference removed → removed; returns the seconds the three took."""
    first = normalized(session.recv())
    assert first["event"] == "finishedGathering", first
    assert [r["url_in_local_container"] for r in first["results"]] == [
        world.container(ALPHA, "Documents/report.txt")
    ], first
    assert first["results"][0]["url"] == world.prov(ALPHA, LOCAL, REPORT), first
    assert first["results"][0]["is_external_document"] is True, first
    started = time.monotonic()
    world.cli("open", ALPHA, f"{LOCAL}:docs/notes.md")
    added = normalized(session.recv())
    assert added.get("event") == "added", added
    assert added["result"]["url_in_local_container"] == world.container(ALPHA, "Documents/notes.md"), added
    assert added["result"]["url"] == world.prov(ALPHA, LOCAL, "docs/notes.md"), added
    backing = world.backing(LOCAL) / "docs"
    (backing / "notes.md").rename(backing / "notes-final.md")
    changed = normalized(session.recv())
    assert changed.get("event") == "changed" and changed["result"]["url"] == world.prov(
        ALPHA, LOCAL, "docs/notes-final.md"
    ), changed
    (world.state / "containers" / ALPHA / "Documents" / "notes.md").unlink()
    removed = normalized(session.recv())
    assert removed["event"] == "removed", removed
    assert removed["result"]["url_in_local_container"] == world.container(ALPHA, "Documents/notes.md"), removed
    took = time.monotonic() - started
    assert took < 10, took
    return took


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_python_query_iterator(world):
    session = world.app_session(ALPHA, PY_QUERY)
    follow_changes(world, session)
    assert session.recv() == {"done": True}


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_c_query_callback(world, c_build):
    session = world.app_session(ALPHA, C_QUERY, c_build / "libscopefs.so")
    follow_changes(world, session)
    done = session.recv()
    assert done["done"] and done["rc"] == 0, done


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_swift_metadata_query(world, swift_check):
    session = world.app_session(ALPHA, "import subprocess\nsubprocess.run(sys.argv[1:])\n", swift_check, "query", "3")
    follow_changes(world, session)
    assert session.recv() == {"done": 1}  # report.txt is left


def test_an_app_sees_only_its_own_documents(world):
    """Attack: a query is the sender's app's, whatever the request names;
    BETA sees its own document, none of ALPHA's; the owner's processes
    (not apps) are refused."""
    world.cli("open", BETA, f"{LOCAL}:docs/notes.md")
    answer = world.app_json(
        BETA,
        """
import scopefs
plain = scopefs._ask({"op": "query"}, None, 10)
forged = scopefs._ask({"op": "query", "app": sys.argv[1], "scope": "all"}, None, 10)
emit({"plain": plain, "forged": forged})
""",
        ALPHA,
    )
    for key in ("plain", "forged"):
        got = answer[key]
        assert got["ok"], got
        assert [r["urlInLocalContainer"] for r in got["results"]] == ["Container/Documents/notes.md"], got
        assert not any(ALPHA in json.dumps(r) or "report" in json.dumps(r) for r in got["results"]), got
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(world.state / "control.sock"))
        s.sendall(b'{"op":"query"}\n')
        owner = json.loads(s.makefile().readline())
    assert owner["ok"] is False and owner["code"] == 77, owner
