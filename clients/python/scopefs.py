"""Python client of ScopeFS security scopes (SPEC S31). Standard library only.

ScopeFS gates content operations on provider items (open, read, write,
listdir, ...) behind a per-process security-scope counter (SPEC S6-S9).
This module raises, lowers and reads that counter for the calling process::

    import scopefs

    with scopefs.accessing(path):
        with open(path) as f:
            print(f.readline())

    token = scopefs.bookmark_data(path)            # later, even after a rename:
    found = scopefs.resolve_bookmark(token)        # found.path, found.is_stale

Starting, stopping, counting and making bookmarks are ``getxattr(2)`` calls
(``os.getxattr``) on the path inside the mount, following a final symlink so
that a reference document is followed to its original (docs/API.md, SPEC
S12, S25); only resolving a bookmark talks to the daemon, over its control
socket (SPEC S26, S27). The module keeps no state. The counter belongs to the calling process;
a child process inherits the scopes its parent holds while the parent holds
them (SPEC S9).

Paths are bytes (SPEC S33a): a path this module returns holds a byte that
is not UTF-8 as Python's ``surrogateescape`` does (the daemon sends it as
``\\udcXX``, docs/API.md "Paths are bytes"), so ``open(path)`` and
``os.fsencode(path)`` give the exact file; ``bytes`` paths are accepted too.

Errors (docs/API.md "Errors", SPEC S32):

- ``ScopeDenied`` (a ``PermissionError``, EPERM): no active grant of the
  caller's app covers the path, the grant is revoked, or the caller is not an
  app process (SPEC S6, S14).
- ``BudgetExhausted`` (an ``OSError``, EDQUOT): the process used up its budget
  of outstanding starts and stays so until it exits (SPEC S10).
- ``FileNotFoundError`` (ENOENT): the path is not visible to the app (SPEC S2, S3).
- ``NotInsideMount`` (an ``OSError``, ENODATA/ENOTSUP): the path is not inside
  a ScopeFS mount.
- ``NoDaemon`` (a ``ConnectionRefusedError``): bookmark resolution found no
  daemon serving the state directory.
- ``ItemDeleted`` (a ``FileNotFoundError``): the item a bookmark names no
  longer exists (SPEC S26).
- ``InvalidBookmark`` (an ``OSError``, EBADMSG): a bookmark that was tampered
  with, truncated, or is not a ScopeFS bookmark (SPEC S25, S26).
- ``ScopeFSProtocolError`` (an ``OSError``, EPROTO): a reply that docs/API.md
  does not define.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Union

__all__ = [
    "NOT_NEEDED",
    "BookmarkResolution",
    "BudgetExhausted",
    "InvalidBookmark",
    "ItemDeleted",
    "NoDaemon",
    "NoPickerAgent",
    "NotInsideMount",
    "PickCancelled",
    "ScopeDenied",
    "ScopeFSProtocolError",
    "accessing",
    "bookmark_data",
    "coordinate",
    "pick",
    "query_documents",
    "resolve_bookmark",
    "scope_count",
    "start_accessing",
    "state_directory",
    "stop_accessing",
    "watch_documents",
]

#: What ``os.getxattr`` accepts as a path.
StrOrBytesPath = Union[str, bytes, os.PathLike]

#: The control attributes (docs/API.md "Starting and stopping access").
START_ATTR = "user.scopefs.start"
STOP_ATTR = "user.scopefs.stop"
SCOPE_ATTR = "user.scopefs.scope"

#: The reply for a path that needs no scope (a container path, SPEC S9).
NOT_NEEDED = "not-needed"
#: The reply for a stop with the counter already at zero (SPEC S7).
UNBALANCED = "unbalanced"


class ScopeDenied(PermissionError):
    """EPERM: no active grant of the caller's app covers the path, the grant
    is revoked, or the caller is not an app process (SPEC S6, S14)."""


class BudgetExhausted(OSError):
    """EDQUOT: the process used up its budget of outstanding starts; it
    cannot gain new access until it exits (SPEC S10)."""


class InvalidBookmark(OSError):
    """EBADMSG: the bookmark was tampered with, truncated, or is not a
    ScopeFS bookmark (SPEC S25, S26)."""


class NotInsideMount(OSError):
    """ENODATA/ENOTSUP: the path is not inside a ScopeFS mount (a file
    system without the control attributes)."""


class NoDaemon(ConnectionRefusedError):
    """No daemon serves the state directory: its control socket is missing
    or nobody listens on it."""


class ItemDeleted(FileNotFoundError):
    """The item a bookmark names no longer exists (SPEC S26)."""


class ScopeFSProtocolError(OSError):
    """EPROTO: the mount replied with a value docs/API.md does not define."""


def _control(path: StrOrBytesPath, attribute: str) -> str:
    """One getxattr of a control attribute; returns the reply text.

    Each getxattr of ``user.scopefs.start``/``.stop`` performs the action, so
    the value must be read in a single call: ``os.getxattr`` does that (it
    passes a 128-byte buffer and never asks for the size first; every
    documented reply fits).
    """
    try:
        raw = os.getxattr(path, attribute, follow_symlinks=True)
    except OSError as exc:
        raise _translate(exc, path) from None
    return raw.rstrip(b"\0\n ").decode("ascii", "replace").strip()


def _translate(exc: OSError, path: StrOrBytesPath) -> OSError:
    """Map EPERM and EDQUOT to this module's exceptions; keep the rest
    (ENOENT is already a FileNotFoundError)."""
    filename = exc.filename if exc.filename is not None else os.fsdecode(path)
    if exc.errno == errno.EPERM:
        return ScopeDenied(errno.EPERM, os.strerror(errno.EPERM), filename)
    if exc.errno == errno.EDQUOT:
        return BudgetExhausted(errno.EDQUOT, os.strerror(errno.EDQUOT), filename)
    if exc.errno in (errno.ENODATA, errno.ENOTSUP):
        return NotInsideMount(exc.errno, "not inside a ScopeFS mount", filename)
    return exc


def _counter(reply: str, path: StrOrBytesPath) -> int:
    if reply.isascii() and reply.isdigit():
        return int(reply)
    raise ScopeFSProtocolError(errno.EPROTO, f"unexpected ScopeFS reply {reply!r}", os.fsdecode(path))


def start_accessing(path: StrOrBytesPath) -> bool:
    """Start accessing the security-scoped resource at ``path`` (SPEC S6).

    Raises the calling process's counter on the nearest active grant of its
    app that covers the item. Starts nest (SPEC S8): balance every ``True``
    with exactly one :func:`stop_accessing`.

    Returns ``True`` when a scope was counted, ``False`` when none is needed
    (a container path, SPEC S9; do not stop then).

    Raises :class:`ScopeDenied` (EPERM), :class:`BudgetExhausted` (EDQUOT),
    ``FileNotFoundError`` (ENOENT, invisible) or another ``OSError``.
    """
    reply = _control(path, START_ATTR)
    if reply == NOT_NEEDED:
        return False
    _counter(reply, path)
    return True


def stop_accessing(path: StrOrBytesPath) -> None:
    """Stop accessing the security-scoped resource at ``path`` (SPEC S7).

    Lowers the calling process's counter by one, never below zero. An
    unbalanced stop and a stop on a path that needs no scope are not errors
    (the daemon records an unbalanced stop as an event, SPEC S29). Files
    opened while in scope stay usable after the last stop (SPEC S9).

    Raises :class:`ScopeDenied` (EPERM), ``FileNotFoundError`` (ENOENT) or
    another ``OSError``.
    """
    reply = _control(path, STOP_ATTR)
    if reply not in (NOT_NEEDED, UNBALANCED):
        _counter(reply, path)


def scope_count(path: StrOrBytesPath) -> int | None:
    """The calling process's own counter on the nearest active grant covering
    ``path`` (``user.scopefs.scope``, SPEC S12): ``0`` when it holds no scope
    there, ``None`` when the path needs no scope (a container path, SPEC S9).

    Raises :class:`ScopeDenied` (EPERM), ``FileNotFoundError`` (ENOENT) or
    another ``OSError``.
    """
    reply = _control(path, SCOPE_ATTR)
    if reply == NOT_NEEDED:
        return None
    return _counter(reply, path)


@contextmanager
def accessing(path: StrOrBytesPath) -> Iterator[bool]:
    """Context manager: start accessing ``path``, stop on every exit path.

    ::

        with scopefs.accessing(path) as counted:
            data = open(path, "rb").read()

    The value bound by ``as`` is what :func:`start_accessing` returned
    (``False`` for a path that needs no scope; then no stop is made). If the
    start fails, its exception propagates and the body does not run. If the
    body raises, the scope is stopped and the body's exception propagates (a
    failing stop does not replace it); if the body succeeds, a failing stop
    raises.
    """
    counted = start_accessing(path)
    try:
        yield counted
    except BaseException:
        if counted:
            try:
                stop_accessing(path)
            except OSError:
                pass
        raise
    else:
        if counted:
            stop_accessing(path)


# ---------------------------------------------------------------------------
# bookmarks (SPEC S25-S27)

BOOKMARK_ATTR = "user.scopefs.bookmark"
BOOKMARK_READ_ONLY_ATTR = "user.scopefs.bookmark-read-only"


@dataclass(frozen=True)
class BookmarkResolution:
    """A resolved bookmark (SPEC S26)."""

    #: The item's current path in this app's view of the mount.
    path: str
    #: True when the item was renamed or moved, or deleted and a new item made
    #: under the same name: make a new bookmark.
    is_stale: bool
    #: ``"read-write"`` or ``"read"``.
    access: str
    #: The provider ID.
    provider: str
    #: The item's path inside its provider.
    provider_path: str


def bookmark_data(path: StrOrBytesPath, read_only: bool = False) -> str:
    """A bookmark of the item at ``path`` (SPEC S25): an opaque ASCII token
    bound to this app, the item and the grant's access (``read_only``: read
    access only), authenticated by the daemon; it keeps working after renames,
    moves and daemon restarts. A reference document is followed to its item.

    Raises :class:`ScopeDenied` (EPERM), ``FileNotFoundError`` (ENOENT), or
    ``OSError(EINVAL)`` for a container path (it needs no bookmark).
    """
    name = BOOKMARK_READ_ONLY_ATTR if read_only else BOOKMARK_ATTR
    try:
        token = _control(path, name)
    except OSError as error:
        # The daemon answers ENODATA outside provider views (docs/API.md).
        if error.errno != errno.ENODATA:
            raise
        token = NOT_NEEDED
    if token == NOT_NEEDED:
        raise OSError(errno.EINVAL, "a container item needs no bookmark; keep its path", os.fsdecode(path))
    return token


def state_directory(explicit: str | None = None) -> str:
    """The daemon's state directory, found like the CLI does (SPEC S1):
    ``explicit``, else ``$SCOPEFS_STATE``, else ``$XDG_STATE_HOME/scopefs``,
    else ``~/.local/state/scopefs``."""
    for candidate in (explicit, os.environ.get("SCOPEFS_STATE")):
        if candidate:
            return os.path.abspath(candidate)
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "scopefs")
    return os.path.join(os.path.expanduser("~"), ".local", "state", "scopefs")


def _ask(request: dict, state_dir: str | None, timeout: float | None = None) -> dict:
    """One request on the daemon's control socket, one JSON answer."""
    sock_path = os.path.join(state_directory(state_dir), "control.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(sock_path)
        except OSError as exc:
            # A missing socket is a FileNotFoundError, which would read as
            # "item deleted": any failure to connect means no daemon.
            raise NoDaemon(
                errno.ECONNREFUSED, f"no ScopeFS daemon serves {os.path.dirname(sock_path)} ({exc.strerror})", sock_path
            ) from None
        sock.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while b"\n" not in data and len(data) < (1 << 20):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    try:
        return json.loads(data.partition(b"\n")[0])
    except ValueError:
        raise ScopeFSProtocolError(errno.EPROTO, "unreadable answer from the ScopeFS daemon", sock_path) from None


def _refusal(answer: dict, fallback: str, by_code: dict) -> OSError:
    """The exception for a daemon's refusal: its code (the CLI's exit codes,
    docs/API.md) picks the class and errno in ``by_code``, else EPROTO."""
    message = str(answer.get("message") or fallback)
    kind, code = by_code.get(answer.get("code"), (ScopeFSProtocolError, errno.EPROTO))
    return kind(code, message)


def resolve_bookmark(bookmark: str | bytes, state_dir: str | None = None) -> BookmarkResolution:
    """Resolve a bookmark made by this app (SPEC S26, S27) through the
    daemon's control socket ``STATE/control.sock``. Resolving does not start
    a scope: call :func:`start_accessing` on the returned path.

    Raises :class:`InvalidBookmark` (tampered with, not a bookmark),
    :class:`ItemDeleted` (the item no longer exists), :class:`ScopeDenied`
    (another app's bookmark, a revoked grant, not an app process), or
    :class:`NoDaemon` (no daemon serves the state directory).
    """
    if isinstance(bookmark, bytes):
        bookmark = bookmark.decode("ascii", "replace")
    answer = _ask({"op": "resolve", "bookmark": bookmark}, state_dir)
    if not answer.get("ok") or "resolution" not in answer or "path" not in answer:
        raise _refusal(
            answer,
            "cannot resolve the bookmark",
            {65: (InvalidBookmark, errno.EBADMSG), 66: (ItemDeleted, errno.ENOENT), 77: (ScopeDenied, errno.EPERM)},
        )
    found = answer["resolution"]
    # Inside `scopefs run`, $SCOPEFS_MOUNT is the app's view of the mount
    # (MOUNT/APP, or the sandbox's path); "path" is as seen outside a sandbox.
    app_root = os.environ.get("SCOPEFS_MOUNT", "")
    path = os.path.join(app_root, found["pathInApp"]) if app_root.startswith("/") else answer["path"]
    return BookmarkResolution(
        path=path,
        is_stale=bool(found["isStale"]),
        access=found["access"],
        provider=found["provider"],
        provider_path=found["path"],
    )


# --- Reference documents (SPEC S22-S24) -------------------------------------


@dataclass(frozen=True)
class ReferenceInfo:
    """What a reference document (or a provider item) says about its item:
    Apple's "container display name" is ``provider_name``."""

    provider: str
    provider_name: str
    item: str
    path: str
    grant_state: str


def reference_info(path: StrOrBytesPath) -> ReferenceInfo:
    """Reads the item metadata through a reference document in the app's
    container (``getxattr`` follows the link to the item) or on a provider
    item directly. Raises ``OSError(ENODATA)`` outside provider views."""

    def read(name: str) -> str:
        return _control(path, "user.scopefs." + name)

    return ReferenceInfo(
        provider=read("provider"),
        provider_name=read("provider-name"),
        item=read("item"),
        path=read("path"),
        grant_state=read("grant-state"),
    )


# --- Previews and promised metadata (SPEC S50) -------------------------------

THUMBNAIL_ATTR = "user.scopefs.thumbnail"


def thumbnail(path: StrOrBytesPath) -> bytes | None:
    """The item's preview, a PNG (``user.scopefs.thumbnail``), or None when
    it has none. Needs no scope and never downloads the document."""
    try:
        return os.getxattr(path, THUMBNAIL_ATTR)
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP):
            return None
        raise


