#!/usr/bin/env python3
"""The smallest ScopeFS provider extension: a local folder (docs/PROVIDERS.md).

    folder.py ROOT

serves the tree under ROOT through the extension protocol, with the Python
SDK (clients/python/scopefs_extension.py). It is the example a third party
reads first, and one of the conformance suite's subjects
(Tests/extensions/test_conformance.py).

Identity: an item's id is its inode number ("i1234"), the root's "root".
An inode stays the same across renames and moves inside ROOT, made here or
behind the extension's back, so the daemon's bookmarks and references keep
working (Apple's rule: an identifier survives a rename). A persisted
path -> id map would lose an item renamed by another program. The price:
finding the path of an id needs an index, kept in memory and rebuilt by a
walk on a miss; and a deleted file's inode may be reused by a new file, which
then has the old id (its versions differ, so the daemon sees a changed item,
not stale content). Contents are written in place for the same reason: a
rename over the file would give it a new inode.

Versions: the content version is "mtime_ns:size:inode", the metadata
version "parent/name:mode:mtime_ns"; both change when what they describe
changes. Conditional writes compare them right before writing (a race
window of one system call: acceptable for an example, documented).

Changes: by comparing snapshots of the whole tree (``SnapshotChanges``,
``changes: "poll"``): fine for thousands of items, not for millions.
Symbolic links are served as symlink items and never followed, so nothing
outside ROOT is ever reached.

Previews (protocol 1.2, ``thumbnail``): a preview the saving app wrote
(``thumbnailPath`` of ``create`` and ``modify``) is kept in
``ROOT/.scopefs-thumbnails/ID.png``, a folder the listings leave out; a file
without one gets a generated one, an 8x8 PNG of a colour taken from its
content version, so that every file has a preview and none costs a read.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import struct
import sys
import threading
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "clients" / "python"))

from scopefs_extension import (  # noqa: E402 - the SDK sits in clients/python
    ROOT_ID,
    Conflict,
    Exists,
    Fetched,
    InvalidParams,
    Item,
    NoSuchItem,
    ReplicatedExtension,
    SnapshotChanges,
    Thumbnail,
    error_from_os,
    run,
)

PAGE_SIZE = 500
# Where saved previews are kept, left out of every listing.
THUMBNAILS = ".scopefs-thumbnails"


def generated_png(seed: str, side: int = 8) -> bytes:
    """A PNG of ``side`` x ``side`` pixels of one colour taken from ``seed``."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    colour = hashlib.sha256(seed.encode()).digest()[:3]
    rows = b"".join(b"\0" + colour * side for _ in range(side))
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


