"""Saves through the portal's document layout that are never finished
(SPEC S48, S40, S34; issue 49): an app killed mid-save, a save cut by a
revoke, and vim's backup of a document left behind by a crash. While the
layout serves, a temporary no one can rename over its document any more
is removed (and the document's own file, renamed away for a save, goes
back), as the mount does for its own temporaries. The mount's and the
portal's temporaries carry their maker in their host names, so neither
one's start-up sweep takes the other's live temporary.

Apps run as users run them: in the default sandbox, with `--portal-bus`,
under the default mount (strict scopes), for a root and a non-root owner.
"""

from __future__ import annotations

import os

import pytest
from doc_scope_helpers import mount
from scopefs_harness import ALPHA, LOCAL, REPORT_BYTES, wait_for
from test_atomic_saves import HOLD  # the mount's save, paused with its temporary made
from test_caller_identity import nobody_portal, root_portal  # noqa: F401 (fixtures)
from test_portal import Portal, SessionBus
from test_portal_chooser import nobody_env  # noqa: F401 (a fixture)

REPORT = "docs/report.txt"

# argv: the document in the app's view. Starts a save, says so, and is
# killed (SIGKILL) with the temporary's descriptor open: a crash mid-save.
CRASH_MID_SAVE = """
folder = os.path.dirname(sys.argv[1])
fd = os.open(os.path.join(folder, "report.txt.tmp"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
os.write(fd, b"half a save")
step({"made": sorted(os.listdir(folder))})
os.kill(os.getpid(), signal.SIGKILL)
"""

# argv: the document. vim's backupcopy=no order, killed after its first
# step: the document's file renamed to the backup name, no new file yet.
CRASH_AFTER_BACKUP = """
folder = os.path.dirname(sys.argv[1])
os.rename(sys.argv[1], os.path.join(folder, "report.txt~"))
step({"moved": sorted(os.listdir(folder))})
os.kill(os.getpid(), signal.SIGKILL)
"""

# argv: the document. Holds a temporary open across a revoke, then writes
# through it and tries to save it.
HOLD_ACROSS_REVOKE = """
folder = os.path.dirname(sys.argv[1])
temp = os.path.join(folder, "report.txt.tmp")
fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
os.write(fd, b"before")
step({"made": True})
emit({"write": attempt(os.write, fd, b" after"), "rename": attempt(os.rename, temp, sys.argv[1])})
"""


def hidden(folder) -> list[str]:
    return sorted(name for name in os.listdir(folder) if ".scopefs-" in name)


def export_for_writing(env, portal) -> str:
    report = env.backing(LOCAL) / REPORT
    [[doc]] = [
        answer["reply"][0]
        for answer in portal.calls(
            ("AddFull", "ahusas", [[{"fd": str(report), "flags": ["O_RDWR"]}], 3, ALPHA, ["read", "write"]]),
            prefix=portal.prefix,
        )
    ]
    return doc


def in_sandbox(env, code: str, document):
    return env.app_session(ALPHA, code, document, sandbox=True, extra=("--portal-bus",))


@pytest.fixture(params=["root owner", "non-root owner"])
def owner(request):
    """(env, portal) for a root owner and for a non-root owner (uid 65534)."""
    if request.param == "root owner":
        env = request.getfixturevalue("env")
        return env, request.getfixturevalue("root_portal")
    env = request.getfixturevalue("nobody_env")
    return env, request.getfixturevalue("nobody_portal")


def test_an_app_killed_mid_save_leaves_no_temporary(owner):
    """SPEC S48, S40: an app killed (SIGKILL) while its temporary is open
    leaves nothing beside the document once its process is gone: the
    layout removes the temporary's hidden host file while it serves, and
    the document is as it was."""
    env, portal = owner
    doc = export_for_writing(env, portal)
    folder = env.backing(LOCAL) / "docs"
    session = in_sandbox(env, CRASH_MID_SAVE, portal.mountpoint / doc / "report.txt")
    assert session.recv() == {"made": ["report.txt", "report.txt.tmp"]}
    assert len(hidden(folder)) == 1, sorted(os.listdir(folder))
    session.send()
    wait_for("the dead app's temporary removed", lambda: hidden(folder), lambda names: names == [], timeout=15)
    assert (folder / "report.txt").read_bytes() == REPORT_BYTES
    assert "no one will finish" in portal.log.read_text()


