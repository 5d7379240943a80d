#!/usr/bin/env python3
"""ScopeFS provider extension for any rclone remote (docs/PROVIDERS.md).

    scopefs_rclone.py            (options come in `initialize`)

Options (``initialize``'s ``options``, all strings):

- ``remote`` (required): a remote of the user's rclone configuration
  ("mydrive:") or a connection string (":sftp,host=h,user=u,pass=OBSCURED:").
  rclone reads its configuration from its usual place (RCLONE_CONFIG or
  ~/.config/rclone/rclone.conf); ScopeFS never sees or stores it.
- ``path``: the folder of the remote to serve (default: its root).
- ``rclone``: the rclone binary (default: ``rclone`` on PATH; Debian's is 1.60).
- ``hashes``: ``auto`` (default), ``on`` or ``off``: whether content
  versions hold the remote's hash. ``auto`` uses it where it is metadata
  the remote keeps (s3, drive, onedrive, dropbox...) and not where rclone
  must compute it by reading each file (SlowHash: sftp runs md5sum on the
  server, local reads the file), since every listing and every poll would
  read the whole tree; ``on`` pays that for the stronger versions.

How it talks to rclone: one ``rclone rcd`` per extension process, its
remote-control HTTP API on 127.0.0.1 with a random port, user and password
(rclone 1.60 has no unix socket for it), started at ``initialize``, started
again by the next call if it died, and ended with the extension (SIGTERM at
shutdown; the kernel's parent-death signal if the extension dies). An API call costs about 10 ms, a new rclone process
100-300 ms (start-up, configuration, connection), which a listing or a stat
cannot afford. Only ``fetch`` runs ``rclone cat --offset --count`` (the API
cannot read a range; rcd's object server cannot name a connection string
that holds "//"): a download is long next to 100 ms.

The mapping (docs/PROVIDERS.md "rclone"):

- Ids are paths: "/docs/a.txt" (relative to ``path``), the root "root".
  Most remotes have no stable id rclone shows (drive's and onedrive's are
  internal to their backends), so ``renameKeepsId`` is false: a renamed or
  moved item gets its new path as id, and the ids of a moved folder's
  descendants change too (``changes`` reports the old ones deleted and the
  new ones updated).
- Versions: content "size:modtime" plus the remote's first hash when it has
  one and ``hashes`` allows ("size:modtime:md5"); metadata "path:modtime".
  Without a hash, a remote whose modtimes are whole seconds (webdav, sftp)
  misses a change that keeps the size within the same second.
- Writes are check-then-write: rclone offers no If-Match, so ``modify`` and
  ``delete`` stat the item, compare its version with the base, then write.
  A change made elsewhere between the check and the write (a window of one
  stat plus the upload) is overwritten; ``conditionalWrites`` is false so the
  daemon says so. A name taken between ``create``'s check and its upload is
  overwritten the same way.
- Modes are not kept (0644, 0755); mtime is not settable (rclone's API has
  no touch, and many remotes keep upload times only). Symlinks: none.
- Changes by polling (``changes: "poll"``): each anchor names an in-memory
  snapshot of a recursive listing (the last 16); an anchor from before a
  restart is expired, and the daemon lists again. rclone's ChangeNotify
  (drive, onedrive, dropbox, box) is only reachable through ``rclone mount``
  or the VFS, not through the API's operations: a later version may use it.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))

from scopefs_extension import (  # noqa: E402 - the SDK sits in clients/python
    ROOT_ID,
    Cancelled,
    Conflict,
    Denied,
    Exists,
    ExtensionError,
    Fetched,
    InvalidParams,
    Item,
    NoSuchItem,
    NotAuthenticated,
    NotEmpty,
    NotSupported,
    Quota,
    ReplicatedExtension,
    SnapshotChanges,
    Thumbnail,
    Unreachable,
    name_problem,
    run,
)

PAGE_SIZE = 1000
# Previews (protocol 1.2): files beside the documents under a folder of the
# extension's own at the served path's top (.scopefs-thumbnails/PATH.png),
# which no listing shows; at most the protocol's 64 KiB is read of one.
THUMBNAILS = ".scopefs-thumbnails"
THUMBNAIL_LIMIT = 65536
# How long rcd gets to say where it listens, and an API call to answer.
START_TIMEOUT = 10
CALL_TIMEOUT = 120
# rclone's flags for every call: fail fast instead of retrying for minutes,
# so the daemon hears `unreachable` and applies its own back-off.
NETWORK_FLAGS = ["--contimeout", "10s", "--timeout", "60s", "--low-level-retries", "2"]
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the extension dies (Linux)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def error_from_rclone(message: str, status: int = 500) -> ExtensionError:
    """The protocol error for rclone's error text (its API has no codes)."""
    text = message.lower()
    if status == 404 or "not found" in text or "doesn't exist" in text or "no such file" in text:
        return NoSuchItem(message)
    if "directory not empty" in text:
        return NotEmpty(message)
    if any(word in text for word in ("401", "unauthorized", "authentication", "auth failed", "unable to authenticate")):
        return NotAuthenticated(message)
    if any(word in text for word in ("403", "forbidden", "permission denied", "access denied")):
        return Denied(message)
    if any(word in text for word in ("quota", "insufficient storage", "507", "no space")):
        return Quota(message)
    if any(
        word in text
        for word in ("connection refused", "no such host", "timeout", "i/o timeout", "couldn't connect", "dial tcp")
    ):
        return Unreachable(message)
    if "no route to host" in text or "network is unreachable" in text or "eof" in text:
        return Unreachable(message)
    return ExtensionError(message)


