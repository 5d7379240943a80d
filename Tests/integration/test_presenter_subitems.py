"""A folder's presenter hears what happens to the items inside it (issue 31
item 7, SPEC S27c; Apple's presentedSubitemDidAppear,
presentedSubitem(at:didMoveTo:) and accommodatePresentedSubitemDeletion):
`appeared`, `moved` (old and new path) and `deleted`, from the host and
from another app's changes through the mount, within a second, with paths
in the app's own view; nothing for items it could not see (an ungranted
sibling, another app's grant, after a revoke), nothing to the app that made
the change. Default mount (strict scopes), default sandbox, both host-change
channels (inotify cannot tell the mount's own changes: no echo may be told
twice).
"""

from __future__ import annotations

import os
import time

import pytest
from doc_scope_helpers import status
from host_change_mounts import mount_long
from pick_agent import PYTHON_CLIENT
from scopefs_harness import ALPHA, BETA, LOCAL

# The developer's client library, shown to the sandbox as the docs say
# (docs/CLIENTS.md "The sandbox").
SANDBOX = ("--expose", str(PYTHON_CLIENT), "--env", f"PYTHONPATH={PYTHON_CLIENT}")
WITHIN = 1.0


@pytest.fixture(params=["fanotify", "inotify"])
def strict_world(env, request):
    """A strict mount (the default) with the given host-change channel."""
    (env.backing(LOCAL) / "docs" / "inner").mkdir()
    env.mount_args = lambda *a, **k: ["mount", env.mnt]  # the default: strict scopes
    mount_long(env, request.param, scopes="strict")
    assert status(env)["daemon"]["scopes"] == "strict"
    return env


PY_FOLDER_PRESENTER = """
import scopefs
folder = sys.argv[1]
notices = scopefs.watch_documents(timeout=float(sys.argv[2]))
for path in (folder, os.path.join(folder, "inner")):
    try:
        scopefs.start_accessing(path)  # a granted folder is security-scoped (SPEC S6)
        os.listdir(path)  # what a folder's presenter shows
    except OSError:
        pass
emit({"ready": True})
for notice in notices:
    notice["at"] = time.time()
    emit(notice)
emit({"done": True})
"""


def presenter(world, app: str, folder: str, quiet: float = 2.5):
    session = world.app_session(app, "import time\n" + PY_FOLDER_PRESENTER, folder, quiet, sandbox=True, extra=SANDBOX)
    assert session.recv(timeout=30) == {"ready": True}
    return session


def until_done(session, but_changed: bool = False) -> list[dict]:
    """The notices left until the presenter's quiet time ends (without
    `changed` ones when `but_changed`)."""
    notices = []
    while True:
        notice = session.recv(timeout=30)
        if notice == {"done": True}:
            return notices
        if not (but_changed and notice.get("kind") == "changed"):
            notices.append(notice)


def heard(session, kind: str, since: float) -> dict:
    """The next subitem notice but `changed` (a file made with content is
    also written: S27a tells that too); it must be `kind`, within a second."""
    notice = session.recv(timeout=5)
    while notice.get("kind") == "changed" and notice.get("subitem") is True:
        notice = session.recv(timeout=5)
    assert notice.get("kind") == kind and notice.get("subitem") is True, notice
    assert notice["at"] - since < WITHIN, (notice, notice["at"] - since)
    return notice


def test_host_changes_inside_a_granted_folder_are_told(strict_world):
    """Host creates, renames and deletes inside the granted folder (and in
    a folder inside it) are `appeared`, `moved` and `deleted`, each within
    a second, with the app's own paths; a move out of the grant is
    `deleted`, one in from outside `appeared`. Changes beside the grant
    (a sibling file, an ungranted folder) tell nobody anything, and an app
    without a grant hears nothing."""
    world = strict_world
    world.cli("open", ALPHA, f"{LOCAL}:docs")
    docs = world.backing(LOCAL) / "docs"
    alpha = presenter(world, ALPHA, world.prov(ALPHA, LOCAL, "docs"))
    beta = presenter(world, BETA, world.prov(BETA, LOCAL, "docs"))

    at = time.time()
    (docs / "new.txt").write_text("made on the host\n")
    assert heard(alpha, "appeared", at)["path"] == world.prov(ALPHA, LOCAL, "docs/new.txt")

    at = time.time()
    os.rename(docs / "new.txt", docs / "renamed.txt")
    moved = heard(alpha, "moved", at)
    assert moved["oldPath"] == world.prov(ALPHA, LOCAL, "docs/new.txt"), moved
    assert moved["path"] == world.prov(ALPHA, LOCAL, "docs/renamed.txt"), moved

    at = time.time()
    (docs / "inner" / "deep.txt").write_text("one folder down\n")
    assert heard(alpha, "appeared", at)["path"] == world.prov(ALPHA, LOCAL, "docs/inner/deep.txt")

    at = time.time()
    os.unlink(docs / "renamed.txt")
    assert heard(alpha, "deleted", at)["path"] == world.prov(ALPHA, LOCAL, "docs/renamed.txt")

    # Beside the grant: nobody hears of these.
    (world.backing(LOCAL) / "sibling.txt").write_text("next to docs\n")
    (world.backing(LOCAL) / "photos" / "q.jpg").write_bytes(b"ungranted\n")
    os.rename(world.backing(LOCAL) / "photos" / "q.jpg", world.backing(LOCAL) / "photos" / "r.jpg")

    at = time.time()
    os.rename(docs / "secret.txt", world.backing(LOCAL) / "photos" / "secret.txt")
    assert heard(alpha, "deleted", at)["path"] == world.prov(ALPHA, LOCAL, "docs/secret.txt")
    at = time.time()
    os.rename(world.backing(LOCAL) / "photos" / "p.jpg", docs / "p.jpg")
    assert heard(alpha, "appeared", at)["path"] == world.prov(ALPHA, LOCAL, "docs/p.jpg")

    assert until_done(alpha, but_changed=True) == [], "alpha heard more than its folder's changes"
    assert until_done(beta) == [], "an app without a grant heard of another app's folder"


