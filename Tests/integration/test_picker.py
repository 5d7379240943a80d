"""`scopefs pick`, the interactive terminal picker (SPEC S21), driven through
a real pseudo-terminal: keystrokes in, screen out.

The picker works on the state directory (no mount needed): it lists
providers and folders, folders first then files, case-insensitively, with
human-readable sizes and without hidden files; the user selects a file or a
folder and confirms with y. Esc, q or Ctrl-C cancels with exit status 1; a
standard input that is not a terminal is a usage error (64).

A tiny ANSI screen (cursor positioning, erase, colours ignored) turns the
picker's output into 24 lines of 80 columns, so assertions read the screen
as the user sees it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess

# `make deps` installs pexpect; a missing one is a failure, not a skip.
import pexpect
import pytest
from picker_terminal import (
    APP,
    BIN,
    CANCELLED,
    COLS,
    ESC,
    RIGHT,
    ROWS,
    Picker,
    Screen,
    grant_path,
    grants,
    scopefs,
)


@pytest.fixture
def world(tmp_path):
    """State S with provider `local` (P) and app com.example.editor."""
    if not os.access(BIN, os.X_OK):
        pytest.fail(f"scopefs binary not found at {BIN} (set SCOPEFS_BIN)")
    state, provider = tmp_path / "S", tmp_path / "P"
    (provider / "Projects" / "Novel").mkdir(parents=True)
    (provider / "Projects" / "Novel" / "chapter1.txt").write_text("It was a dark and stormy night.\n")
    (provider / "A folder").mkdir()
    (provider / "archive").mkdir()
    (provider / ".hidden").write_text("not for the picker")
    (provider / "a.txt").write_bytes(b"a" * 4096)  # 4.0 KB
    (provider / "b.txt").write_bytes(b"b" * 1234)  # 1.2 KB
    (provider / "C.txt").write_bytes(b"c" * 5)  # 5 B
    scopefs(state, "init")
    scopefs(state, "provider", "add", "local", str(provider))
    scopefs(state, "app", "add", APP)
    return state, provider


def open_local(picker: Picker):
    picker.wait_text("local/")
    picker.send(RIGHT)
    picker.wait_for(lambda s: s.lines()[1].startswith("local:") and "Projects/" in s.names(), "local's root")


def test_pick_folder_grants_it(world):
    state, _ = world
    picker = Picker(state)
    picker.wait_text("Open: choose a file or folder for com.example.editor")
    open_local(picker)

    screen = picker.screen
    assert screen.names() == ["A folder/", "archive/", "Projects/", "a.txt", "b.txt", "C.txt"], screen.dump()
    rows = {name: row for name, row in zip(screen.names(), screen.list_rows(), strict=False)}
    assert rows["a.txt"].endswith("4.0 KB") and rows["b.txt"].endswith("1.2 KB") and rows["C.txt"].endswith("5 B"), (
        screen.dump()
    )
    assert ".hidden" not in "\n".join(screen.lines())
    assert all(len(line) <= COLS for line in screen.lines()) and not screen.overflow

    picker.highlight("Projects/")
    picker.send("\r")
    picker.wait_for(lambda s: s.lines()[1].startswith("local:Projects") and s.names() == ["Novel/"], "Projects")
    picker.send(" ")
    picker.wait_text("Open Novel for com.example.editor? [y/N]")
    picker.send("y")
    printed = picker.finish()
    assert picker.status == 0, printed
    assert re.search(r"^grant \d+\s*$", printed.strip(), re.M), printed

    folders = [g for g in grants(state) if grant_path(g) == "Projects/Novel"]
    assert folders, grants(state)
    assert all(g.get("kind", "folder") == "folder" for g in folders), folders


def test_escape_cancels_without_a_grant(world):
    state, _ = world
    picker = Picker(state)
    open_local(picker)
    picker.send(ESC)
    picker.finish()
    assert picker.status == CANCELLED
    assert grants(state) == []
    assert not list((state / "containers" / APP / "Documents").glob("*"))


def test_open_file_writes_reference(world):
    state, _ = world
    picker = Picker(state)
    open_local(picker)
    picker.highlight("Projects/")
    picker.send("\r")
    picker.wait_for(lambda s: s.names() == ["Novel/"], "Projects")
    picker.send("l")  # into Novel
    picker.wait_for(lambda s: s.lines()[1].startswith("local:Projects/Novel"), "Novel")
    assert picker.screen.names() == ["chapter1.txt"]
    picker.send("\x7f")  # Backspace: up, Novel highlighted
    picker.wait_for(lambda s: s.lines()[1].rstrip().split()[0] == "local:Projects", "back in Projects")
    picker.send(RIGHT)
    picker.wait_for(lambda s: s.names() == ["chapter1.txt"], "Novel again")
    picker.send("\r")  # Enter on a file selects it
    picker.wait_text("Open chapter1.txt for com.example.editor? [y/N]")
    picker.send("n")  # not confirmed: back to the list
    picker.wait_text("Not confirmed")
    picker.send("s")
    picker.wait_text("Open chapter1.txt for com.example.editor? [y/N]")
    picker.send("y")
    printed = picker.finish()
    assert picker.status == 0, printed
    assert "reference Container/Documents/chapter1.txt" in printed, printed
    assert (state / "containers" / APP / "Documents" / "chapter1.txt").is_file()
    assert [grant_path(g) for g in grants(state)] == ["Projects/Novel/chapter1.txt"]


def test_json_prints_what_the_open_did(world):
    """Issue 19: `pick --json` prints the grant and reference it made, as
    `open --json` does (one JSON style, docs/CLI.md)."""
    state, _ = world
    picker = Picker(state, "--json")
    open_local(picker)
    picker.highlight("Projects/")
    picker.send("\r")
    picker.wait_for(lambda s: s.names() == ["Novel/"], "Projects")
    picker.send("l")
    picker.wait_for(lambda s: s.names() == ["chapter1.txt"], "Novel")
    picker.send("\r")
    picker.wait_text("Open chapter1.txt for com.example.editor? [y/N]")
    picker.send("y")
    printed = picker.finish()
    assert picker.status == 0, printed
    opened = json.loads(printed[printed.index("{") : printed.rindex("}") + 1])
    assert opened["reference"] == "Container/Documents/chapter1.txt", opened
    assert opened["grant"]["path"] == "Projects/Novel/chapter1.txt" and opened["grant"]["app"] == APP, opened


def test_move_from_container_to_provider_folder(world):
    state, provider = world
    documents = state / "containers" / APP / "Documents"
    documents.mkdir(parents=True, exist_ok=True)
    (documents / "report.txt").write_text("quarterly numbers\n")
    picker = Picker(state, "--mode", "move")
    picker.wait_text("Move: choose an item of the container of com.example.editor")
    picker.highlight("Documents/")
    picker.send("\r")
    picker.wait_for(lambda s: "report.txt" in s.names(), "Documents")
    picker.highlight("report.txt")
    picker.send(" ")
    picker.wait_text("Move report.txt: choose a destination folder")
    open_local(picker)
    picker.highlight("Projects/")
    picker.send("s")
    picker.wait_text("Move report.txt to local:Projects? [y/N]")
    picker.send("Y")
    printed = picker.finish()
    assert picker.status == 0, printed
    assert re.search(r"grant \d+\treference Container/Documents/report.txt", printed), printed
    assert (provider / "Projects" / "report.txt").read_text() == "quarterly numbers\n"
    assert [grant_path(g) for g in grants(state)] == ["Projects/report.txt"]


def test_long_list_scrolls_and_long_names_are_cut(world):
    state, provider = world
    many = provider / "Projects" / "many"
    many.mkdir()
    for i in range(60):
        (many / f"file{i:02}.txt").write_text("x")
    long_name = "a very long file name " * 6 + ".txt"
    (many / long_name).write_text("x")
    picker = Picker(state)
    open_local(picker)
    picker.highlight("Projects/")
    picker.send("\r")
    picker.wait_for(lambda s: "many/" in s.names(), "Projects")
    picker.highlight("many/")
    picker.send("\r")
    picker.wait_for(lambda s: s.lines()[1].split()[-1] == "1/61", "position 1/61")
    assert len(picker.screen.list_rows()) == ROWS - 4
    first = picker.screen.list_rows()[0]
    assert first.startswith("> a very long") and "…" in first and len(first) <= COLS, picker.screen.dump()
    picker.send("G")  # End: the last file, scrolled into view
    picker.wait_for(lambda s: s.lines()[1].split()[-1] == "61/61", "position 61/61")
    assert picker.screen.list_rows()[-1].startswith("> file59.txt"), picker.screen.dump()
    picker.send("\x1b[H")  # Home
    picker.wait_for(lambda s: s.lines()[1].split()[-1] == "1/61", "position 1/61")
    assert picker.screen.list_rows()[0].startswith("> a very long"), picker.screen.dump()
    assert not picker.screen.overflow
    picker.send("q")
    picker.finish()
    assert picker.status == CANCELLED


def test_not_a_terminal_is_a_usage_error(world):
    state, _ = world
    p = scopefs(state, "pick", "--app", APP, check=False, stdin=subprocess.DEVNULL)
    assert p.returncode == 64, p
    assert "terminal" in p.stderr, p.stderr
    assert grants(state) == []


def test_import_copies_a_file_into_the_inbox(world):
    state, _ = world
    picker = Picker(state, "--mode", "import")
    picker.wait_text("Import: choose a file to copy into the inbox of com.example.editor")
    open_local(picker)
    picker.highlight("archive/")
    picker.send(" ")  # a folder cannot be imported
    picker.wait_text("Import copies a file")
    picker.highlight("b.txt")
    picker.send("\r")
    picker.wait_text("Import b.txt for com.example.editor? [y/N]")
    picker.send("y")
    printed = picker.finish()
    assert picker.status == 0, printed
    inbox = f"tmp/{APP}-Inbox/b.txt"
    assert f"Container/{inbox}" in printed, printed
    assert (state / "containers" / APP / inbox).read_bytes() == b"b" * 1234
    assert grants(state) == []


def test_resize_redraws_and_sigterm_restores_the_terminal(world):
    """The picker redraws for a new size (SIGWINCH); a signal that ends it
    leaves the alternate screen and restores the terminal's settings."""
    termios = pytest.importorskip("termios")
    state, _ = world
    picker = Picker(state)
    picker.wait_text("local/")
    fd = picker.child.child_fd
    assert not termios.tcgetattr(fd)[3] & termios.ICANON, "the picker should put the terminal in raw mode"
    picker.child.setwinsize(30, 100)
    picker.screen = Screen(30, 100)
    picker.wait_for(
        lambda s: (
            s.lines()[0].startswith("Open:")
            and "Esc/q cancel" in s.lines()[29]
            and s.lines()[1].endswith("1/1")
            and len(s.lines()[1]) == 100
        ),
        "a 100x30 redraw",
    )
    os.kill(picker.child.pid, signal.SIGTERM)
    picker.child.expect(pexpect.EOF, timeout=10)
    lflag = termios.tcgetattr(fd)[3]
    assert lflag & termios.ICANON and lflag & termios.ECHO, "terminal left in raw mode"
    assert (picker.child.before or "").endswith("\x1b[?1049l")
    picker.child.close()
    assert picker.child.signalstatus == signal.SIGTERM