class FolderExtension(ReplicatedExtension):
    name = "folder"
    version = "1.0"

    def __init__(self, root: str):
        super().__init__()
        self.root = os.path.realpath(root)
        self.root_ino = os.lstat(self.root).st_ino
        self._paths: dict[str, str] = {ROOT_ID: self.root}
        self._lock = threading.Lock()
        self._changes = SnapshotChanges(self._snapshot)

    def capabilities(self) -> dict:
        return {
            "changes": "poll",
            "ranges": True,
            "create": True,
            "modify": True,
            "delete": True,
            "rename": True,
            "conditionalWrites": True,
            "maxPageSize": PAGE_SIZE,
            "settableFields": ["name", "parent", "mtime", "mode"],
            "symlinks": True,
            "renameKeepsId": True,
            "thumbnails": True,
        }

    # -- ids and paths -------------------------------------------------------

    def _id_of(self, path: str, st: os.stat_result) -> str:
        identifier = ROOT_ID if st.st_ino == self.root_ino else f"i{st.st_ino}"
        with self._lock:
            self._paths[identifier] = path
        return identifier

    def _path_of(self, identifier: str) -> str:
        with self._lock:
            path = self._paths.get(identifier)
        if path is not None and self._still(identifier, path):
            return path
        self._snapshot()  # rebuilds the index
        with self._lock:
            path = self._paths.get(identifier)
        if path is None or not self._still(identifier, path):
            raise NoSuchItem(f"no item {identifier!r}")
        return path

    def _folder_path(self, identifier: str) -> str:
        """The path of a folder id; a symlink is not a folder (never followed)."""
        path = self._path_of(identifier)
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise InvalidParams(f"{identifier!r} is not a folder")
        return path

    def _still(self, identifier: str, path: str) -> bool:
        try:
            st = os.lstat(path)
        except OSError:
            return False
        return identifier == (ROOT_ID if st.st_ino == self.root_ino else f"i{st.st_ino}")

    def _item_at(self, path: str, parent: str | None) -> Item:
        st = os.lstat(path)
        identifier = self._id_of(path, st)
        if stat.S_ISDIR(st.st_mode):
            kind = "folder"
        elif stat.S_ISLNK(st.st_mode):
            kind = "symlink"
        elif stat.S_ISREG(st.st_mode):
            kind = "file"
        else:
            raise NoSuchItem("not a file, folder or symlink")  # devices, sockets: not served
        name = "" if identifier == ROOT_ID else os.path.basename(path)
        if parent is None and identifier != ROOT_ID:
            parent_path = os.path.dirname(path)
            parent = self._id_of(parent_path, os.lstat(parent_path))
        mode = stat.S_IMODE(st.st_mode)
        return Item(
            id=identifier,
            parent=None if identifier == ROOT_ID else parent,
            name=name,
            kind=kind,
            size=st.st_size if kind != "folder" else 0,
            mtime=st.st_mtime_ns / 1e9,
            mode=mode,
            content_version=f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}" if kind != "folder" else "folder",
            metadata_version=f"{parent}/{name}:{mode:o}:{st.st_mtime_ns}",
            target=os.readlink(path) if kind == "symlink" else None,
            thumbnail=True if kind == "file" else None,
        )

    def _children(self, folder_path: str, folder_id: str) -> list:
        items = []
        with os.scandir(folder_path) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if folder_id == ROOT_ID and entry.name == THUMBNAILS:
                    continue
                try:
                    items.append(self._item_at(entry.path, folder_id))
                except (NoSuchItem, FileNotFoundError):
                    continue  # gone meanwhile, or a kind not served
        return items

    def _snapshot(self) -> dict:
        tree = {ROOT_ID: self._item_at(self.root, None)}
        pending = [(self.root, ROOT_ID)]
        while pending:
            path, identifier = pending.pop()
            try:
                children = self._children(path, identifier)
            except OSError:
                continue
            for child in children:
                tree[child.id] = child
                if child.kind == "folder":
                    pending.append((os.path.join(path, child.name), child.id))
        return tree

    # -- reading -------------------------------------------------------------

    def item(self, identifier: str) -> Item:
        try:
            return self._item_at(self._path_of(identifier), None)
        except OSError as error:
            raise error_from_os(error)

    def enumerate_items(self, container: str, page: str | None, page_size: int) -> tuple:
        # The page token is the last name sent: stable while names come and go.
        children = self._children(self._folder_path(container), container)
        if page is not None:
            children = [child for child in children if child.name > page]
        chunk = children[:page_size]
        next_page = chunk[-1].name if len(children) > page_size else None
        return chunk, next_page

    def current_anchor(self) -> str:
        return self._changes.current_anchor()

    def enumerate_changes(self, anchor: str):
        return self._changes.changes(anchor)

    def fetch_contents(self, identifier, version, byte_range, request) -> Fetched:
        path = self._path_of(identifier)
        current = self._item_at(path, None)
        offset, length = self.fetch_range(current, version, byte_range)
        fd, staged = self.staging_file()
        try:
            with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as source, os.fdopen(fd, "wb") as out:
                source.seek(offset)
                copied = 0
                while copied < length:
                    request.check_cancelled()
                    block = source.read(min(1 << 20, length - copied))
                    if not block:
                        break
                    out.write(block)
                    copied += len(block)
                    request.progress(copied, length)
            if self._item_at(path, None).content_version != current.content_version:
                raise Conflict("the item changed while it was read")
        except BaseException:
            os.unlink(staged)
            raise
        return Fetched(path=staged, version=current.content_version, offset=offset, length=copied)

    def fetch_thumbnail(self, identifier, size, request) -> Thumbnail | None:
        current = self._item_at(self._path_of(identifier), None)
        if current.kind != "file":
            return None
        try:
            with open(os.path.join(self.root, THUMBNAILS, f"{identifier}.png"), "rb") as saved:
                data = saved.read()
        except FileNotFoundError:
            data = generated_png(current.content_version)
        fd, staged = self.staging_file()
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return Thumbnail(path=staged, length=len(data))

    def save_thumbnail(self, identifier, thumbnail_path, request) -> None:
        folder = os.path.join(self.root, THUMBNAILS)
        os.makedirs(folder, exist_ok=True)
        kept = os.path.join(folder, f"{identifier}.png")
        shutil.copyfile(thumbnail_path, kept + ".new")
        os.replace(kept + ".new", kept)

    # -- writing -------------------------------------------------------------

    def create_item(self, parent, name, kind, mtime, mode, target, contents_path, request) -> Item:
        folder = self._folder_path(parent)
        path = os.path.join(folder, name)
        try:
            if kind == "folder":
                os.mkdir(path, mode if mode is not None else 0o755)
            elif kind == "symlink":
                os.symlink(target, path)
            else:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                with os.fdopen(os.open(path, flags, 0o644), "wb") as out:
                    if contents_path is not None:
                        with open(contents_path, "rb") as source:
                            shutil.copyfileobj(source, out)
            if mode is not None and kind != "symlink":
                os.chmod(path, mode)
            if mtime is not None:
                os.utime(path, (mtime, mtime), follow_symlinks=False)
            return self._item_at(path, parent)
        except OSError as error:
            raise error_from_os(error)

    def modify_item(self, identifier, base_version, fields, contents_path, request) -> Item:
        path = self._path_of(identifier)
        current = self._item_at(path, None)
        if contents_path is not None and base_version["content"] != current.content_version:
            raise Conflict("the contents changed since the base version", data={"current": current.to_json()})
        if fields and base_version["metadata"] != current.metadata_version:
            raise Conflict("the metadata changed since the base version", data={"current": current.to_json()})
        try:
            if contents_path is not None:
                if current.kind != "file":
                    raise InvalidParams("only files have contents")
                # In place, so that the inode, and so the id, stays.
                with (
                    open(contents_path, "rb") as source,
                    os.fdopen(os.open(path, os.O_RDWR | os.O_NOFOLLOW), "r+b") as out,
                ):
                    out.truncate(0)
                    shutil.copyfileobj(source, out)
            if "name" in fields or "parent" in fields:
                if identifier == ROOT_ID:
                    raise InvalidParams("the root is not renamed")
                folder = self._folder_path(fields.get("parent", current.parent))
                destination = os.path.join(folder, fields.get("name", current.name))
                if destination != path:
                    if os.path.lexists(destination):
                        raise Exists(f"{fields.get('name', current.name)!r} exists")
                    os.rename(path, destination)
                    path = destination
            if "mode" in fields and current.kind != "symlink":
                os.chmod(path, fields["mode"])
            if "mtime" in fields:
                os.utime(path, (fields["mtime"], fields["mtime"]), follow_symlinks=False)
            return self._item_at(path, None)
        except OSError as error:
            raise error_from_os(error)

    def delete_item(self, identifier, base_version, request) -> None:
        if identifier == ROOT_ID:
            raise InvalidParams("the root is not deleted")
        path = self._path_of(identifier)
        current = self._item_at(path, None)
        if base_version["content"] != current.content_version:
            raise Conflict("the item changed since the base version", data={"current": current.to_json()})
        try:
            if current.kind == "folder":
                os.rmdir(path)
            else:
                os.unlink(path)
        except OSError as error:
            raise error_from_os(error)  # ENOTEMPTY: notEmpty


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: folder.py ROOT (an existing folder)", file=sys.stderr)
        sys.exit(2)
    run(FolderExtension(sys.argv[1]))
