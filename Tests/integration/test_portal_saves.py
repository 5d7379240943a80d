"""Atomic saves through `scopefs portal`'s document layout (SPEC S48, S45):
an app that may write a document saves it as editors do, by writing a
temporary file beside it in DOC_ID/ and renaming it over the document,
with the real libraries (GLib's g_file_set_contents and
g_file_replace_contents, through Debian's python3-gi; vim with
backupcopy=no). The grant and the item's identity follow the new file;
the temporary is visible to that app's view only and never becomes a
grant; nothing else may be made beside the document; a revoke cuts a
temporary's descriptor as it cuts the document's (S14).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from doc_scope_helpers import mount
from scopefs_harness import (
    ALPHA,
    BETA,
    ITEMS_MOVE,
    LOCAL,
    REPORT_BYTES,
    describe,
    mount_count,
    run_bounded,
    wait_for,
)
from test_portal import SYSTEM_PYTHON, Portal, SessionBus, privacy


@pytest.fixture
def portal(env):
    if not shutil.which("flatpak") or not shutil.which("dbus-daemon"):
        pytest.fail("flatpak and dbus-daemon are needed (make deps installs them)")
    bus = SessionBus(env.root)
    (env.root / "doc").mkdir()
    served = Portal(env, bus, env.root / "doc")
    yield served
    served.stop()
    bus.stop()


def export(portal, path: Path, app: str, *flags: str) -> str:
    """The document id `flatpak document-export` gives `app` for `path`."""
    out = portal.flatpak("document-export", "--app", app, *flags, path).stdout.strip()
    return Path(out).parent.name


def item_row(env, path: str) -> tuple:
    """The items table's identity of provider item `path`: (id, inode, missing)."""
    with sqlite3.connect(env.state / "scopefs.sqlite") as db:
        return db.execute(
            "SELECT id, inode, missing FROM items WHERE provider_id = ? AND relative_path = ?", (LOCAL, path)
        ).fetchone()


def hidden_leftovers(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if ".scopefs-" in name]


GLIB_SAVE = """
import sys
from gi.repository import Gio, GLib
path, how, text = sys.argv[1], sys.argv[2], sys.argv[3].encode()
if how == "set_contents":
    GLib.file_set_contents(path, text)
else:
    Gio.File.new_for_path(path).replace_contents(text, None, False, Gio.FileCreateFlags.NONE, None)
"""