def set_thumbnail(path: StrOrBytesPath | int, png: bytes | None) -> None:
    """Saves (or, None, removes) the preview of a document the app may
    write; on an extension's provider it goes up with the document."""
    if png is None:
        os.removexattr(path, THUMBNAIL_ATTR)
    else:
        os.setxattr(path, THUMBNAIL_ATTR, png)


@dataclass(frozen=True)
class PromisedValues:
    """Apple's promised item resource values: what a document browser shows
    of an item whose content may not be local, all of it without a download
    (``downloading_status`` is Apple's: ``current``, ``downloaded`` or
    ``not-downloaded``)."""

    name: str
    size: int
    modified: float
    changed: float
    state: str
    downloading_status: str
    thumbnail: bytes | None


def _downloading_status(state: str) -> str:
    if state in ("materialized", "pinned"):
        return "current"
    if state in ("dirty", "uploading", "conflict", "error"):
        return "downloaded"
    return "not-downloaded"


def promised_item_values(path: StrOrBytesPath) -> PromisedValues:
    """``getPromisedItemResourceValues``: name, size, dates, download state and
    preview of an item from ``stat`` and its attributes alone, so it never
    triggers a download (not even for an app whose policy is never to
    download) and needs no scope. A container item is ``materialized``."""
    info = os.stat(path)
    try:
        state = os.getxattr(path, "user.scopefs.state").decode()
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.ENOTSUP):
            raise
        state = "materialized"
    return PromisedValues(
        name=os.path.basename(os.fsdecode(path).rstrip("/")),
        size=info.st_size,
        modified=info.st_mtime,
        changed=info.st_ctime,
        state=state,
        downloading_status=_downloading_status(state),
        thumbnail=thumbnail(path) if not os.path.isdir(path) else None,
    )


