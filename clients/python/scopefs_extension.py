"""Python SDK for ScopeFS provider extensions (docs/PROVIDERS.md, protocol 1.0).

A provider extension is a process ScopeFS starts to supply documents that
live elsewhere. It speaks JSON-RPC 2.0, one object per line, on its stdin
and stdout; stderr is its log. This module is that loop plus a base class
in the shape of Apple's ``NSFileProviderReplicatedExtension``: subclass
:class:`ReplicatedExtension`, override the methods your storage supports,
and call :func:`run`::

    class MyExtension(ReplicatedExtension):
        name = "my-storage"
        def item(self, identifier): ...
        def enumerate_items(self, container, page, page_size): ...

    if __name__ == "__main__":
        run(MyExtension())

The loop reads requests on one thread and answers each on a worker thread,
so requests run concurrently and may be answered out of order. A request
handler gets a :class:`Request`: ``request.cancelled`` tells that the daemon
sent ``$/cancel``, ``request.check_cancelled()`` raises :class:`Cancelled`,
and ``request.progress(completed, total)`` sends ``$/progress``. Errors are
exceptions carrying the protocol's codes (:class:`NoSuchItem`,
:class:`Conflict`, ...); any other exception becomes JSON-RPC's internal
error (-32603) and the loop goes on.

Standard library only, Python 3.9+, one file to copy next to an extension.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable

PROTOCOL_VERSION = "1.2"
# A line longer than this (without its "\n") is a protocol error both ways.
MAX_LINE_BYTES = 1 << 20
MAX_NAME_BYTES = 255
MAX_PAGE_SIZE = 1000
# Progress notifications of one request are sent at most this often (the
# final one always goes out).
PROGRESS_INTERVAL = 0.1
# At `shutdown`, requests in flight get this long to finish, then as long
# again once cancelled; the daemon allows 5 s before it kills.
SHUTDOWN_GRACE = 2.0


# -- Errors (docs/PROVIDERS.md "Errors") -------------------------------------

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class ExtensionError(Exception):
    """An error answer: ``code`` and ``name`` from docs/PROVIDERS.md."""

    code = INTERNAL_ERROR
    name = "internal"

    def __init__(self, message: str = "", data: dict | None = None):
        super().__init__(message or self.name)
        self.message = message or self.name
        self.data = data

    def to_json(self) -> dict:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def _error(code: int, name: str) -> type:
    return type(name[0].upper() + name[1:], (ExtensionError,), {"code": code, "name": name})


NoSuchItem = _error(-32001, "noSuchItem")
Conflict = _error(-32002, "conflict")
NotAuthenticated = _error(-32003, "notAuthenticated")
Unreachable = _error(-32004, "unreachable")
Quota = _error(-32005, "quota")
AnchorExpired = _error(-32006, "anchorExpired")
NotSupported = _error(-32007, "notSupported")
Exists = _error(-32008, "exists")
NotEmpty = _error(-32009, "notEmpty")
Cancelled = _error(-32010, "cancelled")
TooLarge = _error(-32011, "tooLarge")
Busy = _error(-32012, "busy")
InvalidName = _error(-32013, "invalidName")
UnsupportedVersion = _error(-32014, "unsupportedVersion")
NotInitialized = _error(-32015, "notInitialized")
Denied = _error(-32016, "denied")
InvalidParams = _error(INVALID_PARAMS, "invalidParams")

ERRORS_BY_CODE = {
    cls.code: cls
    for cls in (
        NoSuchItem,
        Conflict,
        NotAuthenticated,
        Unreachable,
        Quota,
        AnchorExpired,
        NotSupported,
        Exists,
        NotEmpty,
        Cancelled,
        TooLarge,
        Busy,
        InvalidName,
        UnsupportedVersion,
        NotInitialized,
        Denied,
    )
}


_BY_ERRNO = {
    errno.ENOENT: NoSuchItem,
    errno.ENOTDIR: NoSuchItem,
    errno.EEXIST: Exists,
    errno.ENOTEMPTY: NotEmpty,
    errno.EDQUOT: Quota,
    errno.ENOSPC: Quota,
    errno.EACCES: Denied,
    errno.EPERM: Denied,
    errno.EROFS: Denied,
    errno.EFBIG: TooLarge,
    errno.ENAMETOOLONG: InvalidName,
    errno.EINVAL: InvalidParams,
    errno.EAGAIN: Busy,
    errno.EINTR: Cancelled,
    errno.ENOTSUP: NotSupported,
}


def error_from_os(error: OSError) -> ExtensionError:
    """The protocol error for a local ``OSError`` (internal when none fits)."""
    cls = _BY_ERRNO.get(error.errno or 0, ExtensionError)
    return cls(f"{error.strerror or error}")


# -- Items -------------------------------------------------------------------

ROOT_ID = "root"
KINDS = ("file", "folder", "symlink")


@dataclass
class Item:
    """One file, folder or symlink as the protocol's Item object."""

    id: str
    parent: str | None
    name: str
    kind: str
    size: int
    mtime: float
    mode: int
    content_version: str
    metadata_version: str
    target: str | None = None
    # A preview exists (protocol 1.2, ``thumbnail``); None says nothing.
    thumbnail: bool | None = None

    def to_json(self) -> dict:
        item = {
            "id": self.id,
            "parent": self.parent,
            "name": self.name,
            "kind": self.kind,
            "size": self.size,
            "mtime": self.mtime,
            "mode": self.mode,
            "version": {"content": self.content_version, "metadata": self.metadata_version},
        }
        if self.kind == "symlink":
            item["target"] = self.target or ""
        if self.thumbnail is not None:
            item["thumbnail"] = self.thumbnail
        return item