PY_CHANGER = """
import scopefs
folder = sys.argv[1]
notices = scopefs.watch_documents(timeout=2.5)
scopefs.start_accessing(folder)
step({"ready": True})
times = {}
with open(os.path.join(folder, "made.txt"), "w") as f:
    f.write("made by another app\\n")
times["created"] = time.time()
step({"ok": True})
os.mkdir(os.path.join(folder, "made-folder"))
times["mkdir"] = time.time()
step({"ok": True})
os.rename(os.path.join(folder, "made.txt"), os.path.join(folder, "made-folder", "moved.txt"))
times["renamed"] = time.time()
step({"ok": True})
os.unlink(os.path.join(folder, "made-folder", "moved.txt"))
times["deleted"] = time.time()
emit(times)
for notice in notices:
    emit(notice)
emit({"done": True})
"""


def test_another_apps_changes_through_the_mount_are_told_once(strict_world):
    """Another app (in its own sandbox) creates, renames and deletes items
    in a folder both apps were given: the presenter hears each once, within
    a second, with its own paths; the app that made them hears none of its
    own changes."""
    world = strict_world
    world.cli("open", ALPHA, f"{LOCAL}:docs")
    world.cli("open", BETA, f"{LOCAL}:docs")
    alpha = presenter(world, ALPHA, world.prov(ALPHA, LOCAL, "docs"))
    beta = world.app_session(
        BETA, "import time\n" + PY_CHANGER, world.prov(BETA, LOCAL, "docs"), sandbox=True, extra=SANDBOX
    )
    assert beta.recv(timeout=30) == {"ready": True}
    expected = [
        ("appeared", "docs/made.txt", None),
        ("appeared", "docs/made-folder", None),
        ("moved", "docs/made-folder/moved.txt", "docs/made.txt"),
    ]
    for kind, path, old in expected:
        at = time.time()
        beta.send("go")
        assert beta.recv(timeout=10) == {"ok": True}
        notice = heard(alpha, kind, at)
        assert notice["path"] == world.prov(ALPHA, LOCAL, path), notice
        if old:
            assert notice["oldPath"] == world.prov(ALPHA, LOCAL, old), notice
    at = time.time()
    beta.send("go")
    assert "deleted" in beta.recv(timeout=10)
    assert heard(alpha, "deleted", at)["path"] == world.prov(ALPHA, LOCAL, "docs/made-folder/moved.txt")
    # Told once: no echo of the mount's own changes from the host channel.
    assert until_done(alpha, but_changed=True) == [], "alpha heard a change twice"
    assert until_done(beta) == [], "the app that made the changes heard of them"


def test_no_subitem_notice_after_a_revoke_or_for_a_file_grant(strict_world):
    """After its folder grant is revoked an app hears `revoked` and then
    nothing of the folder's items; an app given one file of the folder hears
    nothing of its neighbours (they are not its documents)."""
    world = strict_world
    grant = world.grant(ALPHA, f"{LOCAL}:docs")
    world.cli("open", BETA, f"{LOCAL}:docs/report.txt")
    docs = world.backing(LOCAL) / "docs"
    alpha = presenter(world, ALPHA, world.prov(ALPHA, LOCAL, "docs"), quiet=3.0)
    beta = presenter(world, BETA, world.prov(BETA, LOCAL, "docs/report.txt"), quiet=3.0)

    at = time.time()
    (docs / "before.txt").write_text("before the revoke\n")
    assert heard(alpha, "appeared", at)["path"] == world.prov(ALPHA, LOCAL, "docs/before.txt")
    world.revoke(ALPHA, grant)
    revoked = alpha.recv(timeout=5)
    while revoked.get("kind") == "changed":  # before.txt's content, told before the revoke
        revoked = alpha.recv(timeout=5)
    assert revoked.get("kind") == "revoked", revoked
    (docs / "after.txt").write_text("after the revoke\n")
    os.rename(docs / "before.txt", docs / "before-renamed.txt")
    os.unlink(docs / "secret.txt")
    assert until_done(alpha) == [], "a revoked grant's folder still told its items"
    assert until_done(beta) == [], "a file grant heard of its neighbours"
