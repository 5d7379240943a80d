"""Atomic saves through ScopeFS's mount beside a single-file grant (SPEC
S48): an app that may write a granted file saves it as Foundation's
write(to:atomically: true), GLib and Qt do, by a temporary file in the
file's folder renamed over it. The folder is a bare one (S2: only the
granted file shows), so the temporary is the app's alone (listed to it,
to no other app or the owner), meets none of the host's names (an
ungranted file's name is a new name to it), and never becomes a grant;
the grant, the item identifier and bookmarks follow the new file, inside
a granted folder too; a revoke cuts the temporary, its cached pages too.
"""

from __future__ import annotations

import json
import os

import pytest
from doc_scope_helpers import GETXATTR, bookmark, mount, resolve_ok
from scopefs_harness import ALPHA, BETA, ITEMS_MOVE, LOCAL, REPORT_BYTES, describe, run_bounded, wait_for
from test_portal import SYSTEM_PYTHON

REPORT = "docs/report.txt"

# argv: the granted file, the temporary's name, its content. Starts
# accessing the file (strict scopes, S9), then saves as the libraries do.
SAVE = """
target, name, text = sys.argv[1], sys.argv[2], sys.argv[3].encode()
folder = os.path.dirname(target)
temp = os.path.join(folder, name)
start_accessing(target)
def write_temp():
    fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        os.write(fd, text)
        os.fsync(fd)
    finally:
        os.close(fd)
result = {"create": attempt(write_temp)}
result["seen"] = attempt(os.stat, temp)
result["rename"] = attempt(os.rename, temp, target)
result["read"] = outcome(lambda: read_bytes(target).decode())
result["leftover"] = attempt(os.stat, temp)
emit(result)
"""


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_a_single_file_grant_is_saved_atomically(env):
    """SPEC S48: the app's temporary beside its granted file is made,
    found, and renamed over the file; the host file is a new one with the
    new content, the grant and the item identifier are the same, and a
    bookmark made before resolves to the file, not stale."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    mount(env)
    target = env.prov(ALPHA, LOCAL, REPORT)
    host = env.backing(LOCAL) / REPORT
    old_inode = host.stat().st_ino
    item = env.app_json(ALPHA, "start_accessing(sys.argv[1])\n" + GETXATTR, target, "user.scopefs.item")
    token = bookmark(env, ALPHA, target)
    got = env.app_json(ALPHA, SAVE, target, ".dat.nosync1234.AbCdEf", "saved atomically")
    assert got == {
        "create": "OK",
        "seen": "OK",
        "rename": "OK",
        "read": {"ok": "saved atomically"},
        "leftover": "ENOENT",
    }, got
    assert host.read_bytes() == b"saved atomically"
    assert host.stat().st_ino != old_inode, "a new file took the name"
    assert env.app_json(ALPHA, "start_accessing(sys.argv[1])\n" + GETXATTR, target, "user.scopefs.item") == item
    resolved = resolve_ok(env, ALPHA, token)
    assert resolved["path"] == target and resolved["isStale"] is False, resolved
    [grant] = [g for g in json.loads(env.cli("privacy", ALPHA, "--json").stdout) if g["path"] == REPORT]
    assert grant["state"] == "active", grant


RULES = """
target, mode = sys.argv[1], sys.argv[2]
folder = os.path.dirname(target)
def make(name):
    os.close(os.open(os.path.join(folder, name), os.O_CREAT | os.O_WRONLY, 0o600))
result = {}
if mode == "scoped":
    start_accessing(target)
result["create"] = attempt(make, "tmp-1")
if mode == "scoped":
    result["folder"] = attempt(os.mkdir, os.path.join(folder, "sub"))
    result["to_new_name"] = attempt(os.rename, os.path.join(folder, "tmp-1"), os.path.join(folder, "tmp-2"))
    result["listed"] = sorted(os.listdir(folder))
    result["unlink"] = attempt(os.unlink, os.path.join(folder, "tmp-2"))
    result["unlink_again"] = attempt(os.unlink, os.path.join(folder, "tmp-2"))
    result["listed_after"] = sorted(os.listdir(folder))