# --- Asking the user to pick (issue 17) -------------------------------------


class PickCancelled(OSError):
    """ECANCELED: the user (or the owner's agent) cancelled the picker, as
    Apple's ``documentPickerWasCancelled``."""


class NoPickerAgent(OSError):
    """ENXIO: no picker agent runs for this mount (the owner starts one with
    ``scopefs agent``)."""


def pick(
    mode: str = "open",
    content_types: tuple = (),
    allows_multiple_selection: bool = False,
    directory: StrOrBytesPath | None = None,
    items: tuple = (),
    timeout: float = 300,
    state_dir: str | None = None,
) -> list:
    """Ask the user to pick documents for this app, as an app presents
    ``UIDocumentPickerViewController``: ``mode`` is open, import, export or
    move; ``content_types`` UTType identifiers or MIME types; ``directory``
    a start folder as ``PROVIDER:DIR``; ``items`` the container items to
    place (export, move). Returns the paths the app received, in its own
    view (under ``$SCOPEFS_MOUNT``): open gives security-scoped paths
    (start accessing before use), import copies in the inbox.

    Export and move take several items: the reply lists each new path in
    the order of ``items``.

    Raises :class:`PickCancelled`, :class:`NoPickerAgent`, ``TimeoutError``
    (nobody answered), :class:`ScopeDenied` (not an app process, or the
    agent could not apply the choice; for export and move its ``paths``
    lists the items placed before the one that failed) or :class:`NoDaemon`.
    """
    # Bytes or str: a byte that is not UTF-8 goes as "\\udcXX" (docs/API.md).
    request = {
        "mode": mode,
        "contentTypes": list(content_types),
        "allowsMultipleSelection": bool(allows_multiple_selection),
        "items": [os.fsdecode(i) for i in items],
    }
    if directory is not None:
        request["directory"] = os.fsdecode(directory)
    answer = _ask({"op": "pick", "pick": request, "waitSeconds": timeout}, state_dir, timeout + 5)
    picked = answer.get("picked") or {}
    root = os.environ.get("SCOPEFS_MOUNT", "")
    paths = [os.path.join(root, p) if root.startswith("/") else p for p in picked.get("paths", [])]
    if not answer.get("ok"):
        error = _refusal(
            answer,
            "the pick failed",
            {69: (NoPickerAgent, errno.ENXIO), 75: (TimeoutError, errno.ETIMEDOUT), 77: (ScopeDenied, errno.EPERM)},
        )
        # Export, move of several items: those placed before the one that
        # failed (the message names it and those not tried).
        error.paths = paths
        raise error
    if picked.get("cancelled"):
        raise PickCancelled(errno.ECANCELED, "the picker was cancelled")
    return paths


