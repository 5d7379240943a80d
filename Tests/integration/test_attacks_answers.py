"""Attacks on what the daemon answers an app, issue 28 findings 3, 4 and 5
(all but 5's /proc/1/cmdline and mountinfo item). An app process is hostile:
it writes whatever it likes into its container and sends whatever it likes
to its control endpoint.

3. A hand-made reference stub naming an item the app holds no grant on is
   an item-path oracle (its symbolic link and the `query` answer gave the
   item's current path). SPEC S22, S23, S28, S33.
4. Coordination claims were keyed by path, so a host rename let a second
   writer in at once. SPEC S27b, docs/API.md "File coordination".
5. `STATE/daemon.json` was 0666 (SPEC S1); pick requests queued behind one
   the agent deliberates on were answered 69 (SPEC S21a); the 77 for
   another app's bookmark named that app, and bookmarks forged with the key
   (`--no-sandbox` only) accepted `..` and answered as an existence oracle
   (SPEC S25, S26, S33, S34).

Default mount (strict scopes) and the default sandbox, except where the
attack needs the host (the forged bookmark needs the key).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import time

import pytest
from pick_agent import Agent
from scopefs_harness import ALPHA, BETA, ITEMS_MOVE, LOCAL, drop_dentry_caches, wait_for

REPORT = "docs/report.txt"

# Every sandboxed snippet talks to its app endpoint with one line each way.
ASK = """
import socket
def ask(request, timeout=40):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(os.path.join(os.environ["SCOPEFS_STATE"], "control.sock"))
    s.sendall(json.dumps(request).encode() + b"\\n")
    line = s.makefile().readline()
    s.close()
    return json.loads(line)
"""


def owner_readlink(env, path: str) -> str:
    """readlink as the owner (the inspect view, SPEC S4), from a child."""
    return env.host_json("emit(outcome(os.readlink, sys.argv[1]))", path).get("ok", "")


# --- Finding 3: an item-path oracle through hand-made stubs -------------------

WRITE_STUB = """
item, name = sys.argv[1], sys.argv[2]
stub = os.path.join(os.environ["SCOPEFS_MOUNT"], "Container/Documents", name)
with open(stub, "w") as f:
    f.write(f"scopefs-reference 1\\nprovider: local\\nitem: {item}\\nname: {name}\\n")
emit({})
"""

READ_STUB = (
    ASK
    + """
import time
stub = os.path.join(os.environ["SCOPEFS_MOUNT"], "Container/Documents", sys.argv[1])
link = None
for _ in range(50):
    if os.path.islink(stub):
        link = os.readlink(stub)
        break
    time.sleep(0.2)
query = ask({"op": "query", "scope": "all"})
urls = [r["url"] for r in query.get("results", []) if r["urlInLocalContainer"].endswith(sys.argv[1])]
emit({"link": link, "urls": urls, "open": attempt(read_bytes, stub)})
"""
)


def forge_stub(env, item: str, name: str) -> dict:
    """ALPHA writes a stub naming `item`, then reads back its link and its
    query answer. The kernel keeps the new file's entry as a regular file
    while it is cached: dropping unused entries makes the next lookup read
    it as a stub, as any later lookup would."""
    env.app_json(ALPHA, WRITE_STUB, item, name, sandbox=True)
    drop_dentry_caches()
    return env.app_json(ALPHA, READ_STUB, name, sandbox=True)


def stub_item(env, app: str, name: str) -> str:
    """The item line of a reference stub in an app's container (host side)."""
    text = (env.state / "containers" / app / "Documents" / name).read_text()
    return next(line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("item: "))


def test_a_hand_made_stub_does_not_tell_another_apps_item_path(env):
    """Finding 3, SPEC S22, S23, S28, S33: ALPHA writes a stub naming the
    item of BETA's `Providers/local/betaonly`; the link and `query` show no
    path of it (an unknown item), and opening it stays denied. Seen failing
    on the old main: the link was `../../Providers/local/betaonly` and the
    query's url `Providers/local/betaonly`."""
    (env.backing(LOCAL) / "betaonly").write_text("beta's only\n")
    env.mount()
    env.cli("open", BETA, f"{LOCAL}:betaonly")
    env.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    item = stub_item(env, BETA, "betaonly")
    got = forge_stub(env, item, "forged.txt")
    assert got["link"] is not None and "unknown-item" in got["link"], got  # the stub was read as one
    assert "betaonly" not in json.dumps(got), got
    assert got["open"] == "ENOENT", got