emit(result)
"""


def test_nothing_else_is_made_beside_a_single_file_grant(env):
    """SPEC S48, S9, S2: without the file's scope no temporary is made
    (EPERM); with it, a folder is refused (EPERM), a temporary may take a
    new name, is listed to its app under it, and may be removed; a
    read-only grant makes nothing; the host folder keeps its files."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    env.grant(BETA, f"{LOCAL}:{REPORT}", read_only=True)
    mount(env)
    target = env.prov(ALPHA, LOCAL, REPORT)
    assert env.app_json(ALPHA, RULES, target, "unscoped") == {"create": "EPERM"}
    got = env.app_json(ALPHA, RULES, target, "scoped")
    assert got == {
        "create": "OK",
        "folder": "EPERM",
        "to_new_name": "OK",
        "listed": ["report.txt", "tmp-2"],
        "unlink": "OK",
        "unlink_again": "ENOENT",
        "listed_after": ["report.txt"],
    }, got
    assert (env.backing(LOCAL) / "docs/secret.txt").read_bytes() == b"top secret\n"
    assert env.app_json(BETA, RULES, env.prov(BETA, LOCAL, REPORT), "scoped")["create"] == "EPERM"
    assert sorted(os.listdir(env.backing(LOCAL) / "docs")) == ["report.txt", "secret.txt"]


# argv: the granted file. Makes temporaries at a name nothing has and at
# names ungranted host files have, and answers each the same.
TAKEN_NAMES = """
target = sys.argv[1]
folder = os.path.dirname(target)
def path(name):
    return os.path.join(folder, name)
def make(name, text):
    fd = os.open(path(name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
start_accessing(target)
result = {"fresh": attempt(make, "fresh.tmp", "fresh"), "taken": attempt(make, "secret.txt", "mine")}
result["taken_read"] = outcome(lambda: read_text(path("secret.txt")))
result["onto_taken"] = attempt(os.rename, path("fresh.tmp"), path("notes.txt"))
result["listed"] = sorted(os.listdir(folder))
result["unlink_taken"] = attempt(os.unlink, path("secret.txt"))
result["gone"] = attempt(os.stat, path("secret.txt"))
result["save"] = attempt(os.rename, path("notes.txt"), target)
result["saved"] = outcome(lambda: read_text(target))
result["listed_after"] = sorted(os.listdir(folder))
emit(result)
"""


def test_a_name_an_ungranted_file_has_is_a_new_name_to_a_temporary(env):
    """SPEC S2, S32, S48: an ungranted file beside a single-file grant is
    invisible, to a create too: a temporary made with O_EXCL at its name
    is made as at a name nothing has (never EEXIST, which would tell the
    app the file is there), read back, renamed onto another ungranted
    file's name, removed and saved over the granted file; the host's
    ungranted files are never touched, and another app sees none of it."""
    (env.backing(LOCAL) / "docs/notes.txt").write_bytes(b"owner's notes\n")
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    env.grant(BETA, f"{LOCAL}:{REPORT}")
    mount(env)
    target = env.prov(ALPHA, LOCAL, REPORT)
    got = env.app_json(ALPHA, TAKEN_NAMES, target)
    assert got == {
        "fresh": "OK",
        "taken": "OK",
        "taken_read": {"ok": "mine"},
        "onto_taken": "OK",
        "listed": ["notes.txt", "report.txt", "secret.txt"],
        "unlink_taken": "OK",
        "gone": "ENOENT",
        "save": "OK",
        "saved": {"ok": "fresh"},
        "listed_after": ["report.txt"],
    }, got
    docs = env.backing(LOCAL) / "docs"
    assert (docs / "secret.txt").read_bytes() == b"top secret\n"
    assert (docs / "notes.txt").read_bytes() == b"owner's notes\n"
    assert (docs / "report.txt").read_bytes() == b"fresh"
    assert sorted(os.listdir(docs)) == ["notes.txt", "report.txt", "secret.txt"]
    other = env.app_json(BETA, "emit(sorted(os.listdir(os.path.dirname(sys.argv[1]))))", env.prov(BETA, LOCAL, REPORT))
    assert other == ["report.txt"], other


# argv: the granted file. Makes a temporary, lists the folder, then waits
# while the test lists it as another app and as the owner's shell.
LISTS = """
target = sys.argv[1]
folder = os.path.dirname(target)
start_accessing(target)
fd = os.open(os.path.join(folder, "draft"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
step({"listed": sorted(os.listdir(folder)), "stat": attempt(os.stat, os.path.join(folder, "draft"))})
os.close(fd)
emit({"listed": sorted(os.listdir(folder)), "stat": attempt(os.stat, os.path.join(folder, "draft"))})
"""

