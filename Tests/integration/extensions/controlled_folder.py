#!/usr/bin/env python3
"""The folder example with switches a test can flip (Tests/integration).

    controlled_folder.py ROOT CONTROL

serves ROOT as docs/examples/extensions/folder.py does, and before every
request looks at files in CONTROL, which the test writes:

- ``offline``: every request but ``initialize`` and ``shutdown`` fails with
  ``unreachable`` (the store is down, the network is gone);
- ``slow-fetch``: a number of seconds; each ``fetch`` takes that long,
  sending ``$/progress`` and honouring ``$/cancel`` meanwhile;
- ``stall-fetch``: ``fetch`` never answers and ignores ``$/cancel`` (a hung
  extension; the daemon's stall limit must end the app's wait);
- ``slow-modify``: a number of seconds each ``modify`` waits before it
  writes (a test kills the extension meanwhile);
- ``linger-modify``: a number of seconds each ``modify`` waits after it
  wrote, before it answers (a test kills the daemon meanwhile: the store
  has the edit, the daemon never heard);
- ``duplicate-id``: each listing of a folder with a file gives that
  file's id a second time, as ``twin-of-NAME`` (an extension's bug);
- ``vanish``: a file name; ``item`` and ``fetch`` of a file of that name
  answer ``noSuchItem`` (the store lost it, its listing does not know yet);
- ``frozen-changes``: ``changes`` answers that nothing changed, with the
  anchor it was given (the store's change feed lags behind its items: only
  ``item`` and ``fetch`` tell of an edit);
- ``crash`` (read at start): the process exits with status 1 before it
  answers anything (a crash loop: the provider ends ``failed``);
- ``hostile-thumbnail``: ``text``, ``symlink``, ``big`` or ``outside``: each
  ``thumbnail`` answer stages a file that is not a PNG, a symlink to a PNG,
  a PNG of 70,000 bytes, or names a file outside the staging folder
  (SPEC S50: the daemon refuses each, with an event);
- ``streams`` (read once, at ``initialize``): the extension declares
  ``streamsFetch``; each ``fetch`` of more than 1 MiB then stages its first
  half, names it in ``$/progress`` (``staged``) and holds the rest until
  ``release-fetch`` exists (at most 30 s), then stages and answers;

and appends one line per request to ``CONTROL/calls`` ("METHOD ID"), so
that a test can tell that a revoked or unscoped app caused no traffic.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "docs" / "examples" / "extensions"))
sys.path.insert(0, str(ROOT / "clients" / "python"))

from folder import FolderExtension  # noqa: E402 - the example sits in docs/examples/extensions
from scopefs_extension import Cancelled, Changes, Fetched, NoSuchItem, Thumbnail, Unreachable, run  # noqa: E402


class ControlledFolder(FolderExtension):
    name = "controlled-folder"

    def __init__(self, root: str, control: str):
        super().__init__(root)
        self.control = Path(control)

    def _switch(self, name: str) -> str | None:
        try:
            return (self.control / name).read_text().strip()
        except OSError:
            return None

    def _note(self, method: str, identifier: str = "") -> None:
        with open(self.control / "calls", "a") as calls:
            calls.write(f"{method} {identifier}\n")
        if self._switch("offline") is not None:
            raise Unreachable("the test took the store offline")

    def capabilities(self):
        capabilities = super().capabilities()
        if self._switch("streams") is not None:
            capabilities["streamsFetch"] = True
        return capabilities

    def _streamed_fetch(self, identifier, version, byte_range, request):
        """A fetch whose first half readers get while the rest is held."""
        path = self._path_of(identifier)
        current = self._item_at(path, None)
        offset, length = self.fetch_range(current, version, byte_range)
        fd, staged = self.staging_file()
        with open(path, "rb") as source, os.fdopen(fd, "wb") as out:
            source.seek(offset)
            half = length // 2
            out.write(source.read(half))
            out.flush()
            with open(self.control / "calls", "a") as calls:
                calls.write(f"streamed {identifier} {offset} {half}\n")
            request.progress(half, length, staged=(staged, offset))
            deadline = time.monotonic() + 30
            while not (self.control / "release-fetch").exists() and time.monotonic() < deadline:
                if request.cancelled:
                    with open(self.control / "calls", "a") as calls:
                        calls.write(f"cancelled {identifier}\n")
                    raise Cancelled("the daemon cancelled the fetch")
                request.progress(half, length, staged=(staged, offset))  # alive: no stall
                time.sleep(0.2)
            out.write(source.read(length - half))
        return Fetched(path=staged, version=current.content_version, offset=offset, length=length)

    def _vanished(self, identifier) -> None:
        name = self._switch("vanish")
        if name and os.path.basename(self._path_of(identifier)) == name:
            raise NoSuchItem(f"the store lost {name}")

    def item(self, identifier):
        self._note("item", identifier)
        self._vanished(identifier)
        return super().item(identifier)

    def enumerate_items(self, container, page, page_size):
        self._note("list", container)
        items, next_page = super().enumerate_items(container, page, page_size)
        first = next((item for item in items if item.kind == "file"), None)
        if self._switch("duplicate-id") is not None and first is not None:
            items = [*items, dataclasses.replace(first, name=f"twin-of-{first.name}")]
        return items, next_page

    def current_anchor(self):
        self._note("currentAnchor")
        return super().current_anchor()

    def enumerate_changes(self, anchor):
        self._note("changes")
        if self._switch("frozen-changes") is not None:
            return Changes(updated=[], deleted=[], anchor=anchor)
        return super().enumerate_changes(anchor)

    def fetch_contents(self, identifier, version, byte_range, request):
        self._note("fetch", f"{identifier} {byte_range[0]} {byte_range[1]}" if byte_range else identifier)
        self._vanished(identifier)
        if self._switch("stall-fetch") is not None:
            time.sleep(3600)
        if self._switch("streams") is not None and (byte_range is None or byte_range[1] > 1 << 20):
            return self._streamed_fetch(identifier, version, byte_range, request)
        slow = self._switch("slow-fetch")
        if slow:
            deadline = time.monotonic() + float(slow)
            while time.monotonic() < deadline:
                if request.cancelled:
                    with open(self.control / "calls", "a") as calls:
                        calls.write(f"cancelled {identifier}\n")
                    raise Cancelled("the daemon cancelled the fetch")
                request.progress(0, 1)
                time.sleep(0.05)
        fetched = super().fetch_contents(identifier, version, byte_range, request)
        linger = self._switch("linger-fetch")
        if linger:
            # The bytes of this version are staged; the answer comes late
            # (the remote may change meanwhile, as a store that serves old
            # versions by id does).
            with open(self.control / "calls", "a") as calls:
                calls.write(f"staged {identifier}\n")
            time.sleep(float(linger))
        if self._switch("short-fetch") is not None:
            # All but the last 4 KiB asked for, with an honest length: the
            # rest is never there (issue 47, finding 5).
            short = max(0, fetched.length - 4096)
            os.truncate(fetched.path, short)
            fetched = dataclasses.replace(fetched, length=short)
        return fetched

    def fetch_thumbnail(self, identifier, size, request):
        self._note("thumbnail", identifier)
        hostile = self._switch("hostile-thumbnail")
        if not hostile:
            return super().fetch_thumbnail(identifier, size, request)
        fd, staged = self.staging_file()
        os.close(fd)
        png = b"\x89PNG\r\n\x1a\n"
        if hostile == "outside":
            os.unlink(staged)
            return Thumbnail(path="/etc/passwd", length=os.path.getsize("/etc/passwd"))
        if hostile == "symlink":
            real = staged + ".real"
            Path(real).write_bytes(png + b"\0" * 100)
            os.unlink(staged)
            os.symlink(real, staged)
            return Thumbnail(path=staged, length=len(png) + 100)
        data = b"not a picture at all\n" if hostile == "text" else png + b"\0" * (70000 - len(png))
        Path(staged).write_bytes(data)
        return Thumbnail(path=staged, length=len(data))

    def create_item(self, parent, name, kind, mtime, mode, target, contents_path, request):
        self._note("create", name)
        item = super().create_item(parent, name, kind, mtime, mode, target, contents_path, request)
        if (self.control / "lose-create-answer").exists():
            # The store took it, and the answer is lost (once): the daemon
            # sends the create again (issue 47, finding 7).
            (self.control / "lose-create-answer").unlink()
            raise Unreachable("the answer to create was lost")
        return item

    def modify_item(self, identifier, base_version, fields, contents_path, request):
        self._note("modify", identifier)
        slow = self._switch("slow-modify")
        if slow:
            time.sleep(float(slow))
        answer = super().modify_item(identifier, base_version, fields, contents_path, request)
        linger = self._switch("linger-modify")
        if linger:
            with open(self.control / "calls", "a") as calls:
                calls.write(f"modified {identifier}\n")
            time.sleep(float(linger))
        return answer

    def delete_item(self, identifier, base_version, request):
        self._note("delete", identifier)
        return super().delete_item(identifier, base_version, request)


if __name__ == "__main__":
    if len(sys.argv) != 3 or not os.path.isdir(sys.argv[1]) or not os.path.isdir(sys.argv[2]):
        print("usage: controlled_folder.py ROOT CONTROL (existing folders)", file=sys.stderr)
        sys.exit(2)
    if (Path(sys.argv[2]) / "crash").exists():
        sys.exit(1)
    run(ControlledFolder(sys.argv[1], sys.argv[2]))