READ_ITEM = (
    "emit({'item': os.getxattr(os.path.join(os.environ['SCOPEFS_MOUNT'], sys.argv[1]), 'user.scopefs.item').decode()})"
)


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_a_hand_made_stub_does_not_follow_a_forgotten_item(env):
    """Finding 3, SPEC S23, S28, S33: ALPHA learns its report's item, the
    owner forgets ALPHA's grant and moves the file on the host into a folder
    ALPHA was never given; a stub ALPHA writes with that item shows no path
    of it. Seen failing on the old main: the link and the query gave the new
    hidden path `deep/hidden/moved-report.txt`."""
    env.mount()
    env.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    env.cli("open", BETA, f"{LOCAL}:{REPORT}")  # BETA's reference shows when the locator saw the move
    item = env.app_json(ALPHA, READ_ITEM, "Container/Documents/report.txt", sandbox=True)["item"]
    env.cli("forget", ALPHA, "--all")
    (env.backing(LOCAL) / REPORT).rename(env.backing(LOCAL) / "deep/hidden/moved-report.txt")
    witness = env.container(BETA, "Documents/report.txt")
    wait_for(
        "BETA's reference to follow the move",
        lambda: owner_readlink(env, witness),
        lambda link: "moved-report" in link,
        10,
    )
    got = forge_stub(env, item, "again.txt")
    assert got["link"] is not None and "unknown-item" in got["link"], got
    assert "hidden" not in json.dumps(got) and "moved-report" not in json.dumps(got), got
    assert got["open"] == "ENOENT", got


# --- Finding 4: claims follow their item across a host rename ----------------

HOLD_AND_LISTEN = (
    ASK
    + """
import time
path, listen = sys.argv[1], float(sys.argv[2])
cursor = ask({"op": "watch"})["cursor"]
claim = ask({"op": "coordinate", "path": path, "intent": "write", "waitSeconds": 5})
step({"claim": claim})
heard = []
deadline = time.time() + listen
while time.time() < deadline and not any(n["kind"] == "relinquish" for n in heard):
    got = ask({"op": "watch", "after": cursor, "waitSeconds": 1})
    cursor = got["cursor"]
    heard += [{"kind": n["kind"], "path": n["path"]} for n in got["notices"]]
released = time.time()
ask({"op": "release", "claim": claim["claim"]})
emit({"heard": heard, "released": released})
"""
)

CLAIM = (
    ASK
    + """
import time
started = time.time()
answer = ask({"op": "coordinate", "path": sys.argv[1], "intent": "write", "waitSeconds": float(sys.argv[2])})
emit({"answer": answer, "started": started, "granted": time.time()})
"""
)


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_a_claim_follows_its_item_across_a_host_rename(env):
    """Finding 4, SPEC S27b: BETA holds a write claim on Novel/chapter1.txt;
    the owner renames it on the host; ALPHA's write claim on the new path
    waits, BETA hears `moved`, then `save` and `relinquish` naming the new
    path, and ALPHA gets the claim once BETA releases. Seen failing on the
    old main: ALPHA was granted at once and BETA heard no save/relinquish."""
    novel = env.backing(LOCAL) / "Novel"
    novel.mkdir()
    (novel / "chapter1.txt").write_text("It was a dark night.\n")
    env.mount()
    for app in (ALPHA, BETA):
        env.cli("open", app, f"{LOCAL}:Novel/chapter1.txt")
    old, new = "Providers/local/Novel/chapter1.txt", "Providers/local/Novel/chapter-one.txt"
    holder = env.app_session(BETA, HOLD_AND_LISTEN, old, "8", sandbox=True)
    assert holder.recv()["claim"].get("ok") is True
    (novel / "chapter1.txt").rename(novel / "chapter-one.txt")
    witness = env.container(ALPHA, "Documents/chapter1.txt")
    wait_for(
        "ALPHA's reference to follow the rename",
        lambda: owner_readlink(env, witness),
        lambda link: "chapter-one" in link,
        10,
    )
    holder.send("go")
    waiter = env.app_json(ALPHA, CLAIM, new, "15", sandbox=True)
    heard = holder.recv(timeout=30)
    assert waiter["answer"].get("ok") is True, waiter
    assert waiter["granted"] >= heard["released"], (waiter, heard)
    kinds = [(n["kind"], n["path"]) for n in heard["heard"]]
    assert ("moved", new) in kinds, kinds
    assert kinds[-2:] == [("save", new), ("relinquish", new)], kinds


# --- Finding 5: daemon.json, queued picks, refusals, forged bookmarks ---------


def test_daemon_json_is_the_owners_alone(env):
    """Finding 5, SPEC S1, S5: the daemon's handshake file is 0600, like
    the key. Seen failing on the old main: 0666 (the daemon's umask is 0)."""
    env.mount()
    mode = os.stat(env.state / "daemon.json").st_mode & 0o777
    assert mode == 0o600, oct(mode)