# The owner's shell, looking at the app's folder right after the app
# walked to its temporary (the kernel's caches are shared by both).
INSPECT = """
folder = sys.argv[1]
draft = os.path.join(folder, "draft")
emit({"listed": sorted(os.listdir(folder)), "stat": [attempt(os.stat, draft), attempt(os.stat, draft)]})
"""


def test_a_temporary_is_listed_to_its_app_alone(env):
    """SPEC S48, S2, S3, S4: the app that made a temporary lists it in the
    folder (a save's library looks for its file); another app with the
    same grant, and the owner's inspect view of the app's folder, list the
    granted file only, and the owner's stat of it is ENOENT even right
    after the app's own (nothing of it is kept by the kernel)."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    env.grant(BETA, f"{LOCAL}:{REPORT}")
    mount(env)
    target = env.prov(ALPHA, LOCAL, REPORT)
    session = env.app_session(ALPHA, LISTS, target)
    assert session.recv() == {"listed": ["draft", "report.txt"], "stat": "OK"}
    inspect = env.host_json(INSPECT, os.path.dirname(target))
    assert inspect == {"listed": ["report.txt"], "stat": ["ENOENT", "ENOENT"]}, inspect
    other = env.app_json(BETA, "emit(sorted(os.listdir(os.path.dirname(sys.argv[1]))))", env.prov(BETA, LOCAL, REPORT))
    assert other == ["report.txt"], other
    session.send()
    assert session.recv() == {"listed": ["draft", "report.txt"], "stat": "OK"}
    assert session.finish() == 0


HOLD = """
target = sys.argv[1]
temp = os.path.join(os.path.dirname(target), "draft")
start_accessing(target)
fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
os.write(fd, b"before")
step({"made": True})
result = {"write": attempt(os.write, fd, b" after"), "rename": attempt(os.rename, temp, target)}
os.close(fd)
emit(result)
"""


def test_revoke_cuts_a_temporary(env):
    """SPEC S48, S14: a revoke of the granted file cuts the temporary's
    descriptor (EPERM at its next write) and removes the temporary, so
    the rename over the file finds no name (ENOENT) and the owner's folder
    keeps no hidden file; another app never sees the temporary (ENOENT)."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    env.grant(BETA, f"{LOCAL}:{REPORT}")
    mount(env)
    target = env.prov(ALPHA, LOCAL, REPORT)
    session = env.app_session(ALPHA, HOLD, target)
    assert session.recv() == {"made": True}
    other = env.app_json(BETA, "emit(attempt(os.stat, sys.argv[1]))", env.prov(BETA, LOCAL, "docs/draft"))
    assert other == "ENOENT"
    env.cli("revoke", ALPHA, f"{LOCAL}:{REPORT}")
    session.send()
    got = session.recv()
    assert session.finish() == 0
    # The revoke removed the temporary: its name is no more (ENOENT).
    assert got["write"] == "EPERM" and got["rename"] == "ENOENT", got
    assert (env.backing(LOCAL) / REPORT).read_bytes() == REPORT_BYTES
    # The save it cut will never end: its hidden file left with it.
    assert sorted(os.listdir(env.backing(LOCAL) / "docs")) == ["report.txt", "secret.txt"]


def host_folder(env) -> list[str]:
    return sorted(os.listdir(env.backing(LOCAL) / "docs"))


# argv: the granted file. Starts a save and ends without finishing it, as
# an app that crashes mid-save does.
ABANDON = """
target = sys.argv[1]
start_accessing(target)
fd = os.open(os.path.join(os.path.dirname(target), "draft"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
os.write(fd, b"never saved")
step({"made": True})
os._exit(0)
"""