def name_problem(name: Any) -> str | None:
    """Why ``name`` is not a valid item name (docs/PROVIDERS.md "Names"), or None."""
    if not isinstance(name, str) or name == "":
        return "a name is a non-empty string"
    if name in (".", ".."):
        return "a name is not '.' or '..'"
    if "/" in name or "\0" in name:
        return "a name holds no '/' and no NUL"
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        return "a name is valid UTF-8"
    if len(encoded) > MAX_NAME_BYTES:
        return f"a name is at most {MAX_NAME_BYTES} bytes"
    return None


@dataclass
class Changes:
    """The answer to ``changes``: what changed since an anchor."""

    updated: list
    deleted: list
    anchor: str
    more: bool = False


@dataclass
class Fetched:
    """The answer to ``fetch``: a file in the staging folder."""

    path: str
    version: str
    offset: int
    length: int


@dataclass
class Thumbnail:
    """The answer to ``thumbnail``: a PNG in the staging folder (protocol 1.2)."""

    path: str
    length: int


class SnapshotChanges:
    """Changes by comparing snapshots, for storage that cannot tell changes.

    ``snapshot()`` (supplied by the extension) returns ``{id: Item}`` of the
    whole tree. Each ``current_anchor`` call takes a snapshot and names it
    with a new anchor; ``changes(anchor)`` takes another and compares. The
    last ``keep`` snapshots are kept in memory, so an anchor older than that,
    or from before a restart, is expired: the daemon lists again.
    """

    def __init__(self, snapshot: Callable[[], dict], keep: int = 16):
        self._snapshot = snapshot
        self._keep = keep
        self._lock = threading.Lock()
        self._snapshots: dict[str, dict] = {}
        self._order: list[str] = []
        self._epoch = f"{os.getpid():x}.{time.time_ns():x}"
        self._counter = 0

    def _remember(self, tree: dict) -> str:
        with self._lock:
            self._counter += 1
            anchor = f"{self._epoch}.{self._counter}"
            self._snapshots[anchor] = tree
            self._order.append(anchor)
            while len(self._order) > self._keep:
                del self._snapshots[self._order.pop(0)]
            return anchor

    def current_anchor(self) -> str:
        return self._remember(self._snapshot())

    def changes(self, anchor: str) -> Changes:
        with self._lock:
            before = self._snapshots.get(anchor)
        if before is None:
            raise AnchorExpired(f"anchor {anchor!r} is unknown or too old; list again")
        after = self._snapshot()
        updated = [
            item.to_json()
            for identifier, item in after.items()
            if identifier not in before or before[identifier].to_json() != item.to_json()
        ]
        deleted = [identifier for identifier in before if identifier not in after]
        return Changes(updated=updated, deleted=deleted, anchor=self._remember(after), more=False)