PICK = (
    ASK
    + """
import time
started = time.time()
answer = ask({"op": "pick", "pick": {"mode": "open", "contentTypes": [], "allowsMultipleSelection": False,
              "items": []}, "waitSeconds": 30})
emit({"answer": answer, "seconds": time.time() - started})
"""
)


def test_a_pick_queued_behind_a_slow_choice_waits_for_the_agent(env):
    """Finding 5, SPEC S21a, docs/API.md: the agent deliberates 2.5 s on
    one request; a second request sent meanwhile waits and is answered,
    instead of "no picker agent" (69). Seen failing on the old main: the
    second request got 69 about 1.5 s after the agent's last poll."""
    (env.backing(LOCAL) / "docs" / "notes.md").write_text("# notes\n")
    env.mount()
    agent = Agent(env, [{"waitMs": 2500, "choose": [f"{LOCAL}:{REPORT}"]}, {"choose": [f"{LOCAL}:docs/notes.md"]}])
    results: dict = {}

    def pick(name):
        results[name] = env.app_json(ALPHA, PICK, sandbox=True)

    first = threading.Thread(target=pick, args=("first",))
    first.start()
    time.sleep(1.0)  # pacing, not a wait: the second request comes while the agent deliberates (2.5 s) on the first
    second = threading.Thread(target=pick, args=("second",))
    second.start()
    for thread in (first, second):
        thread.join(timeout=60)
    if results.get("second", {}).get("answer", {}).get("ok"):
        log = agent.finish()
    else:  # the agent still waits for the request it never got
        agent.popen.kill()
        log = agent.finish()
    assert results["first"]["answer"].get("ok") is True, (results, log)
    assert results["second"]["answer"].get("ok") is True, (results, log)
    paths = results["first"]["answer"]["picked"]["paths"] + results["second"]["answer"]["picked"]["paths"]
    assert sorted(os.path.basename(p) for p in paths) == ["notes.md", "report.txt"], results


MAKE_BOOKMARK = """
path = os.path.join(os.environ["SCOPEFS_MOUNT"], sys.argv[1])
os.getxattr(path, "user.scopefs.start")
emit({"token": os.getxattr(path, "user.scopefs.bookmark").decode()})
"""

RESOLVE = ASK + "\nemit([ask({'op': 'resolve', 'bookmark': token}) for token in json.loads(sys.argv[1])])\n"


def test_refusing_another_apps_bookmark_does_not_name_it(env):
    """Finding 5, SPEC S26: ALPHA presents BETA's bookmark: refused (77)
    without BETA's name. Seen failing on the old main: "bookmark belongs to
    another app (com.example.beta)"."""
    env.mount()
    env.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    env.cli("open", BETA, f"{LOCAL}:docs/secret.txt")
    token = env.app_json(BETA, MAKE_BOOKMARK, "Providers/local/docs/secret.txt", sandbox=True)["token"]
    [answer] = env.app_json(ALPHA, RESOLVE, json.dumps([token]), sandbox=True)
    assert answer["ok"] is False and answer["code"] == 77, answer
    assert BETA not in answer["message"] and "beta" not in answer["message"].lower(), answer


def forge(key: bytes, path: str) -> str:
    payload = json.dumps(
        {"access": "read", "app": ALPHA, "item": "no-such-item", "path": path, "provider": LOCAL, "version": 1},
        sort_keys=True,
    ).encode()
    mac = hmac.new(key, payload, hashlib.sha256).digest()

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    return b64(payload) + "." + b64(mac)


def test_forged_bookmarks_are_no_existence_oracle(env):
    """Finding 5, SPEC S25, S26, S33, S34: with the key (readable only with
    --no-sandbox, which is no boundary) ALPHA forges bookmarks for paths it
    was not given. One with `..` is invalid (65); for a path inside the
    provider the answer is the same whether something is there or not.
    Seen failing on the old main: `../escape/outside.txt` answered 77 and
    `../escape/absent.txt` 66, and likewise inside the provider."""
    env.mount()
    env.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    key = (env.state / "bookmark.key").read_bytes()
    paths = ["../escape/outside.txt", "../escape/absent.txt", "docs/secret.txt", "docs/absent.txt"]
    answers = env.app_json(ALPHA, RESOLVE, json.dumps([forge(key, p) for p in paths]))
    by_path = dict(zip(paths, answers, strict=True))
    assert by_path["../escape/outside.txt"]["code"] == by_path["../escape/absent.txt"]["code"] == 65, by_path
    inside = (by_path["docs/secret.txt"], by_path["docs/absent.txt"])
    assert inside[0]["code"] == inside[1]["code"] == 77, by_path
    assert inside[0]["message"].replace("secret", "absent") == inside[1]["message"], by_path