def test_a_save_the_app_never_finished_leaves_no_file(env):
    """SPEC S48, S40: an app that made a temporary and exited without
    renaming it (a crash mid-save) leaves nothing in the owner's folder
    once its last process is gone; the document is as it was."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    mount(env)
    session = env.app_session(ALPHA, ABANDON, env.prov(ALPHA, LOCAL, REPORT))
    assert session.recv() == {"made": True}
    assert len(host_folder(env)) == 3, "the temporary's host file is there while the app runs"
    session.send()
    session.finish()
    wait_for("the abandoned temporary removed", lambda: host_folder(env), lambda names: len(names) == 2)
    assert host_folder(env) == ["report.txt", "secret.txt"]
    assert (env.backing(LOCAL) / REPORT).read_bytes() == REPORT_BYTES


def test_a_killed_daemons_temporaries_are_removed_at_the_next_mount(env):
    """SPEC S48, S34: the daemon killed while an app holds a temporary
    leaves its hidden host file; the next mount removes it, and nothing
    else: a file of the owner's of a name close to it, and a symbolic
    link of exactly such a name, stay."""
    docs = env.backing(LOCAL) / "docs"
    (docs / ".report.txt.scopefs-Owner").write_bytes(b"the owner's")
    os.symlink("secret.txt", docs / ".report.txt.scopefs-link1")
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    mount(env)
    session = env.app_session(ALPHA, HOLD, env.prov(ALPHA, LOCAL, REPORT))
    assert session.recv() == {"made": True}
    [left] = [
        n
        for n in host_folder(env)
        if n not in (".report.txt.scopefs-Owner", ".report.txt.scopefs-link1", "report.txt", "secret.txt")
    ]
    assert left.startswith(".report.txt.scopefs-"), left
    env.kill_daemon()
    session.kill()
    mount(env)
    # Removed beside the serving mount, not before it.
    wait_for("the killed daemon's temporary removed", lambda: host_folder(env), lambda names: left not in names)
    assert host_folder(env) == [".report.txt.scopefs-Owner", ".report.txt.scopefs-link1", "report.txt", "secret.txt"]
    assert (docs / "secret.txt").read_bytes() == b"top secret\n"
    assert (env.backing(LOCAL) / REPORT).read_bytes() == REPORT_BYTES


# argv: the granted file. Writes a temporary, reads it back through a read
# descriptor (its pages now in the kernel's cache), and after the revoke
# reads through that descriptor again.
CACHED = """
target = sys.argv[1]
temp = os.path.join(os.path.dirname(target), "draft")
start_accessing(target)
fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
os.write(fd, b"cached draft")
os.fsync(fd)
os.close(fd)
rfd = os.open(temp, os.O_RDONLY)
first = os.pread(rfd, 64, 0).decode()
step({"read": first, "again": os.pread(rfd, 64, 0).decode()})
emit({"read": outcome(lambda: os.pread(rfd, 64, 0).decode())})
"""


def test_revoke_drops_a_temporarys_cached_pages(env):
    """SPEC S14, S48: after a revoke of the granted file returns, the app
    reads nothing of its temporary through a descriptor opened before,
    not even pages the kernel holds in its cache (EPERM)."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    mount(env)
    session = env.app_session(ALPHA, CACHED, env.prov(ALPHA, LOCAL, REPORT))
    assert session.recv() == {"read": "cached draft", "again": "cached draft"}
    env.cli("revoke", ALPHA, f"{LOCAL}:{REPORT}")
    session.send()
    got = session.recv()
    assert session.finish() == 0
    assert got == {"read": {"errno": "EPERM"}}, got


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_a_save_inside_a_folder_grant_keeps_the_item(env):
    """SPEC S48, S26: inside a granted folder, a save by a temporary
    renamed over a file (Qt's QSaveFile: `name.XXXXXX`, written, fsynced,
    renamed) gives the file's item identifier to the new file: the same
    identifier after, and a bookmark made before resolves, not stale."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    mount(env)
    target = env.prov(ALPHA, LOCAL, REPORT)
    host = env.backing(LOCAL) / REPORT
    old_inode = host.stat().st_ino
    item = env.app_json(ALPHA, "start_accessing(sys.argv[1])\n" + GETXATTR, target, "user.scopefs.item")
    assert "ok" in item, item
    token = bookmark(env, ALPHA, target)
    got = env.app_json(ALPHA, SAVE, target, "report.txt.Xq7RzB", "saved by QSaveFile's way")
    assert got == {
        "create": "OK",
        "seen": "OK",
        "rename": "OK",
        "read": {"ok": "saved by QSaveFile's way"},
        "leftover": "ENOENT",
    }, got
    assert host.stat().st_ino != old_inode, "a new file took the name"
    assert env.app_json(ALPHA, "start_accessing(sys.argv[1])\n" + GETXATTR, target, "user.scopefs.item") == item
    resolved = resolve_ok(env, ALPHA, token)
    assert resolved["path"] == target and resolved["isStale"] is False, resolved


# argv: the granted file, how, the text. GLib's own saves, in strict
# scopes: the app starts accessing the file first (S9).
GLIB_SAVE = """
import os, sys
import gi
gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib
path, how, text = sys.argv[1], sys.argv[2], sys.argv[3].encode()
os.setxattr(path, "user.scopefs.start", b"")
if how == "set_contents":
    GLib.file_set_contents(path, text)