# --- Presenters (issue 17) ---------------------------------------------------


def watch_documents(state_dir: str | None = None, timeout: float | None = None) -> Iterator[dict]:
    """What happens to this app's documents from the moment of the call,
    like an NSFilePresenter: an iterator of dicts with ``kind`` (arrived,
    revoked, restored, forgotten, moved, deleted, changed; save then
    relinquish when another app's claim waits for ours), ``path`` (in the app's
    view, under ``$SCOPEFS_MOUNT``), ``oldPath`` for a move, ``grant`` and
    ``provider``. It ends after ``timeout`` seconds without a notice (None:
    never). Notices are kept for a while, not forever: iterate promptly.

    Items inside a granted folder are told too, with ``"subitem": True``
    (Apple's presentedSubitem... callbacks): ``appeared`` (created, or moved
    in from where the app cannot see), ``moved`` (``oldPath`` and ``path``),
    ``deleted`` (or moved out of its sight) and ``changed``, made on the
    host or by another app through the mount, never by this app itself."""
    answer = _ask({"op": "watch"}, state_dir, 30)  # subscribe now, not at the first next()
    if not answer.get("ok"):
        raise ScopeDenied(errno.EPERM, str(answer.get("message") or "cannot watch"))
    return _notices(answer.get("cursor"), state_dir, timeout)