@pytest.mark.sqlite_store(ITEMS_MOVE)
@pytest.mark.parametrize("how", ["set_contents", "replace_contents"])
def test_glib_saves_a_document_atomically(env, portal, how):
    """SPEC S48: GLib's atomic save of by-app/APP/DOC_ID/NAME writes a
    temporary beside the document and renames it over; the host file has
    the new content, the grant is still the app's, the item's identifier
    is the same and now names the new file (its inode), and no temporary
    is left on the host."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    doc = export(portal, report, ALPHA, "--allow-write")
    before = item_row(env, "docs/report.txt")
    old_inode = report.stat().st_ino
    path = portal.mountpoint / "by-app" / ALPHA / doc / "report.txt"
    p = run_bounded(
        [SYSTEM_PYTHON, "-c", GLIB_SAVE, str(path), how, "saved by GLib"], 30, env.base_env, what="GLib save"
    )
    assert p.returncode == 0, describe(p)
    assert report.read_bytes() == b"saved by GLib"
    assert report.stat().st_ino != old_inode, "replaced by a new file, not written in place"
    assert path.read_bytes() == b"saved by GLib"
    assert os.listdir(path.parent) == ["report.txt"], "no temporary left in the document folder"
    assert hidden_leftovers(report.parent) == []
    after = item_row(env, "docs/report.txt")
    assert after[0] == before[0], "the same item identifier"
    assert after[1] == os.stat(report).st_ino and after[2] == 0, "now naming the new file"
    [grant] = privacy(env, ALPHA)
    assert (grant["path"], grant["access"], grant["state"]) == ("docs/report.txt", "read-write", "active"), grant


def test_temporary_is_the_saving_apps_own(env, portal):
    """SPEC S48: a temporary made in by-app/ALPHA/DOC_ID is listed and
    found there only: not in DOC_ID/ (the owner's view), not in
    by-app/BETA/DOC_ID, and not on the host under its name; renamed over
    the document it replaces the document for every view; removing it
    removes its host file."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    doc = export(portal, report, ALPHA, "--allow-write")
    export(portal, report, BETA)
    mine = portal.mountpoint / "by-app" / ALPHA / doc
    temp = mine / "report.txt.XYZ123"
    temp.write_bytes(b"draft")
    assert sorted(os.listdir(mine)) == ["report.txt", "report.txt.XYZ123"]
    assert os.listdir(portal.mountpoint / doc) == ["report.txt"]
    assert os.listdir(portal.mountpoint / "by-app" / BETA / doc) == ["report.txt"]
    assert not (portal.mountpoint / "by-app" / BETA / doc / "report.txt.XYZ123").exists()
    assert not (report.parent / "report.txt.XYZ123").exists()
    assert len(hidden_leftovers(report.parent)) == 1, "one hidden host file holds it"
    # Renamed to another temporary name, then removed: nothing left.
    os.rename(temp, mine / "second")
    assert sorted(os.listdir(mine)) == ["report.txt", "second"]
    os.unlink(mine / "second")
    assert hidden_leftovers(report.parent) == []
    # Made again and renamed over: every view reads the new content.
    (mine / "third").write_bytes(b"final")
    os.rename(mine / "third", mine / "report.txt")
    assert (portal.mountpoint / "by-app" / BETA / doc / "report.txt").read_bytes() == b"final"
    assert (portal.mountpoint / doc / "report.txt").read_bytes() == b"final"
    assert report.read_bytes() == b"final"


def test_nothing_else_is_made_beside_a_document(env, portal):
    """SPEC S48, S32: a read-only grant makes no temporary (EACCES, as
    the folder's mode 0500 says); a read-write one makes files only:
    no folder, symbolic link or hard link (EPERM), the document itself is
    never unlinked (EPERM), names never move to another document's folder
    (EXDEV) and the layout's own folders take no change (EPERM, as the
    reference portal answers)."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    secret = env.backing(LOCAL) / "docs" / "secret.txt"
    doc = export(portal, report, ALPHA, "--allow-write")
    other = export(portal, secret, ALPHA, "--allow-write")
    read_only = export(portal, report, BETA)
    mine = portal.mountpoint / "by-app" / ALPHA / doc
    assert os.stat(mine).st_mode & 0o777 == 0o700
    assert os.stat(portal.mountpoint / "by-app" / BETA / read_only).st_mode & 0o777 == 0o500

    def refused(code, call, *args):
        with pytest.raises(OSError) as denied:
            call(*args)
        assert denied.value.errno == code, (call, args, denied.value)

    # A root owner's process passes mode bits: the layout refuses it itself.
    refused(errno.EACCES, os.open, portal.mountpoint / "by-app" / BETA / read_only / "tmp", os.O_CREAT | os.O_WRONLY)
    refused(errno.EPERM, os.mkdir, mine / "folder")
    refused(errno.EPERM, os.symlink, "target", mine / "link")
    refused(errno.EPERM, os.link, mine / "report.txt", mine / "hard")
    refused(errno.EPERM, os.unlink, mine / "report.txt")
    (mine / "tmp").write_bytes(b"x")
    refused(errno.EXDEV, os.rename, mine / "tmp", portal.mountpoint / "by-app" / ALPHA / other / "tmp")
    refused(errno.EXDEV, os.rename, mine / "tmp", portal.mountpoint / doc / "tmp")
    refused(errno.EPERM, os.mkdir, portal.mountpoint / "by-app" / ALPHA / "folder")
    os.unlink(mine / "tmp")
    assert report.read_bytes() == REPORT_BYTES


def test_revoke_cuts_a_temporary_and_hides_it(env, portal):
    """SPEC S48, S14: a descriptor of a temporary is cut at its next write
    once the document's grant is revoked (EPERM), and the temporary is
    removed (its save can no longer finish): after a restore the document
    is back as it was, and the save's name is gone."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    doc = export(portal, report, ALPHA, "--allow-write")
    mine = portal.mountpoint / "by-app" / ALPHA / doc
    fd = os.open(mine / "draft", os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        assert os.write(fd, b"before") == 6
        env.cli("revoke", ALPHA, f"{LOCAL}:docs/report.txt")
        with pytest.raises(OSError) as cut:
            os.write(fd, b" after")
        assert cut.value.errno == errno.EPERM
    finally:
        os.close(fd)
    assert not mine.exists() or "draft" not in os.listdir(mine)
    wait_for("the cut save's temporary removed", lambda: hidden_leftovers(report.parent), lambda left: left == [])
    env.cli("restore", ALPHA, f"{LOCAL}:docs/report.txt")
    with pytest.raises(FileNotFoundError):
        os.rename(mine / "draft", mine / "report.txt")
    assert os.listdir(mine) == ["report.txt"]
    assert report.read_bytes() == REPORT_BYTES


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_vim_saves_by_renaming_the_document_away(env, portal):
    """SPEC S48: vim with backupcopy=no moves the document to its backup
    name, writes the document's name anew and removes the backup; the
    document has the new content and the item follows it. (backupskip
    is emptied: its default skips backups of files under /tmp, where the
    test's files are.)"""
    vim = shutil.which("vim.basic") or shutil.which("vim")
    if not vim:
        pytest.fail("vim is needed (make deps installs it)")
    report = env.backing(LOCAL) / "docs" / "report.txt"
    doc = export(portal, report, ALPHA, "--allow-write")
    before = item_row(env, "docs/report.txt")
    old_inode = report.stat().st_ino
    path = portal.mountpoint / "by-app" / ALPHA / doc / "report.txt"
    argv = [vim, "-u", "NONE", "-i", "NONE", "-N", "-n", "-e", "-s"]
    argv += [
        "-c",
        "set backupcopy=no writebackup nobackup backupskip=",
        "-c",
        "%d",
        "-c",
        "call setline(1, 'saved by vim')",
    ]
    argv += ["-c", "wq", str(path)]
    p = run_bounded(argv, 30, dict(env.base_env, HOME=str(env.root)), what="vim")
    assert p.returncode == 0, describe(p)
    assert report.read_bytes() == b"saved by vim\n"
    assert report.stat().st_ino != old_inode, "a new file, not written in place"
    assert os.listdir(path.parent) == ["report.txt"]
    assert hidden_leftovers(report.parent) == []
    after = item_row(env, "docs/report.txt")
    assert after[0] == before[0] and after[1] == os.stat(report).st_ino


def test_python_client_saves_atomically(env, portal):
    """SPEC S48: the plain pattern every language has (write a temporary
    with O_EXCL beside the document, fsync, rename over it) works, with
    the temporary's mode set from the document's (fchmod), as the
    project's own clients save."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    report.chmod(0o640)
    doc = export(portal, report, ALPHA, "--allow-write")
    folder = portal.mountpoint / "by-app" / ALPHA / doc
    fd = os.open(folder / ".report.txt.tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        os.write(fd, b"saved by Python")
        os.fchmod(fd, 0o640)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(folder / ".report.txt.tmp", folder / "report.txt")
    assert report.read_bytes() == b"saved by Python"
    assert report.stat().st_mode & 0o777 == 0o640
    [grant] = privacy(env, ALPHA)
    assert grant["path"] == "docs/report.txt", "the grant is still the one of the document, and no other"


def test_save_as_a_name_not_there_yet(env, portal):
    """SPEC S48, S45: AddNamedFull of a name that does not exist (what the
    frontend does with every SaveFile result) makes a document whose file
    is made when the app first writes it: Info shows the app's permissions
    at once, the document's folder is empty and the host has no file; the
    app's save (GLib's, a temporary renamed to the name) makes the file,
    and the permission becomes a ScopeFS grant of the new item."""
    folder = {"fd": str(env.backing(LOCAL) / "docs"), "flags": ["O_PATH", "O_DIRECTORY"]}
    [added] = portal.calls(("AddNamedFull", "hayusas", [folder, {"bytes": "new.txt"}, 2, ALPHA, ["read", "write"]]))
    doc = added["reply"][0]
    [info] = portal.calls(("Info", "s", [doc]))
    assert info["reply"][1] == {ALPHA: ["read", "write"]}, info
    mine = portal.mountpoint / "by-app" / ALPHA / doc
    assert os.listdir(mine) == [] and not (mine / "new.txt").exists()
    host = env.backing(LOCAL) / "docs" / "new.txt"
    assert not host.exists()
    assert privacy(env, ALPHA) == [], "no ScopeFS grant before the file exists"
    p = run_bounded(
        [SYSTEM_PYTHON, "-c", GLIB_SAVE, str(mine / "new.txt"), "set_contents", "saved as"],
        30,
        env.base_env,
        what="GLib save",
    )
    assert p.returncode == 0, describe(p)
    assert host.read_bytes() == b"saved as"
    assert os.listdir(mine) == ["new.txt"]
    [grant] = privacy(env, ALPHA)
    assert (grant["path"], grant["access"], grant["state"]) == ("docs/new.txt", "read-write", "active"), grant
    [info] = portal.calls(("Info", "s", [doc]))
    assert info["reply"][1] == {ALPHA: ["read", "write"]}, info
    # Another app granted read only before the file existed reads it now.
    [added] = portal.calls(("AddNamedFull", "hayusas", [folder, {"bytes": "later.txt"}, 2, BETA, ["read"]]))
    later = added["reply"][0]
    with pytest.raises(OSError) as refused:
        os.open(portal.mountpoint / "by-app" / BETA / later / "later.txt", os.O_CREAT | os.O_WRONLY, 0o600)
    assert refused.value.errno == errno.EACCES, "read only: the app cannot make it"
    (env.backing(LOCAL) / "docs" / "later.txt").write_bytes(b"made by the owner")
    assert (portal.mountpoint / later / "later.txt").read_bytes() == b"made by the owner"
    assert (portal.mountpoint / "by-app" / BETA / later / "later.txt").read_bytes() == b"made by the owner"
    [beta] = privacy(env, BETA)
    assert (beta["path"], beta["access"]) == ("docs/later.txt", "read"), beta


def test_folder_document_serves_its_contents(env, portal):
    """SPEC S45, S2: a folder document (`flatpak document-export DIR`, the
    export-directory flag) is a folder in DOC_ID/ with the folder's
    contents as its grant allows: a read grant lists and reads, and gets
    EACCES for any change; a read-write grant writes, creates, makes
    folders, symbolic links and hard links, renames and removes inside
    it, never out of it (EXDEV); a symbolic link reads back as the host
    has it, and hard links show one inode, as on the host (upstream's
    test_document_fuse checks both); a revoke cuts an open descriptor
    (EPERM)."""
    folder = env.backing(LOCAL) / "docs"
    (folder / "sub").mkdir()
    (folder / "sub" / "inner.txt").write_bytes(b"inner")
    doc = export(portal, folder, ALPHA, "--allow-write")
    assert export(portal, folder, BETA) == doc
    mine = portal.mountpoint / "by-app" / ALPHA / doc / "docs"
    theirs = portal.mountpoint / "by-app" / BETA / doc / "docs"
    assert os.path.isdir(portal.mountpoint / doc / "docs") and os.path.isdir(mine)
    assert sorted(os.listdir(mine)) == ["report.txt", "secret.txt", "sub"]
    assert os.listdir(mine / "sub") == ["inner.txt"] and os.path.isdir(theirs / "sub")
    assert (theirs / "sub" / "inner.txt").read_bytes() == b"inner"
    assert (mine / "report.txt").read_bytes() == REPORT_BYTES

    def refused(code, call, *args):
        with pytest.raises(OSError) as denied:
            call(*args)
        assert denied.value.errno == code, (call, args, denied.value)

    refused(errno.EACCES, os.open, theirs / "sub" / "inner.txt", os.O_WRONLY)
    refused(errno.EACCES, os.open, theirs / "new.txt", os.O_CREAT | os.O_WRONLY, 0o600)
    refused(errno.EACCES, os.mkdir, theirs / "made")
    refused(errno.EACCES, os.unlink, theirs / "secret.txt")
    (mine / "sub" / "inner.txt").write_bytes(b"changed")
    (mine / "made").mkdir()
    (mine / "made" / "new.txt").write_bytes(b"new")
    os.rename(mine / "made" / "new.txt", mine / "sub" / "moved.txt")
    os.rename(mine / "made", mine / "renamed")
    assert sorted(os.listdir(folder / "sub")) == ["inner.txt", "moved.txt"]
    assert (folder / "sub" / "inner.txt").read_bytes() == b"changed"
    assert (theirs / "sub" / "moved.txt").read_bytes() == b"new"
    refused(errno.EXDEV, os.rename, mine / "sub" / "moved.txt", portal.mountpoint / doc / "docs" / "moved.txt")
    os.symlink("inner.txt", mine / "sub" / "link")
    assert os.readlink(mine / "sub" / "link") == "inner.txt"
    assert os.readlink(folder / "sub" / "link") == "inner.txt"
    assert (mine / "sub" / "link").read_bytes() == b"changed", "followed by the kernel, inside the layout"
    os.link(mine / "sub" / "inner.txt", mine / "hard.txt")
    assert os.lstat(mine / "hard.txt").st_ino == os.lstat(mine / "sub" / "inner.txt").st_ino
    assert os.lstat(mine / "hard.txt").st_nlink == 2
    assert os.stat(folder / "hard.txt").st_ino == os.stat(folder / "sub" / "inner.txt").st_ino
    refused(errno.EXDEV, os.link, mine / "sub" / "inner.txt", portal.mountpoint / doc / "docs" / "hard2.txt")
    refused(errno.EACCES, os.symlink, "inner.txt", theirs / "sub" / "link2")
    os.unlink(mine / "sub" / "link")
    os.unlink(mine / "hard.txt")
    os.unlink(mine / "sub" / "moved.txt")
    os.rmdir(mine / "renamed")
    assert sorted(os.listdir(folder)) == ["report.txt", "secret.txt", "sub"]
    fd = os.open(mine / "sub" / "inner.txt", os.O_RDONLY)
    try:
        assert os.pread(fd, 7, 0) == b"changed"
        env.cli("revoke", ALPHA, f"{LOCAL}:docs")
        refused(errno.EPERM, os.pread, fd, 7, 0)
    finally:
        os.close(fd)
    refused(errno.ENOENT, os.stat, mine / "sub")


def test_layout_details_as_xdg_document_portal(env, portal):
    """SPEC S45, issue 49 finding 6: only a Flatpak application id has a
    by-app folder (ENOENT otherwise); the DOC_ID folder has no host path,
    a folder document's items have theirs; Lookup of a save's temporary
    names no document; the owner may remove the document's file through
    DOC_ID/ as on the host, an app never (EPERM)."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    doc = export(portal, report, ALPHA, "--allow-write")
    folder_doc = export(portal, env.backing(LOCAL) / "deep", ALPHA)
    with pytest.raises(FileNotFoundError):
        os.lstat(portal.mountpoint / "by-app" / "not-an-app-id")
    assert os.path.isdir(portal.mountpoint / "by-app" / "org.example.Unknown")
    attribute = "user.document-portal.host-path"
    with pytest.raises(OSError) as none:
        os.getxattr(portal.mountpoint / doc, attribute)
    assert none.value.errno == errno.ENODATA
    assert os.getxattr(portal.mountpoint / folder_doc / "deep" / "a", attribute) == bytes(
        str(env.backing(LOCAL) / "deep" / "a"), "utf-8"
    )
    (portal.mountpoint / doc / "draft").write_bytes(b"x")
    [looked] = portal.calls(("Lookup", "ay", [{"bytes": str(portal.mountpoint / doc / "draft")}]))
    assert looked == {"reply": ""}, looked
    os.unlink(portal.mountpoint / doc / "draft")
    with pytest.raises(OSError) as kept:
        os.unlink(portal.mountpoint / "by-app" / ALPHA / doc / "report.txt")
    assert kept.value.errno == errno.EPERM
    os.unlink(portal.mountpoint / doc / "report.txt")
    assert not report.exists()
    assert os.listdir(portal.mountpoint / "by-app" / ALPHA / doc) == []


def test_access_says_what_the_layout_allows(env, portal):
    """SPEC S45, S48; issue 49 (xdg-desktop-portal's test_document_fuse
    checks it first): access(2) answers what the layout's operations
    allow. The root, by-app and app folders take no change, nor does a
    read-only document or its folder; a read-write document and its
    folder do; a document is not executable. A root owner's layout runs
    without `default_permissions`, and its root passed every access(W_OK)
    before, while the write itself was refused."""
    rw = export(portal, env.backing(LOCAL) / "docs" / "report.txt", ALPHA, "--allow-write")
    ro = export(portal, env.backing(LOCAL) / "docs" / "secret.txt", ALPHA)
    root = portal.mountpoint
    mine = root / "by-app" / ALPHA
    for folder in (root, root / "by-app", mine, mine / ro):
        assert os.access(folder, os.R_OK | os.X_OK), folder
        assert not os.access(folder, os.W_OK), f"{folder} takes no change"
    assert os.access(mine / rw, os.W_OK)
    assert os.access(mine / ro / "secret.txt", os.R_OK)
    assert not os.access(mine / ro / "secret.txt", os.W_OK), "a read-only document"
    assert os.access(mine / rw / "report.txt", os.R_OK | os.W_OK)
    assert not os.access(mine / rw / "report.txt", os.X_OK)
    with pytest.raises(OSError) as refused:
        os.mkdir(root / "by-app" / "made-here")
    assert refused.value.errno == errno.EPERM, refused.value


def test_portal_stops_cleanly_on_sighup(env):
    """Issue 49 finding 5: SIGHUP, as SIGTERM, ends `scopefs portal` with
    exit 0 and its layout unmounted (a systemd unit is not left failed)."""
    bus = SessionBus(env.root)
    (env.root / "doc").mkdir()
    served = Portal(env, bus, env.root / "doc")
    try:
        served.process.send_signal(signal.SIGHUP)
        # The exit's code is the point, not its speed: with the PostgreSQL
        # suite beside the SQLite one it took over 10 s once (and was 0).
        assert served.process.wait(timeout=30) == 0, served.log.read_text()
    finally:
        served.stop()
        bus.stop()


def test_portal_recovers_from_sigkill_and_early_sigterm(env):
    """Issue 49 finding 5, SPEC S34: after a SIGKILL the next `scopefs
    portal` detaches the dead layout and serves (no exit 73, no
    `fusermount3 -u` by hand); a SIGTERM as soon as the bus name appears
    ends it with exit 0 and no mount left, every time."""
    bus = SessionBus(env.root)
    mountpoint = env.root / "doc"
    mountpoint.mkdir()
    try:
        killed = Portal(env, bus, mountpoint)
        killed.process.kill()
        killed.process.wait(timeout=10)
        assert mount_count(mountpoint) > 0, "the killed portal's layout stays, dead"
        served = Portal(env, bus, mountpoint)
        assert os.listdir(mountpoint) == ["by-app"], "a live layout again"
        served.stop()
        for _ in range(5):
            early = subprocess.Popen(
                env.cli_argv("portal", "--mountpoint", mountpoint),
                env=dict(env.base_env, DBUS_SESSION_BUS_ADDRESS=bus.address),
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            wait_for("the portal's bus name", lambda p=early: p.poll() is not None or owned(bus, env), timeout=15)
            early.send_signal(signal.SIGTERM)
            assert early.wait(timeout=10) == 0
            assert mount_count(mountpoint) == 0, "no layout left behind"
    finally:
        if mount_count(mountpoint):
            subprocess.run(["fusermount3", "-uz", str(mountpoint)], check=False)
        bus.stop()


def test_a_killed_portals_unfinished_save_is_swept_at_the_next_start(env):
    """SPEC S34, S48: a portal killed (SIGKILL) while an app's save is
    half done leaves the temporary's hidden host file beside the
    document; the next portal removes it before it serves, leaves the
    document and every other file of the folder alone, and the app can
    save again."""
    bus = SessionBus(env.root)
    mountpoint = env.root / "doc"
    mountpoint.mkdir()
    report = env.backing(LOCAL) / "docs" / "report.txt"
    before = report.read_bytes()
    (report.parent / ".report.txt.scopefs-notes").mkdir()  # a folder of that shape: not a temporary
    (report.parent / ".report.txt.kept").write_bytes(b"the owner's")
    try:
        killed = Portal(env, bus, mountpoint)
        doc = export(killed, report, ALPHA, "--allow-write")
        draft = mountpoint / "by-app" / ALPHA / doc / "report.txt.tmp"
        held = os.open(draft, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(held, b"half a save")
        assert len(hidden_leftovers(report.parent)) == 2, sorted(os.listdir(report.parent))
        killed.process.kill()
        killed.process.wait(timeout=10)
        try:
            os.close(held)
        except OSError:
            pass  # its flush meets the dead layout (ENOTCONN)
        served = Portal(env, bus, mountpoint)
        try:
            assert hidden_leftovers(report.parent) == [".report.txt.scopefs-notes"], sorted(os.listdir(report.parent))
            assert (report.parent / ".report.txt.kept").read_bytes() == b"the owner's"
            assert report.read_bytes() == before
            assert "temporaries of unfinished saves" in served.log.read_text()
            mine = mountpoint / "by-app" / ALPHA / doc
            assert os.listdir(mine) == ["report.txt"]
            (mine / "again.tmp").write_bytes(b"saved")
            os.rename(mine / "again.tmp", mine / "report.txt")
            assert report.read_bytes() == b"saved"
        finally:
            served.stop()
    finally:
        if mount_count(mountpoint):
            subprocess.run(["fusermount3", "-uz", str(mountpoint)], check=False)
        bus.stop()


def owned(bus, env) -> bool:
    argv = ["gdbus", "call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus"]
    argv += ["--method", "org.freedesktop.DBus.NameHasOwner", "org.freedesktop.portal.Documents"]
    p = subprocess.run(
        argv, env=dict(env.base_env, DBUS_SESSION_BUS_ADDRESS=bus.address), capture_output=True, text=True
    )
    return "true" in p.stdout


TRANSFER = "org.freedesktop.portal.FileTransfer"
START_AND_ADD = """
import json, os, sys
import dbus
bus = dbus.bus.BusConnection(sys.argv[1])
portal = bus.get_object("org.freedesktop.portal.Documents", "/org/freedesktop/portal/documents")
transfer = dbus.Interface(portal, "org.freedesktop.portal.FileTransfer")
key = transfer.StartTransfer(dbus.Dictionary({"writable": dbus.Boolean(sys.argv[2] == "writable")}, signature="sv"))
fds = [os.open(path, os.O_RDWR if sys.argv[2] == "writable" else os.O_RDONLY) for path in sys.argv[3:]]
transfer.AddFiles(key, [dbus.types.UnixFd(fd) for fd in fds], dbus.Dictionary({}, signature="sv"))
print(json.dumps({"key": str(key)}))
"""


def test_file_transfer_grants_what_an_app_retrieves(env, portal):
    """SPEC S45, S14, issue 49 finding 4: org.freedesktop.portal.FileTransfer
    (GTK's drag-and-drop between apps): a transfer started by one process,
    with files added by descriptor, is retrieved by an app as document
    paths in its document mount, each a ScopeFS grant of the item (read;
    write for a writable transfer whose sender could write), which
    `scopefs revoke` takes back; the transfer ends with the retrieval
    (autostop), so the key then names nothing (NotFound)."""
    mount(env)
    report = env.backing(LOCAL) / "docs" / "report.txt"
    p = run_bounded(
        [SYSTEM_PYTHON, "-c", START_AND_ADD, portal.bus.address, "writable", str(report)],
        30,
        portal.environ,
        what="StartTransfer and AddFiles",
    )
    assert p.returncode == 0, describe(p)
    key = json.loads(p.stdout.strip().splitlines()[-1])["key"]
    # A transfer's documents are transient: session grants, which last
    # while a process of the app runs (S16a); this one keeps BETA running.
    running = env.app_session(BETA, 'step({"running": True})')
    assert running.recv() == {"running": True}
    prefix = env.run_argv(BETA, [])  # `scopefs run --app BETA --no-sandbox --`
    [retrieved, again] = portal.calls(
        ("RetrieveFiles", "sa{sv}", [key, {}], TRANSFER),
        ("RetrieveFiles", "sa{sv}", [key, {}], TRANSFER),
        prefix=prefix,
    )
    [path] = retrieved["reply"]
    doc = Path(path).parent.name
    assert path == f"{portal.mountpoint}/{doc}/report.txt", retrieved
    assert again == {"error": "org.freedesktop.portal.Error.NotFound"}, again
    [grant] = privacy(env, BETA)
    assert (grant["path"], grant["access"], grant["state"]) == ("docs/report.txt", "read-write", "active"), grant
    assert grant["lifetime"] == "session", grant
    assert (portal.mountpoint / "by-app" / BETA / doc / "report.txt").read_bytes() == REPORT_BYTES
    env.cli("revoke", BETA, f"{LOCAL}:docs/report.txt")
    assert not (portal.mountpoint / "by-app" / BETA / doc / "report.txt").exists()
    running.send()
    assert running.finish() == 0
    # The owner's own process gets the host paths; a stopped transfer is gone.
    p = run_bounded(
        [SYSTEM_PYTHON, "-c", START_AND_ADD, portal.bus.address, "read", str(report)], 30, portal.environ, what="again"
    )
    key = json.loads(p.stdout.strip().splitlines()[-1])["key"]
    [owner] = portal.calls(("RetrieveFiles", "sa{sv}", [key, {}], TRANSFER))
    assert owner == {"reply": [str(report)]}, owner
    [stopped] = portal.calls(("StopTransfer", "s", ["0123456789abcdef"], TRANSFER))
    assert stopped == {"error": "org.freedesktop.portal.Error.NotFound"}, stopped


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_a_save_inside_a_folder_document_keeps_the_items_identity(env, portal):
    """SPEC S48: a temporary renamed over a file inside a read-write
    folder document is a save of that file: the file's item keeps its
    identifier, now naming the new file, so another app's grant of it
    stays the same grant of the same item."""
    folder = env.backing(LOCAL) / "docs"
    env.grant(BETA, f"{LOCAL}:docs/report.txt")
    before = item_row(env, "docs/report.txt")
    doc = export(portal, folder, ALPHA, "--allow-write")
    mine = portal.mountpoint / "by-app" / ALPHA / doc / "docs"
    (mine / ".report.txt.swp").write_bytes(b"saved inside the folder")
    os.rename(mine / ".report.txt.swp", mine / "report.txt")
    assert (folder / "report.txt").read_bytes() == b"saved inside the folder"
    after = item_row(env, "docs/report.txt")
    assert after[0] == before[0], "the same item identifier"
    assert after[1] == os.stat(folder / "report.txt").st_ino and after[2] == 0, "now naming the new file"
    [grant] = privacy(env, BETA)
    assert (grant["path"], grant["state"]) == ("docs/report.txt", "active"), grant