# -- Requests ----------------------------------------------------------------


@dataclass
class Request:
    """One request in flight: cancellation and progress."""

    id: Any
    method: str
    _server: Server = field(repr=False)
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    _last_progress: float = 0.0

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def check_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise Cancelled("the daemon cancelled the request")

    def progress(self, completed: int, total: int, staged: tuple[str, int] | None = None) -> None:
        """Work done (throttled to 10 a second). For a ``fetch`` of an
        extension that declares ``streamsFetch``, ``staged`` is (path of
        the staged file, the item offset of its first byte): its first
        ``completed`` bytes are written (flushed) and final, and the daemon
        hands them to readers before the answer."""
        now = time.monotonic()
        if completed < total and now - self._last_progress < PROGRESS_INTERVAL:
            return
        self._last_progress = now
        params = {"id": self.id, "completed": completed, "total": total}
        if staged is not None:
            params["staged"] = {"path": staged[0], "offset": staged[1]}
        self._server.notify("$/progress", params)


# -- The base class ----------------------------------------------------------


class ReplicatedExtension:
    """Override what the storage supports; the defaults answer notSupported.

    Method names follow Apple's replicated extension; their arguments are the
    protocol's parameters, already checked for type.
    """

    name = "extension"
    version = "0"

    def __init__(self) -> None:
        self.provider_id = ""
        self.staging_directory = ""
        self.options: dict = {}
        self._server: Server | None = None

    # Life cycle
    def capabilities(self) -> dict:
        return {
            "changes": "none",
            "ranges": False,
            "create": False,
            "modify": False,
            "delete": False,
            "rename": False,
            "conditionalWrites": False,
            "maxPageSize": 100,
            "settableFields": [],
            "symlinks": False,
            "renameKeepsId": True,
        }

    def initialize(self, provider_id: str, staging_directory: str, options: dict) -> None:
        """Connect to the storage; raise NotAuthenticated or Unreachable."""

    def shutdown(self) -> None:
        """Finish or abandon work; the daemon sends ``exit`` next."""

    # Reading
    def item(self, identifier: str) -> Item:
        raise NotSupported("item")

    def enumerate_items(self, container: str, page: str | None, page_size: int) -> tuple:
        """Return ``(items, next_page)``; ``next_page`` None on the last page."""
        raise NotSupported("list")

    def current_anchor(self) -> str:
        raise NotSupported("currentAnchor")

    def enumerate_changes(self, anchor: str) -> Changes:
        raise NotSupported("changes")

    def fetch_contents(self, identifier: str, version: str | None, range: tuple | None, request: Request) -> Fetched:
        raise NotSupported("fetch")

    def fetch_thumbnail(self, identifier: str, size: int, request: Request) -> Thumbnail | None:
        """The item's preview, a PNG of at most ``size`` pixels a side staged
        with ``staging_file()`` (at most 64 KiB), or None when it has none.
        Called only when ``capabilities()`` says ``"thumbnails": True``."""
        raise NotSupported("thumbnail")

    def save_thumbnail(self, identifier: str, thumbnail_path: str, request: Request) -> None:
        """The preview the saving app wrote, sent with ``create`` or
        ``modify`` (``thumbnailPath``): keep it if the store can. The file
        is the daemon's; copy it before returning."""

    # Writing
    def create_item(
        self,
        parent: str,
        name: str,
        kind: str,
        mtime: float | None,
        mode: int | None,
        target: str | None,
        contents_path: str | None,
        request: Request,
    ) -> Item:
        raise NotSupported("create")

    def modify_item(
        self, identifier: str, base_version: dict, fields: dict, contents_path: str | None, request: Request
    ) -> Item:
        raise NotSupported("modify")

    def delete_item(self, identifier: str, base_version: dict, request: Request) -> None:
        raise NotSupported("delete")

    # Helpers for subclasses
    @staticmethod
    def fetch_range(current: Item, version: Any, byte_range: Any) -> tuple:
        """What ``fetch`` asks of ``current``, checked as PROVIDERS.md says:
        a file, at ``version`` when one is given (a precondition: a file
        made of two versions would be corrupt), and the range clamped to the
        file. Returns ``(offset, length)``."""
        if current.kind != "file":
            raise InvalidParams("only files have contents to fetch")
        if version is not None and version != current.content_version:
            raise Conflict("the item changed", data={"version": current.content_version})
        offset, length = byte_range if byte_range is not None else (0, current.size)
        offset = min(offset, current.size)
        return offset, min(length, current.size - offset)

    def staging_file(self) -> tuple:
        """A new file inside the staging directory: ``(fd, path)``, mode 0600."""
        return tempfile.mkstemp(dir=self.staging_directory, prefix="fetch-")

    def signal_changed(self) -> None:
        """Tell the daemon to call ``changes`` (for ``changes: "notify"``)."""
        if self._server is not None:
            self._server.notify("changed", {})

    def log(self, level: str, message: str) -> None:
        if self._server is not None:
            self._server.notify("log", {"level": level, "message": message})