def test_a_document_renamed_away_by_a_crashed_save_comes_back(owner):
    """SPEC S34, S48: vim's save renames the document to its backup name
    first; killed there, the app leaves the document's only copy under a
    hidden name. The layout renames it back to the document's name (its
    content and inode kept), so nothing is lost."""
    env, portal = owner
    doc = export_for_writing(env, portal)
    report = env.backing(LOCAL) / REPORT
    inode = report.stat().st_ino
    session = in_sandbox(env, CRASH_AFTER_BACKUP, portal.mountpoint / doc / "report.txt")
    assert session.recv() == {"moved": ["report.txt~"]}
    assert not report.exists()
    session.send()
    wait_for("the document back", lambda: report.exists(), lambda back: back, timeout=15)
    assert report.read_bytes() == REPORT_BYTES and report.stat().st_ino == inode
    assert hidden(report.parent) == []


def test_a_revoke_removes_a_temporary_still_open(owner):
    """SPEC S48, S14: a revoke cuts a save in progress: the temporary's
    host file goes while the app still holds its descriptor, whose next
    write is EPERM, and the rename over the document finds no name."""
    env, portal = owner
    doc = export_for_writing(env, portal)
    folder = env.backing(LOCAL) / "docs"
    session = in_sandbox(env, HOLD_ACROSS_REVOKE, portal.mountpoint / doc / "report.txt")
    assert session.recv() == {"made": True}
    assert len(hidden(folder)) == 1
    env.cli("revoke", ALPHA, f"{LOCAL}:{REPORT}")
    wait_for("the cut save's temporary removed", lambda: hidden(folder), lambda names: names == [], timeout=15)
    session.send()
    assert session.recv() == {"write": "EPERM", "rename": "ENOENT"}
    assert session.finish() == 0
    assert (folder / "report.txt").read_bytes() == REPORT_BYTES


def test_a_portal_start_keeps_the_mounts_save_in_progress(env):
    """SPEC S48, S34: a portal starting sweeps what a killed portal left
    beside its documents, and only that: an app saving the same document
    through the mount at that moment keeps its temporary and finishes its
    save. (Both makers once named their temporaries alike, and the
    portal's sweep removed the mount's.)"""
    bus = SessionBus(env.root)
    mountpoint = env.root / "doc"
    mountpoint.mkdir()
    report = env.backing(LOCAL) / REPORT
    try:
        first = Portal(env, bus, mountpoint)
        try:
            export_for_writing(env, first)
        finally:
            first.stop()
        env.grant(ALPHA, f"{LOCAL}:{REPORT}")
        mount(env)
        session = env.app_session(ALPHA, HOLD, env.prov(ALPHA, LOCAL, REPORT))
        assert session.recv() == {"made": True}
        [saving] = hidden(report.parent)
        second = Portal(env, bus, mountpoint)
        try:
            assert hidden(report.parent) == [saving], "the portal's start took the mount's live temporary"
            session.send()
            assert session.recv() == {"write": "OK", "rename": "OK"}
            assert report.read_bytes() == b"before after"
        finally:
            second.stop()
    finally:
        bus.stop()


def test_each_maker_sweeps_only_its_own_names(env):
    """SPEC S48, S34: the names each maker gives differ, and each
    start-up sweep matches its own: a file of the portal's form beside a
    granted file stays through the mount's sweep."""
    docs = env.backing(LOCAL) / "docs"
    (docs / ".report.txt.scopefs-portal-k2f9").write_bytes(b"a portal's save")
    (docs / ".report.txt.scopefs-save-k2f9").write_bytes(b"a killed mount's save")
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    mount(env)
    wait_for("the mount's own leftover removed", lambda: hidden(docs), lambda names: len(names) == 1)
    assert hidden(docs) == [".report.txt.scopefs-portal-k2f9"]