else:
    Gio.File.new_for_path(path).replace_contents(text, None, False, Gio.FileCreateFlags.NONE, None)
print(sorted(os.listdir(os.path.dirname(path))))
"""


@pytest.mark.parametrize("how", ["set_contents", "replace_contents"])
def test_glib_saves_a_single_file_grant_atomically(env, how):
    """SPEC S48: GLib's g_file_set_contents (`name.XXXXXX`) and GFile's
    replace_contents (`.goutputstream-XXXXXX`, what GTK apps save with),
    run by Debian's python3-gi as an app process, replace the granted file
    by a new one through the mount; nothing is left beside it, on the host
    or in the app's view."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    mount(env)
    target = env.prov(ALPHA, LOCAL, REPORT)
    host = env.backing(LOCAL) / REPORT
    old_inode = host.stat().st_ino
    p = env.run_app(ALPHA, [SYSTEM_PYTHON, "-c", GLIB_SAVE, target, how, f"saved by GLib {how}"])
    assert p.returncode == 0, describe(p)
    assert p.stdout.strip().splitlines()[-1] == "['report.txt']", describe(p)
    assert host.read_bytes() == f"saved by GLib {how}".encode()
    assert host.stat().st_ino != old_inode, "replaced by a new file, not written in place"
    assert sorted(os.listdir(host.parent)) == ["report.txt", "secret.txt"]


# argv: the granted file, the text. Qt's own save, through Debian's
# python3-pyqt5: QSaveFile writes a temporary beside the file (Qt 5.15
# tries an unnamed O_TMPFILE first, then `name.XXXXXX`), copies the
# file's permissions to it, fsyncs and renames it over the file.
QT_SAVE = """
import os, sys
from PyQt5.QtCore import QIODevice, QSaveFile
path, text = sys.argv[1], sys.argv[2].encode()
os.setxattr(path, "user.scopefs.start", b"")
saving = QSaveFile(path)
if not saving.open(QIODevice.WriteOnly):
    sys.exit("open: " + saving.errorString())
saving.write(text)
if not saving.commit():
    sys.exit("commit: " + saving.errorString())
print(sorted(os.listdir(os.path.dirname(path))))
"""


def test_qt_qsavefile_saves_a_single_file_grant_atomically(env):
    """SPEC S48: Qt's QSaveFile (Debian's python3-pyqt5, run as an app
    process) replaces the granted file by a new one through the mount,
    keeping its mode; nothing is left beside it, on the host or in the
    app's view."""
    probe = run_bounded([SYSTEM_PYTHON, "-c", "import PyQt5.QtCore"], 30, env.base_env, what="PyQt5")
    if probe.returncode != 0:
        pytest.fail("python3-pyqt5 is needed (make deps installs it)\n" + describe(probe))
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    mount(env)
    target = env.prov(ALPHA, LOCAL, REPORT)
    host = env.backing(LOCAL) / REPORT
    host.chmod(0o640)
    old_inode = host.stat().st_ino
    p = env.run_app(ALPHA, [SYSTEM_PYTHON, "-c", QT_SAVE, target, "saved by QSaveFile"])
    assert p.returncode == 0, describe(p)
    assert p.stdout.strip().splitlines()[-1] == "['report.txt']", describe(p)
    assert host.read_bytes() == b"saved by QSaveFile"
    assert host.stat().st_ino != old_inode, "replaced by a new file, not written in place"
    assert host.stat().st_mode & 0o777 == 0o640
    assert sorted(os.listdir(host.parent)) == ["report.txt", "secret.txt"]