COLOR_SGR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
def test_no_color_means_no_colour(world, no_color):
    """Issue 19: with NO_COLOR set (no-color.org) the picker sends no colour
    (SGR 30-49, 90-107), only reverse video and bold; without it, it does."""
    state, _ = world
    picker = Picker(state, env_extra={"NO_COLOR": "1"} if no_color else None)
    open_local(picker)
    picker.send(ESC)
    picker.finish()
    coloured = COLOR_SGR.findall(picker.screen.transcript)
    assert bool(coloured) != no_color, coloured[:5]
    assert "\x1b[7m" in picker.screen.transcript, "the selection is no longer marked"


def test_dumb_terminal_is_a_usage_error(world):
    """Issue 19, SPEC S34: TERM=dumb cannot show a full-screen picker: exit
    64 with a message naming TERM and the commands to use instead, and no
    escape sequences written."""
    state, _ = world
    picker = Picker(state, env_extra={"TERM": "dumb"})
    picker.child.expect(pexpect.EOF, timeout=20)
    printed = picker.child.before or ""
    picker.child.close()
    assert picker.child.exitstatus == 64, printed
    assert "TERM=dumb" in printed and "scopefs open" in printed, printed
    assert "\x1b[" not in printed, repr(printed)


def test_types_start_folder_and_granted_marks(world):
    """Issue 17: `pick --type public.image --start local:Projects/Novel`
    starts in that folder; files of other types are dimmed and refused when
    chosen; an item the app already has is marked (granted)."""
    state, provider = world
    (provider / "Projects" / "Novel" / "cover.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    scopefs(state, "grant", APP, "local:Projects/Novel/cover.png")
    picker = Picker(state, "--type", "public.image", "--start", "local:Projects/Novel")
    picker.wait_for(lambda s: s.lines()[1].startswith("local:Projects/Novel"), "the start folder")
    rows = {name: row for name, row in zip(picker.screen.names(), picker.screen.list_rows(), strict=False)}
    assert "(granted)" in rows["cover.png"] and "(granted)" not in rows["chapter1.txt"], picker.screen.dump()
    # The rows may arrive in more than one write: wait for the dimmed one.
    picker.wait_for(lambda s: "\x1b[2m" in s.transcript, "a dimmed row")
    picker.highlight("chapter1.txt")
    picker.send(" ")
    picker.wait_text("chapter1.txt is not of a type asked for (public.image)")
    picker.send(ESC)
    picker.finish()
    assert picker.status == CANCELLED


def test_multiple_selection_across_folders(world):
    """Issue 17 (`allowsMultipleSelection`): with --multiple, Space toggles
    items in and out of the selection, which survives browsing other
    folders; Enter on a file confirms them all and each is opened (grant
    and reference), exactly as one at a time."""
    state, _ = world
    picker = Picker(state, "--multiple")
    open_local(picker)
    picker.highlight("a.txt")
    picker.send(" ")
    picker.wait_for(lambda s: "[selected]" in s.list_rows()[s.names().index("a.txt")], "a.txt selected")
    picker.highlight("b.txt")
    picker.send("s")
    picker.wait_text("2 selected")
    picker.send(" ")  # b.txt toggled off again
    picker.wait_text("1 selected")
    assert "[selected]" not in picker.screen.list_rows()[picker.screen.names().index("b.txt")], picker.screen.dump()
    picker.highlight("Projects/")
    picker.send("\r")  # Enter on a folder still opens it
    picker.wait_for(lambda s: s.names() == ["Novel/"], "Projects")
    picker.send(RIGHT)
    picker.wait_for(lambda s: s.names() == ["chapter1.txt"], "Novel")
    picker.send(" ")
    picker.wait_text("2 selected")
    picker.send("\r")
    picker.wait_text("Open 2 items (a.txt, chapter1.txt) for com.example.editor? [y/N]")
    picker.send("y")
    printed = picker.finish()
    assert picker.status == 0, printed
    assert (
        "reference Container/Documents/a.txt" in printed and "reference Container/Documents/chapter1.txt" in printed
    ), printed
    assert sorted(grant_path(g) for g in grants(state)) == ["Projects/Novel/chapter1.txt", "a.txt"]
    documents = state / "containers" / APP / "Documents"
    assert sorted(p.name for p in documents.iterdir()) == ["a.txt", "chapter1.txt"]


def test_multiple_import_refuses_folders_and_dimmed_files(world):
    """Issue 17: --multiple --mode import copies every toggled file into the
    inbox; a folder, or a file of a type not asked for, cannot be toggled."""
    state, provider = world
    (provider / "cover.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    picker = Picker(state, "--multiple", "--mode", "import", "--type", "public.plain-text")
    open_local(picker)
    picker.highlight("archive/")
    picker.send(" ")
    picker.wait_text("Import copies files: choose files.")
    picker.highlight("cover.png")
    picker.send(" ")
    picker.wait_text("cover.png is not of a type asked for (public.plain-text)")
    for name in ("a.txt", "C.txt"):
        picker.highlight(name)
        picker.send(" ")
    picker.wait_text("2 selected")
    picker.send("c")
    picker.wait_text("Import 2 items (a.txt, C.txt) for com.example.editor? [y/N]")
    picker.send("y")
    printed = picker.finish()
    assert picker.status == 0, printed
    inbox = state / "containers" / APP / "tmp" / f"{APP}-Inbox"
    assert sorted(p.name for p in inbox.iterdir()) == ["C.txt", "a.txt"], printed
    assert grants(state) == []


def test_multiple_move_places_several_container_items_in_one_folder(world):
    """Issue 17 (`forExporting: [URL]`): with --multiple, move toggles
    several items of the container, then asks once for the destination
    folder; every item lands there, whole, and leaves the container."""
    state, provider = world
    documents = state / "containers" / APP / "Documents"
    documents.mkdir(parents=True, exist_ok=True)
    (documents / "one.txt").write_text("first\n")
    (documents / "two.txt").write_text("second\n")
    (documents / "stay.txt").write_text("kept\n")
    picker = Picker(state, "--mode", "move", "--multiple")
    picker.wait_text("Move: choose items of the container of com.example.editor")
    picker.highlight("Documents/")
    picker.send("\r")
    picker.wait_for(lambda s: "one.txt" in s.names(), "Documents")
    for name in ("one.txt", "two.txt"):
        picker.highlight(name)
        picker.send(" ")
    picker.wait_text("2 selected")
    picker.send("c")
    picker.wait_text("Move 2 items (one.txt, two.txt): choose a destination folder")
    open_local(picker)
    picker.highlight("Projects/")
    picker.send("s")
    picker.wait_text("Move 2 items (one.txt, two.txt) to local:Projects? [y/N]")
    picker.send("y")
    printed = picker.finish()
    assert picker.status == 0, printed
    assert (provider / "Projects" / "one.txt").read_text() == "first\n", printed
    assert (provider / "Projects" / "two.txt").read_text() == "second\n", printed
    assert sorted(p.name for p in documents.iterdir() if p.name.endswith(".txt")) == [
        "one.txt",
        "stay.txt",
        "two.txt",
    ], "moved items leave a reference stub in the container"
    assert sorted(grant_path(g) for g in grants(state)) == ["Projects/one.txt", "Projects/two.txt"]