class RcdGone(Unreachable):
    """rcd itself did not answer (as opposed to the remote behind it)."""


class Rcd:
    """One `rclone rcd`: its API over HTTP on 127.0.0.1 with a random password."""

    def __init__(self, binary: str):
        self.user = "scopefs"
        self.password = secrets.token_urlsafe(24)
        # The password goes in the environment (rclone reads every flag as
        # RCLONE_FLAG_NAME), readable by this user only, not on the command
        # line, which any local user can read in /proc.
        self.process = subprocess.Popen(
            [binary, "rcd", "--rc-addr", "127.0.0.1:0", *NETWORK_FLAGS],
            env={**os.environ, "RCLONE_RC_USER": self.user, "RCLONE_RC_PASS": self.password},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        self.url = self._wait_for_address()
        # The rest of its log goes to ours (the daemon keeps stderr).
        threading.Thread(target=self._forward_log, daemon=True).start()
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        self._authorization = f"Basic {token}"

    def _wait_for_address(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT
        timer = threading.Timer(START_TIMEOUT, self.process.kill)
        timer.start()
        try:
            for raw in self.process.stderr:
                line = raw.decode("utf-8", "replace")
                found = re.search(r"Serving remote control on (http://127\.0\.0\.1:\d+)/", line)
                if found:
                    return found.group(1)
                print(f"rclone: {line.rstrip()}", file=sys.stderr)
                if time.monotonic() > deadline:
                    break
        finally:
            timer.cancel()
        raise Unreachable("rclone rcd did not start (is rclone installed?)")

    def _forward_log(self) -> None:
        for raw in self.process.stderr:
            print(f"rclone: {raw.decode('utf-8', 'replace').rstrip()}", file=sys.stderr)

    def call(self, method: str, **params) -> dict:
        request = urllib.request.Request(
            f"{self.url}/{method}",
            data=json.dumps(params).encode(),
            headers={"Content-Type": "application/json", "Authorization": self._authorization},
        )
        try:
            with urllib.request.urlopen(request, timeout=CALL_TIMEOUT) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            try:
                body = json.loads(error.read())
            except ValueError:
                body = {}
            raise error_from_rclone(str(body.get("error", error)), error.code) from None
        except OSError as error:
            raise RcdGone(f"rclone rcd: {error}") from None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def path_of(identifier: str) -> str:
    """The remote path of an id ("" for the root); a non-canonical id is unknown."""
    if identifier == ROOT_ID:
        return ""
    parts = identifier.split("/")
    if not identifier.startswith("/") or any(name_problem(part) for part in parts[1:]):
        raise NoSuchItem(f"no item {identifier!r}")
    return identifier[1:]


def id_of(path: str) -> str:
    return ROOT_ID if path == "" else "/" + path


class RcloneExtension(ReplicatedExtension):
    name = "rclone"
    version = "1.0"

    def __init__(self) -> None:
        super().__init__()
        self.rcd: Rcd | None = None
        self.fs = ""
        self.binary = "rclone"
        self.hash_type: str | None = None
        self.dir_move = False
        self._scratch = tempfile.mkdtemp(prefix="scopefs-rclone-")
        self._changes = SnapshotChanges(self._snapshot)

    def capabilities(self) -> dict:
        return {
            "changes": "poll",
            "ranges": True,
            "create": True,
            "modify": True,
            "delete": True,
            "rename": True,
            "conditionalWrites": False,
            "maxPageSize": PAGE_SIZE,
            "settableFields": ["name", "parent"],
            "symlinks": False,
            "renameKeepsId": False,
            "thumbnails": True,
        }

    # -- life cycle ----------------------------------------------------------

    def initialize(self, provider_id: str, staging_directory: str, options: dict) -> None:
        remote = options.get("remote")
        if not isinstance(remote, str) or not remote.endswith(":"):
            raise InvalidParams('option "remote" is a remote name or connection string ending in ":"')
        base = (options.get("path") or "").strip("/")
        self.fs = remote + base
        self.binary = options.get("rclone") or "rclone"
        try:
            self.rcd = Rcd(self.binary)
        except FileNotFoundError:
            raise InvalidParams(f"no rclone binary {self.binary!r}") from None
        self._rcd_lock = threading.Lock()
        root = self._rc("operations/stat", fs=self.fs, remote="").get("item")
        if root is None or not root.get("IsDir"):
            raise NoSuchItem(f"{self.fs!r} is not a folder")
        features = self._rc("operations/fsinfo", fs=self.fs)
        hashes = features.get("Hashes") or []
        wanted = options.get("hashes") or "auto"
        if wanted not in ("auto", "on", "off"):
            raise InvalidParams('option "hashes" is auto, on or off')
        slow = bool(features.get("Features", {}).get("SlowHash"))
        use_hash = wanted == "on" or (wanted == "auto" and not slow)
        self.hash_type = hashes[0] if hashes and use_hash else None
        self.dir_move = bool(features.get("Features", {}).get("DirMove"))

    def shutdown(self) -> None:
        if self.rcd is not None:
            self.rcd.stop()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def _rc(self, method: str, **params) -> dict:
        """One API call; an rcd that died (OOM killer, a crash) is started
        again, and a call it did not answer because it died is made again."""
        for attempt in (1, 2):
            with self._rcd_lock:
                if self.rcd.process.poll() is not None:
                    print(f"rclone rcd exited ({self.rcd.process.returncode}): starting it again", file=sys.stderr)
                    self.rcd = Rcd(self.binary)
                rcd = self.rcd
            try:
                return rcd.call(method, **params)
            except RcdGone:
                # A dying process may take a moment to be reapable.
                try:
                    rcd.process.wait(2)
                except subprocess.TimeoutExpired:
                    raise Unreachable("rclone rcd does not answer") from None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    # -- items ---------------------------------------------------------------

    def _list_options(self, **extra) -> dict:
        options = dict(extra)
        if self.hash_type is not None:
            options.update(showHash=True, hashTypes=[self.hash_type])
        return options

    def _item(self, entry: dict, path: str) -> Item:
        is_dir = bool(entry.get("IsDir"))
        size = 0 if is_dir else max(0, int(entry.get("Size", 0)))
        # rclone makes the root's time up (now) at each stat: not a change.
        modtime = "" if path == "" else str(entry.get("ModTime", ""))
        content = "folder" if is_dir else f"{size}:{modtime}"
        digest = (entry.get("Hashes") or {}).get(self.hash_type or "")
        if digest and not is_dir:
            content += f":{digest}"
        parent = None if path == "" else id_of(path.rpartition("/")[0])
        return Item(
            id=id_of(path),
            parent=parent,
            name="" if path == "" else path.rpartition("/")[2],
            kind="folder" if is_dir else "file",
            size=size,
            mtime=_seconds(modtime),
            mode=0o755 if is_dir else 0o644,
            content_version=content,
            metadata_version=f"{path}:{modtime}",
        )

    def _stat(self, path: str) -> Item | None:
        entry = self._rc("operations/stat", fs=self.fs, remote=path, opt=self._list_options()).get("item")
        return None if entry is None else self._item(entry, path)

    def _existing(self, identifier: str) -> Item:
        item = self._stat(path_of(identifier))
        if item is None:
            raise NoSuchItem(f"no item {identifier!r}")
        return item

    def _folder(self, identifier: str) -> str:
        item = self._existing(identifier)
        if item.kind != "folder":
            raise InvalidParams(f"{identifier!r} is not a folder")
        return path_of(identifier)

    def _children(self, folder: str) -> list:
        entries = self._rc("operations/list", fs=self.fs, remote=folder, opt=self._list_options())["list"]
        items = []
        for entry in entries:
            name = entry.get("Name", "")
            if name_problem(name) or (not folder and name == THUMBNAILS):
                continue  # not a valid name, or the previews' folder: not served
            items.append(self._item(entry, f"{folder}/{name}" if folder else name))
        return sorted(items, key=lambda item: item.name.encode())

    def _snapshot(self) -> dict:
        tree = {ROOT_ID: self._existing(ROOT_ID)}
        options = self._list_options(recurse=True)
        for entry in self._rc("operations/list", fs=self.fs, remote="", opt=options)["list"]:
            path = entry.get("Path", "")
            if any(name_problem(part) for part in path.split("/")) or path.split("/")[0] == THUMBNAILS:
                continue
            item = self._item(entry, path)
            tree[item.id] = item
        return tree

    # -- reading -------------------------------------------------------------

    def item(self, identifier: str) -> Item:
        return self._existing(identifier)

    def enumerate_items(self, container: str, page: str | None, page_size: int) -> tuple:
        # The page token is the last name sent (as bytes: names sort that way).
        children = self._children(self._folder(container))
        if page is not None:
            children = [child for child in children if child.name.encode() > page.encode()]
        chunk = children[:page_size]
        return chunk, (chunk[-1].name if len(children) > page_size else None)

    def current_anchor(self) -> str:
        return self._changes.current_anchor()

    def enumerate_changes(self, anchor: str):
        return self._changes.changes(anchor)

    def fetch_contents(self, identifier, version, byte_range, request) -> Fetched:
        current = self._existing(identifier)
        offset, length = self.fetch_range(current, version, byte_range)
        fd, staged = self.staging_file()
        try:
            with os.fdopen(fd, "wb") as out:
                if length > 0:
                    self._cat(path_of(identifier), offset, length, out, request)
            copied = os.path.getsize(staged)
            if copied != length or self._existing(identifier).content_version != current.content_version:
                raise Conflict("the item changed while it was read")
        except BaseException:
            os.unlink(staged)
            raise
        return Fetched(path=staged, version=current.content_version, offset=offset, length=copied)

    def _cat(self, path: str, offset: int, length: int, out, request) -> None:
        """``rclone cat --offset --count`` into ``out``; killed on $/cancel."""
        log = tempfile.TemporaryFile(dir=self._scratch)
        command = [self.binary, "cat", "--offset", str(offset), "--count", str(length), *NETWORK_FLAGS]
        process = subprocess.Popen(
            [*command, self._sub(path)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=log,
            preexec_fn=_die_with_parent,
        )
        while True:
            try:
                status = process.wait(0.05)
                break
            except subprocess.TimeoutExpired:
                if request.cancelled:
                    process.kill()
                    process.wait()
                    raise Cancelled("the daemon cancelled the download") from None
                request.progress(out.tell() if out.seekable() else 0, length)
        if status != 0:
            log.seek(0)
            raise error_from_rclone(log.read().decode("utf-8", "replace").strip() or f"rclone cat exited {status}")
        request.progress(length, length)

    def fetch_thumbnail(self, identifier, size, request):
        """The preview file beside the document, if the saving app left one
        (at most 64 KiB of it read; the document itself never)."""
        if identifier == ROOT_ID:
            return None
        preview = f"{THUMBNAILS}/{path_of(identifier)}.png"
        try:
            found = self._stat(preview)
        except NoSuchItem:
            return None  # no previews' folder yet
        if found is None or found.kind != "file" or found.size > THUMBNAIL_LIMIT or found.size == 0:
            return None
        fd, staged = self.staging_file()
        try:
            with os.fdopen(fd, "wb") as out:
                self._cat(preview, 0, found.size, out, request)
        except BaseException:
            os.unlink(staged)
            raise
        return Thumbnail(path=staged, length=os.path.getsize(staged))

    def save_thumbnail(self, identifier, thumbnail_path, request) -> None:
        self._upload(thumbnail_path, f"{THUMBNAILS}/{path_of(identifier)}.png")

    # -- writing -------------------------------------------------------------

    def _upload(self, source: str | None, path: str) -> None:
        """Copies a local file to ``path`` (an empty one when ``source`` is None)."""
        if source is None:
            fd, source = tempfile.mkstemp(dir=self._scratch)
            os.close(fd)
        try:
            self._rc(
                "operations/copyfile",
                srcFs=":local:" + os.path.dirname(os.path.abspath(source)),
                srcRemote=os.path.basename(source),
                dstFs=self.fs,
                dstRemote=path,
                # Copy even when size and time match what is there: without
                # a hash, rclone would take a same-size edit for the same file.
                _config={"NoCheckDest": True},
            )
        finally:
            if source.startswith(self._scratch):
                os.unlink(source)

    def create_item(self, parent, name, kind, mtime, mode, target, contents_path, request) -> Item:
        if kind == "symlink":
            raise NotSupported("rclone remotes hold no symlinks here")
        folder = self._folder(parent)
        path = f"{folder}/{name}" if folder else name
        if self._stat(path) is not None:
            raise Exists(f"{name!r} exists")
        if kind == "folder":
            self._rc("operations/mkdir", fs=self.fs, remote=path)
        else:
            self._upload(contents_path, path)
        created = self._stat(path)
        if created is None:
            raise ExtensionError("the new item is not on the remote")
        return created

    def modify_item(self, identifier, base_version, fields, contents_path, request) -> Item:
        current = self._existing(identifier)
        if contents_path is not None and base_version["content"] != current.content_version:
            raise Conflict("the contents changed since the base version", data={"current": current.to_json()})
        if fields and base_version["metadata"] != current.metadata_version:
            raise Conflict("the metadata changed since the base version", data={"current": current.to_json()})
        if {"mtime", "mode"} & set(fields):
            raise NotSupported("rclone remotes here keep no settable mtime or mode")
        path = path_of(identifier)
        if contents_path is not None:
            if current.kind != "file":
                raise InvalidParams("only files have contents")
            self._upload(contents_path, path)
        if "name" in fields or "parent" in fields:
            if identifier == ROOT_ID:
                raise InvalidParams("the root is not renamed")
            folder = self._folder(fields.get("parent", current.parent))
            name = fields.get("name", current.name)
            destination = f"{folder}/{name}" if folder else name
            if destination != path:
                if self._stat(destination) is not None:
                    raise Exists(f"{name!r} exists")
                if current.kind == "folder" and (destination + "/").startswith(path + "/"):
                    raise InvalidParams("a folder is not moved into itself")
                self._move(current.kind, path, destination)
                path = destination
        moved = self._stat(path)
        if moved is None:
            raise NoSuchItem("the item went away while it was changed")
        return moved

    def _move(self, kind: str, path: str, destination: str) -> None:
        if kind == "file":
            self._rc("operations/movefile", srcFs=self.fs, srcRemote=path, dstFs=self.fs, dstRemote=destination)
            return
        if not self.dir_move:
            # Without a server-side move, a folder would be copied item by
            # item, not atomically: the mount answers EXDEV and `mv` copies.
            raise NotSupported("this remote cannot move a folder on the server")
        self._rc("sync/move", srcFs=self._sub(path), dstFs=self._sub(destination), deleteEmptySrcDirs=True)

    def _sub(self, path: str) -> str:
        return f"{self.fs}/{path}" if self.fs[-1:] != ":" else f"{self.fs}{path}"

    def delete_item(self, identifier, base_version, request) -> None:
        if identifier == ROOT_ID:
            raise InvalidParams("the root is not deleted")
        current = self._existing(identifier)
        if base_version["content"] != current.content_version:
            raise Conflict("the item changed since the base version", data={"current": current.to_json()})
        if current.kind == "folder":
            if self._children(path_of(identifier)):
                raise NotEmpty("the folder has items")
            self._rc("operations/rmdir", fs=self.fs, remote=path_of(identifier))
        else:
            self._rc("operations/deletefile", fs=self.fs, remote=path_of(identifier))


def _seconds(modtime: str) -> float:
    """RFC 3339 as rclone writes it (nanoseconds allowed) to epoch seconds."""
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", modtime)
    if not match:
        return 0.0
    zone = "+00:00" if match.group(3) == "Z" else match.group(3)
    whole = datetime.fromisoformat(match.group(1) + zone).timestamp()
    return whole + (float("0" + match.group(2)) if match.group(2) else 0.0)


if __name__ == "__main__":
    run(RcloneExtension())