def _long_poll_wait(timeout: float | None, quiet_since: float) -> float | None:
    """How long the next long poll (watch, query) may wait: at most 10 s,
    at most what is left of `timeout` since the last news; None once that
    is spent."""
    if timeout is None:
        return 10
    left = timeout - (time.monotonic() - quiet_since)
    return None if left <= 0 else max(0.1, min(10, left))


def _notices(cursor, state_dir: str | None, timeout: float | None) -> Iterator[dict]:
    root = os.environ.get("SCOPEFS_MOUNT", "")
    quiet_since = time.monotonic()
    while True:
        wait = _long_poll_wait(timeout, quiet_since)
        if wait is None:
            return
        answer = _ask({"op": "watch", "after": cursor, "waitSeconds": wait}, state_dir, wait + 20)
        if not answer.get("ok"):
            raise ScopeDenied(errno.EPERM, str(answer.get("message") or "cannot watch"))
        cursor = answer.get("cursor", cursor)
        for notice in answer.get("notices") or []:
            quiet_since = time.monotonic()
            for key in ("path", "oldPath"):
                if notice.get(key) and root.startswith("/"):
                    notice[key] = os.path.join(root, notice[key])
            yield notice


# --- Live queries (issue 17) --------------------------------------------------


def query_documents(
    scope: str = "all", name: str | None = None, state_dir: str | None = None, timeout: float | None = None
) -> Iterator[dict]:
    """This app's documents as a live ``NSMetadataQuery``: an iterator that
    yields ``{"event": "finishedGathering", "results": [...]}`` first, then
    ``{"event": "added"|"removed"|"changed", "result": {...}}`` as they
    change, the same events as ``scopefs query --follow --json``. Each
    result has ``url``, ``url_in_local_container`` (paths in the app's view,
    under ``$SCOPEFS_MOUNT``), ``is_external_document`` and
    ``container_display_name``; ``scope`` is documents, external or all,
    ``name`` a glob. Only the calling app's documents are listed. It ends
    after ``timeout`` seconds without a change (None: never).

    Raises :class:`ScopeDenied` (not an app process) or :class:`NoDaemon`."""
    request = {"op": "query", "scope": scope}
    if name is not None:
        request["name"] = name
    answer = _query_answer(dict(request), state_dir, 30)
    return _query_events(request, answer, state_dir, timeout)


