"""The terminal picker's test tools (SPEC S21): a tiny ANSI screen, a
process in a pty read through it (`Terminal`; `Picker` for `scopefs pick`),
and the owner's commands the picker tests check with. A helper module:
test_picker.py, test_pick_requests.py (the agent's picker) and
test_names_bytes.py import it, and none of them imports another test module.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

# `make deps` installs pexpect; a missing one is a failure, not a skip.
import pexpect

BIN = os.environ.get("SCOPEFS_BIN", str(Path(__file__).resolve().parents[2] / ".build" / "debug" / "scopefs"))
APP = "com.example.editor"
ROWS, COLS = 24, 80
CANCELLED = 1
CRASH_MARKERS = ("Fatal error", "Stack dump", "Current stack trace", "Program crashed", "Segmentation fault")

UP, DOWN, RIGHT, LEFT, ESC = "\x1b[A", "\x1b[B", "\x1b[C", "\x1b[D", "\x1b"


class Screen:
    """Just enough of a terminal for the picker's output: CUP, ED, EL, SGR
    and private modes; printable text at the cursor."""

    CSI = re.compile(r"\x1b\[([?0-9;]*)([@-~])")
    PARTIAL = re.compile(r"\x1b(\[[?0-9;]*)?\Z")

    def __init__(self, rows: int = ROWS, cols: int = COLS):
        self.rows, self.cols = rows, cols
        self.grid = [[" "] * cols for _ in range(rows)]
        self.row = self.col = 0
        self.pending = ""
        self.transcript = ""
        self.overflow = False  # text written past the last column

    def feed(self, data: str):
        self.transcript += data
        text, self.pending = self.pending + data, ""
        i = 0
        while i < len(text):
            ch = text[i]
            if ch == "\x1b":
                match = self.CSI.match(text, i)
                if not match:
                    if self.PARTIAL.match(text, i):
                        self.pending = text[i:]
                        return
                    i += 1
                    continue
                self._csi(*match.groups())
                i = match.end()
                continue
            if ch == "\r":
                self.col = 0
            elif ch == "\n":
                self.row = min(self.row + 1, self.rows - 1)
            elif ch >= " ":
                if self.col < self.cols:
                    self.grid[self.row][self.col] = ch
                else:
                    self.overflow = True
                self.col += 1
            i += 1

    def _csi(self, params: str, final: str):
        if final == "H":
            numbers = [int(p) if p else 1 for p in params.split(";")] if params else []
            row, col = (numbers + [1, 1])[:2]
            self.row, self.col = min(row, self.rows) - 1, min(col, self.cols) - 1
        elif final == "J" and params == "2":
            self.grid = [[" "] * self.cols for _ in range(self.rows)]
        elif final == "K":
            for x in range(min(self.col, self.cols), self.cols):
                self.grid[self.row][x] = " "

    def lines(self) -> list[str]:
        return ["".join(row).rstrip() for row in self.grid]

    def list_rows(self) -> list[str]:
        """The list: rows 2..ROWS-3, without trailing blanks."""
        rows = self.lines()[2 : self.rows - 2]
        while rows and not rows[-1].strip():
            rows.pop()
        return rows

    def names(self) -> list[str]:
        """Names in the list (folders end with /), in screen order."""
        return [re.split(r"\s{2,}", row[2:].strip())[0] for row in self.list_rows()]

    def cursor_index(self) -> int:
        return next(i for i, row in enumerate(self.list_rows()) if row.startswith("> "))

    def dump(self) -> str:
        return "\n".join(f"{i:2}|{line}" for i, line in enumerate(self.lines()))


class Terminal:
    """A process in an 80x24 pty, read through a `Screen`: the picker, or
    the agent showing it."""

    def __init__(self, child: pexpect.spawn):
        self.child = child
        self.screen = Screen()
        self.status: int | None = None

    def wait_for(self, predicate, what: str, timeout: float = 10):
        deadline = time.monotonic() + timeout
        while not predicate(self.screen):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out waiting for {what}; screen:\n{self.screen.dump()}")
            try:
                self.screen.feed(self.child.read_nonblocking(4096, timeout=min(0.2, remaining)))
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                if predicate(self.screen):
                    return
                raise AssertionError(
                    f"picker exited while waiting for {what}; output:\n"
                    f"{self.screen.transcript!r}\nscreen:\n{self.screen.dump()}"
                )

    def wait_text(self, text: str, timeout: float = 10):
        self.wait_for(lambda s: any(text in line for line in s.lines()), repr(text), timeout)

    def send(self, keys: str):
        self.child.send(keys)

    def highlight(self, name: str):
        """Moves the cursor to `name` with j/k (and the arrow keys), waiting
        for each step to show."""
        self.wait_for(lambda s: name in s.names(), f"{name} listed")
        target = self.screen.names().index(name)
        step = 0
        while (current := self.screen.cursor_index()) != target:
            down = current < target
            # Alternate letters and arrows, so that both are exercised.
            self.send(("j" if down else "k") if step % 2 == 0 else (DOWN if down else UP))
            step += 1
            expected = current + (1 if down else -1)
            self.wait_for(lambda s, expected=expected: s.cursor_index() == expected, f"cursor on row {expected}")

    def finish(self, timeout: float = 20) -> str:
        """Waits for the exit; returns what was printed after the picker
        left the alternate screen."""
        self.child.expect(pexpect.EOF, timeout=timeout)
        self.screen.feed(self.child.before or "")
        self.child.close()
        self.status = self.child.exitstatus
        transcript = self.screen.transcript
        assert not any(marker in transcript for marker in CRASH_MARKERS), transcript
        assert "\x1b[?1049l" in transcript, "the picker did not leave the alternate screen"
        return transcript.rsplit("\x1b[?1049l", 1)[1]


class Picker(Terminal):
    """A `scopefs pick` process in an 80x24 pty."""

    def __init__(self, state: Path, *args: str, env_extra: dict | None = None):
        env = {k: v for k, v in os.environ.items() if k not in ("SCOPEFS_STATE", "NO_COLOR")}
        env.update(TERM="xterm-256color", LANG="C.UTF-8")
        env.update(env_extra or {})
        super().__init__(
            pexpect.spawn(
                BIN,
                ["--state", str(state), "pick", "--app", APP, *args],
                dimensions=(ROWS, COLS),
                env=env,
                encoding="utf-8",
                codec_errors="replace",
                timeout=15,
            )
        )


def scopefs(state: Path, *args: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    p = subprocess.run([BIN, "--state", str(state), *args], capture_output=True, text=True, timeout=30, **kwargs)
    if check:
        assert p.returncode == 0, f"scopefs {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def grants(state: Path) -> list[dict]:
    data = json.loads(scopefs(state, "privacy", APP, "--json").stdout)
    found: list[dict] = []

    def walk(value):
        if isinstance(value, dict):
            if "provider" in value and any(k in value for k in ("path", "relativePath", "item")):
                found.append(value)
            for child in value.values():
                walk(child)
        elif isinstance(value, list):
            for child in value:
                walk(child)

    walk(data)
    return found


def grant_path(grant: dict) -> str:
    return grant.get("relativePath", grant.get("path", ""))
