"""A real desktop app end to end: a GTK 3 application (python3-gi) in the
default sandbox with `scopefs run --portal-bus`, drawn on Xvfb, opens a
document with GtkFileChooserNative, which goes through the FileChooser
portal (Debian's xdg-desktop-portal) to ScopeFS's backend and the scripted
agent, reads it, saves it atomically with GLib, loses it on `scopefs
revoke` and gets it back on restore. SPEC S45, S21a, S48, S14.

A screenshot of the app, drawn with the document's text, is kept at
.build/test-artifacts/portal/gtk-app-OWNER.png.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pick_agent import Agent
from scopefs_harness import ALPHA, LOCAL, REPORT_BYTES
from test_portal import privacy
from test_portal_chooser import desktop, nobody_desktop, nobody_env, owner_desktop  # noqa: F401  (fixtures)

ARTIFACTS = Path(__file__).resolve().parents[2] / ".build" / "test-artifacts" / "portal"

# The app. GTK 3 uses the FileChooser portal for GtkFileChooserNative when
# GTK_USE_PORTAL=1 (or inside Flatpak). It shows a window with the
# document's text, steps the test through open+save, revoke and restore,
# and sends its own screenshot (Gdk reads the window back from Xvfb).
GTK_APP = """
import base64
import gi
gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, GLib, Gtk

window = Gtk.Window(title="ScopeFS: a GTK app and the document portal")
window.set_default_size(560, 160)
label = Gtk.Label(label="no document yet")
window.add(label)
window.show_all()

def settle():
    for _ in range(50):  # draw what changed: GTK paints on idle and on expose
        while Gtk.events_pending():
            Gtk.main_iteration()
        GLib.usleep(10000)

def screenshot():
    settle()
    gdk_window = window.get_window()
    shot = Gdk.pixbuf_get_from_window(gdk_window, 0, 0, gdk_window.get_width(), gdk_window.get_height())
    return base64.b64encode(shot.save_to_bufferv("png", [], [])[1]).decode()

settle()
chooser = Gtk.FileChooserNative.new("Open a report", window, Gtk.FileChooserAction.OPEN, "_Open", "_Cancel")
text = Gtk.FileFilter()
text.set_name("Text")
text.add_pattern("*.txt")
chooser.add_filter(text)
response = chooser.run()
result = {"accepted": response == Gtk.ResponseType.ACCEPT}
if result["accepted"]:
    path = chooser.get_filename()
    result["path"] = path
    result["read"] = GLib.file_get_contents(path)[1][:16].hex()
    GLib.file_set_contents(path, b"saved atomically by a GTK app")  # a temporary renamed over it
    fd = os.open(path, os.O_RDONLY)
    saved = os.pread(fd, 64, 0).decode()
    result["after save"] = saved
    label.set_text(os.path.basename(path) + ": " + saved)
    result["screenshot"] = screenshot()
step(result)
if result["accepted"]:
    gone = {"descriptor": outcome(lambda: os.pread(fd, 64, 0).decode())}
    try:
        GLib.file_set_contents(path, b"saved after the revoke")
        gone["save"] = "saved"
    except GLib.Error as error:
        gone["save"] = error.message
    step(gone)
    emit({"descriptor": outcome(lambda: os.pread(fd, 64, 0).decode()),
          "reopened": outcome(lambda: open(path).read())})
else:
    emit({})
"""


@pytest.fixture
def display(owner_desktop):
    """Xvfb on a display number of its choosing (-displayfd), only on its
    socket in /tmp/.X11-unix; any local client may draw (-ac), as the app
    runs as another account than the test's."""
    xvfb = shutil.which("Xvfb")
    if not xvfb:
        pytest.fail("Xvfb is needed (make deps installs xvfb)")
    env, _, _ = owner_desktop
    reader, writer = os.pipe()
    log = open(env.root / "xvfb.err", "w")
    server = subprocess.Popen(
        [xvfb, "-displayfd", str(writer), "-nolisten", "tcp", "-ac", "-screen", "0", "800x600x24"],
        pass_fds=(writer,),
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    os.close(writer)
    try:
        with os.fdopen(reader) as numbers:
            number = numbers.readline().strip()
        assert number.isdigit(), "Xvfb did not start:\n" + (env.root / "xvfb.err").read_text()
        yield number
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


def test_a_gtk_app_opens_saves_loses_and_regains_a_document(owner_desktop, display):
    """SPEC S45, S21a, S48, S14: GtkFileChooserNative in the default sandbox
    (strict scopes) goes through the FileChooser portal to ScopeFS's
    backend; the agent's choice reaches the app as a document path, which
    it reads and saves with g_file_set_contents (a temporary beside it,
    renamed over it): the host file holds the save and the grant stays the
    same item. `scopefs revoke` cuts the descriptor it holds (EPERM) and
    its next save; `scopefs restore` gives the document back. With a root
    owner and with a non-root one."""
    env, desktop, owner = owner_desktop
    agent = Agent(env, [{"choose": [f"{LOCAL}:docs/report.txt"]}], count=1)
    socket = f"/tmp/.X11-unix/X{display}"
    extra = ("--portal-bus", "--expose", socket, "--env", f"DISPLAY=:{display}", "--env", "GTK_USE_PORTAL=1")
    extra += ("--env", "NO_AT_BRIDGE=1", "--env", "GSETTINGS_BACKEND=memory")
    app = env.app_session(ALPHA, GTK_APP, sandbox=True, extra=extra)
    opened = app.recv(timeout=90)
    log = agent.finish()
    assert opened["accepted"], (opened, log, desktop.log.read_text(), app.stderr())
    document = Path(opened["path"])
    assert document.parent.parent == desktop.mountpoint, "a document path of the Documents portal"
    assert bytes.fromhex(opened["read"]) == REPORT_BYTES[:16]
    assert opened["after save"] == "saved atomically by a GTK app"
    report = env.backing(LOCAL) / "docs" / "report.txt"
    assert report.read_bytes() == b"saved atomically by a GTK app"
    assert sorted(os.listdir(report.parent)) == sorted(os.listdir(env.backing(LOCAL) / "docs")), "no temporary left"
    [grant] = privacy(env, ALPHA)
    assert (grant["path"], grant["state"]) == ("docs/report.txt", "active")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    picture = base64.b64decode(opened["screenshot"])
    assert picture.startswith(b"\x89PNG\r\n\x1a\n")
    (ARTIFACTS / f"gtk-app-{owner}.png").write_bytes(picture)

    env.cli("revoke", ALPHA, f"{LOCAL}:docs/report.txt")
    app.send()
    gone = app.recv(timeout=30)
    assert gone["descriptor"] == {"errno": "EPERM"}, gone
    assert gone["save"] != "saved", gone
    assert report.read_bytes() == b"saved atomically by a GTK app"

    env.cli("restore", ALPHA, f"{LOCAL}:docs/report.txt")
    app.send()
    back = app.recv(timeout=30)
    assert back["reopened"] == {"ok": "saved atomically by a GTK app"}, back
    assert app.finish() == 0, app.stderr()