# -- Parameter checks --------------------------------------------------------


def _param(params: dict, key: str, kind: Any, required: bool = True) -> Any:
    """``params[key]`` checked for type; an optional one may be missing or null."""
    value = params.get(key)
    if value is None:
        if required:
            raise InvalidParams(f"missing parameter {key!r}")
        return None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int in Python; the protocol keeps them apart.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise InvalidParams(f"parameter {key!r} has the wrong type")
    return value


def _version(params: dict, key: str) -> dict:
    version = _param(params, key, dict)
    if not isinstance(version.get("content"), str) or not isinstance(version.get("metadata"), str):
        raise InvalidParams(f"{key!r} is {{content: string, metadata: string}}")
    return version


def _nonnegative(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidParams(f"{key!r} is a non-negative integer")
    return value


def _parse_version(text: str) -> tuple:
    """ "MAJOR.MINOR" as two integers ("1.10" is newer than "1.9")."""
    parts = text.split(".")
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        raise InvalidParams(f"protocolVersion {text!r} is not MAJOR.MINOR")
    return int(parts[0]), int(parts[1])


def _check_mtime_and_mode(mtime: Any, mode: Any, where: str) -> None:
    if mtime is not None and (isinstance(mtime, bool) or not isinstance(mtime, (int, float))):
        raise InvalidParams(f"{where}mtime is a number of seconds")
    if mode is not None and (isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777):
        raise InvalidParams(f"{where}mode is permission bits, 0 to 0o7777")


# -- The stdio loop ----------------------------------------------------------


class Server:
    """Reads requests from ``input``, answers on ``output``; one per process."""

    def __init__(self, extension: ReplicatedExtension, input: BinaryIO, output: BinaryIO, workers: int = 8):
        self.extension = extension
        extension._server = self
        self._input = input
        self._output = output
        self._write_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="request")
        self._in_flight: dict = {}
        self._in_flight_lock = threading.Lock()
        self._requests_done = threading.Condition(self._in_flight_lock)
        self._initialized = False
        self._shut_down = False
        self._page_size_limit = MAX_PAGE_SIZE

    # Output
    def _send(self, message: dict) -> None:
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if len(line) > MAX_LINE_BYTES:
            # Never send what the daemon must reject: turn it into an error.
            if "id" in message and "method" not in message:
                message = {"jsonrpc": "2.0", "id": message["id"], "error": TooLarge("answer too large").to_json()}
                line = json.dumps(message).encode("utf-8")
            else:
                return
        with self._write_lock:
            self._output.write(line + b"\n")
            self._output.flush()

    def notify(self, method: str, params: dict) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def _answer(self, request_id: Any, result: Any = None, error: dict | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result
        self._send(message)

    # Input
    def _lines(self):
        """Lines of at most MAX_LINE_BYTES; a longer one yields None (and is skipped)."""
        while True:
            line = self._input.readline(MAX_LINE_BYTES + 2)
            if not line:
                return
            if not line.endswith(b"\n") and len(line) > MAX_LINE_BYTES:
                while line and not line.endswith(b"\n"):
                    line = self._input.readline(MAX_LINE_BYTES)
                yield None
                continue
            yield line

    def serve(self) -> int:
        """Run until ``exit`` or end of input; the process's exit status."""
        for line in self._lines():
            if line is None:
                self._answer(None, error={"code": PARSE_ERROR, "message": "line longer than 1 MiB"})
                continue
            if not line.strip():
                continue
            try:
                message = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                # RecursionError: nesting deeper than the parser's stack.
                self._answer(None, error={"code": PARSE_ERROR, "message": "not a JSON object"})
                continue
            status = self._dispatch(message)
            if status is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                return status
        # End of input without `exit`: the daemon is gone.
        self._pool.shutdown(wait=False, cancel_futures=True)
        return 1

    def _dispatch(self, message: Any) -> int | None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            request_id = message.get("id") if isinstance(message, dict) else None
            self._answer(request_id, error={"code": INVALID_REQUEST, "message": "not a JSON-RPC 2.0 message"})
            return None
        method = message.get("method")
        if method is None:
            return None  # a response: the daemon sends none in 1.0; ignore
        params = message.get("params", {})
        is_request = "id" in message
        request_id = message.get("id")
        bad_id = is_request and (isinstance(request_id, bool) or not isinstance(request_id, (str, int)))
        if not isinstance(method, str) or bad_id:
            self._answer(request_id, error={"code": INVALID_REQUEST, "message": "bad method or id"})
            return None
        if not is_request:
            return self._notification(method, params)
        if not isinstance(params, dict):
            self._answer(request_id, error={"code": INVALID_PARAMS, "message": "params is an object"})
            return None
        handler = self._handlers().get(method)
        if handler is None:
            self._answer(request_id, error={"code": METHOD_NOT_FOUND, "message": f"no method {method!r}"})
            return None
        # After `shutdown`, everything but `shutdown` is -32600, even when
        # `initialize` never succeeded (docs/PROVIDERS.md "Life cycle").
        if self._shut_down and method != "shutdown":
            self._answer(request_id, error={"code": INVALID_REQUEST, "message": "shut down"})
            return None
        if method not in ("initialize", "shutdown") and not self._initialized:
            self._answer(request_id, error=NotInitialized("initialize first").to_json())
            return None
        request = Request(id=request_id, method=method, _server=self)
        with self._in_flight_lock:
            self._in_flight[request_id] = request
        if method in ("initialize", "shutdown"):
            self._run(request, handler, params)  # in order: nothing overtakes them
        else:
            self._pool.submit(self._run, request, handler, params)
        return None

    def _notification(self, method: str, params: Any) -> int | None:
        if method == "exit":
            return 0 if self._shut_down else 1
        if method == "$/cancel" and isinstance(params, dict):
            with self._in_flight_lock:
                request = self._in_flight.get(params.get("id"))
            if request is not None:
                request._cancelled.set()
        return None  # unknown notifications are ignored (JSON-RPC)

    def _run(self, request: Request, handler: Callable, params: dict) -> None:
        try:
            request.check_cancelled()  # cancelled while it waited for a worker
            # A request cancelled after it finished still gets its result
            # (allowed): answering `cancelled` would orphan a staged file.
            self._answer(request.id, result=handler(params, request))
        except ExtensionError as error:
            self._answer(request.id, error=error.to_json())
        except Exception as error:  # noqa: BLE001 - one request fails, the loop goes on
            print(f"{request.method}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
            self._answer(request.id, error={"code": INTERNAL_ERROR, "message": f"{type(error).__name__}: {error}"})
        finally:
            with self._in_flight_lock:
                self._in_flight.pop(request.id, None)
                self._requests_done.notify_all()

    # Methods
    def _handlers(self) -> dict:
        return {
            "initialize": self._initialize,
            "shutdown": self._shutdown,
            "item": self._item,
            "list": self._list,
            "currentAnchor": self._current_anchor,
            "changes": self._changes,
            "fetch": self._fetch,
            "create": self._create,
            "modify": self._modify,
            "delete": self._delete,
            "thumbnail": self._thumbnail,
        }

    def _initialize(self, params: dict, request: Request) -> dict:
        offered = _param(params, "protocolVersion", str)
        provider_id = _param(params, "providerId", str)
        staging = _param(params, "stagingDirectory", str)
        options = _param(params, "options", dict, required=False) or {}
        offered_version, own_version = _parse_version(offered), _parse_version(PROTOCOL_VERSION)
        if offered_version[0] != own_version[0]:
            raise UnsupportedVersion(
                f"this extension speaks {PROTOCOL_VERSION}", data={"supported": [PROTOCOL_VERSION]}
            )
        # Same major: speak the lower minor of the two.
        chosen = offered if offered_version < own_version else PROTOCOL_VERSION
        ext = self.extension
        ext.provider_id, ext.staging_directory, ext.options = provider_id, staging, options
        ext.initialize(provider_id, staging, options)
        capabilities = ext.capabilities()
        self._page_size_limit = min(MAX_PAGE_SIZE, int(capabilities.get("maxPageSize", MAX_PAGE_SIZE)))
        self._initialized = True
        return {"protocolVersion": chosen, "name": ext.name, "version": ext.version, "capabilities": capabilities}

    def _shutdown(self, params: dict, request: Request) -> dict:
        """Every request in flight is answered before shutdown's own answer:
        finished if it can within SHUTDOWN_GRACE seconds, else cancelled."""
        self._shut_down = True
        if not self._wait_for_requests(but=request, seconds=SHUTDOWN_GRACE):
            with self._in_flight_lock:
                others = [r for r in self._in_flight.values() if r is not request]
            for other in others:
                other._cancelled.set()
            self._wait_for_requests(but=request, seconds=SHUTDOWN_GRACE)
        if self._initialized:
            self.extension.shutdown()
        return {}

    def _wait_for_requests(self, but: Request, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        with self._in_flight_lock:
            while any(r is not but for r in self._in_flight.values()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._requests_done.wait(remaining)
        return True

    def _item(self, params: dict, request: Request) -> dict:
        return self.extension.item(_param(params, "id", str)).to_json()

    def _list(self, params: dict, request: Request) -> dict:
        container = _param(params, "id", str)
        page = _param(params, "page", str, required=False)
        page_size = _param(params, "pageSize", int, required=False)
        if page_size is None:
            page_size = self._page_size_limit
        if page_size < 1:
            raise InvalidParams("pageSize is at least 1")
        items, next_page = self.extension.enumerate_items(container, page, min(page_size, self._page_size_limit))
        return {"items": [item.to_json() for item in items], "nextPage": next_page}

    def _current_anchor(self, params: dict, request: Request) -> dict:
        return {"anchor": self.extension.current_anchor()}

    def _changes(self, params: dict, request: Request) -> dict:
        changes = self.extension.enumerate_changes(_param(params, "anchor", str))
        updated = [item.to_json() if isinstance(item, Item) else item for item in changes.updated]
        return {"updated": updated, "deleted": changes.deleted, "anchor": changes.anchor, "more": changes.more}

    def _fetch(self, params: dict, request: Request) -> dict:
        identifier = _param(params, "id", str)
        version = _param(params, "version", str, required=False)
        range_param = _param(params, "range", dict, required=False)
        byte_range = None
        if range_param is not None:
            byte_range = (
                _nonnegative(range_param.get("offset"), "range.offset"),
                _nonnegative(range_param.get("length"), "range.length"),
            )
        fetched = self.extension.fetch_contents(identifier, version, byte_range, request)
        return {"path": fetched.path, "version": fetched.version, "offset": fetched.offset, "length": fetched.length}

    def _create(self, params: dict, request: Request) -> dict:
        parent = _param(params, "parent", str)
        name = _param(params, "name", str)
        kind = _param(params, "kind", str)
        if kind not in KINDS:
            raise InvalidParams(f"kind is one of {KINDS}")
        problem = name_problem(name)
        if problem:
            raise InvalidName(problem)
        mtime = _param(params, "mtime", (int, float), required=False)
        mode = _param(params, "mode", int, required=False)
        _check_mtime_and_mode(mtime, mode, "")
        target = _param(params, "target", str, required=kind == "symlink")
        contents = _param(params, "contentsPath", str, required=False)
        item = self.extension.create_item(parent, name, kind, mtime, mode, target, contents, request)
        self._save_thumbnail(item, params, request)
        return item.to_json()

    def _modify(self, params: dict, request: Request) -> dict:
        identifier = _param(params, "id", str)
        base = _version(params, "baseVersion")
        fields = _param(params, "fields", dict, required=False) or {}
        unknown = set(fields) - {"name", "parent", "mtime", "mode"}
        if unknown:
            raise InvalidParams(f"unknown fields {sorted(unknown)}")
        if "name" in fields:
            problem = name_problem(fields["name"])
            if problem:
                raise InvalidName(problem)
        if "parent" in fields and not isinstance(fields["parent"], str):
            raise InvalidParams("fields.parent is an id")
        _check_mtime_and_mode(fields.get("mtime"), fields.get("mode"), "fields.")
        contents = _param(params, "contentsPath", str, required=False)
        item = self.extension.modify_item(identifier, base, fields, contents, request)
        self._save_thumbnail(item, params, request)
        return item.to_json()

    def _save_thumbnail(self, item: Item, params: dict, request: Request) -> None:
        thumbnail = _param(params, "thumbnailPath", str, required=False)
        if thumbnail is None or item.kind != "file":
            return
        # The document is stored: a preview that cannot be kept must not
        # turn its upload into an error (the daemon would send it again).
        try:
            self.extension.save_thumbnail(item.id, thumbnail, request)
        except Exception as error:  # noqa: BLE001 - logged, the upload stands
            self.extension.log("warning", f"the preview of {item.id!r} was not kept: {error}")

    def _thumbnail(self, params: dict, request: Request) -> dict | None:
        identifier = _param(params, "id", str)
        size = _param(params, "size", int)
        if size < 1:
            raise InvalidParams("size is at least 1")
        found = self.extension.fetch_thumbnail(identifier, size, request)
        return None if found is None else {"path": found.path, "length": found.length}

    def _delete(self, params: dict, request: Request) -> dict:
        self.extension.delete_item(_param(params, "id", str), _version(params, "baseVersion"), request)
        return {}


def run(extension: ReplicatedExtension) -> None:
    """Serve the extension on stdin/stdout until ``exit``; exits the process."""
    # The protocol owns stdout: anything else printed there would corrupt it.
    output = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    sys.stdout = sys.stderr
    status = Server(extension, sys.stdin.buffer, output).serve()
    sys.stderr.flush()
    os._exit(status)