_QUERY_KEYS = {
    "urlInLocalContainer": "url_in_local_container",
    "isExternalDocument": "is_external_document",
    "containerDisplayName": "container_display_name",
}


def _query_answer(request: dict, state_dir: str | None, timeout: float) -> dict:
    answer = _ask(request, state_dir, timeout)
    if not answer.get("ok"):
        raise _refusal(answer, "cannot query documents", {77: (ScopeDenied, errno.EPERM)})
    root = os.environ.get("SCOPEFS_MOUNT", "")
    # The socket speaks camelCase (docs/API.md); this module's dicts use
    # Python's names, as its docstrings promise.
    answer["results"] = [
        {_QUERY_KEYS.get(key, key): value for key, value in result.items()} for result in answer.get("results") or []
    ]
    for result in answer["results"]:
        for key in ("url", "url_in_local_container"):
            if result.get(key) and root.startswith("/"):
                result[key] = os.path.join(root, result[key])
    return answer


def _query_events(request: dict, answer: dict, state_dir: str | None, timeout: float | None) -> Iterator[dict]:
    known = {r["url_in_local_container"]: r for r in answer.get("results") or []}
    yield {"event": "finishedGathering", "results": list(known.values())}
    digest = answer.get("digest")
    quiet_since = time.monotonic()
    while True:
        wait = _long_poll_wait(timeout, quiet_since)
        if wait is None:
            return
        answer = _query_answer(dict(request, digest=digest, waitSeconds=wait), state_dir, wait + 20)
        digest = answer.get("digest", digest)
        now = {r["url_in_local_container"]: r for r in answer.get("results") or []}
        events = [
            {"event": "added" if key not in known else "changed", "result": result}
            for key, result in sorted(now.items())
            if known.get(key) != result
        ]
        events += [{"event": "removed", "result": result} for key, result in sorted(known.items()) if key not in now]
        known = now
        if events:
            quiet_since = time.monotonic()
        yield from events


# --- File coordination (issue 17) --------------------------------------------


@contextmanager
def coordinate(
    path: StrOrBytesPath, intent: str = "read", timeout: float = 10, state_dir: str | None = None
) -> Iterator[None]:
    """Hold a read or write claim on a document while the block runs, like
    ``NSFileCoordinator.coordinate(readingItemAt:|writingItemAt:)``: writers
    exclude readers and other writers of other processes (any app); a
    writer kept waiting first asks the holders' presenters to relinquish.
    The claim ends with the block, or with the process.

    Raises ``TimeoutError`` when the item stays claimed for ``timeout``
    seconds, ``FileNotFoundError`` for a path the app was not given.
    Coordination protects only coordinated access: a process that reads or
    writes without it is not held back (as on Apple's systems)."""
    answer = _ask(
        {"op": "coordinate", "path": os.fsdecode(path), "intent": intent, "waitSeconds": timeout},
        state_dir,
        timeout + 20,
    )
    if not answer.get("ok"):
        raise _refusal(
            answer, "cannot coordinate", {75: (TimeoutError, errno.ETIMEDOUT), 66: (FileNotFoundError, errno.ENOENT)}
        )
    try:
        yield
    finally:
        _ask({"op": "release", "claim": answer["claim"]}, state_dir, 30)
