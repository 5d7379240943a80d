"""The daemon's side of the extension protocol, for the conformance suite.

``ExtensionProcess`` starts an extension command as a real child process and
talks docs/PROVIDERS.md's protocol to it over pipes, checking every line
the extension writes against the protocol's rules (framing, JSON-RPC 2.0
shape, ids answered once, the Item rules): a broken rule is recorded as a
violation and the test fails at teardown. ``check_item`` checks one Item.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import time
from pathlib import Path

PROTOCOL_VERSION = "1.0"
MAX_LINE_BYTES = 1 << 20
MAX_NAME_BYTES = 255
MAX_ID_BYTES = 2048
MAX_TOKEN_BYTES = 4096
MAX_PAGE_SIZE = 1000

# docs/PROVIDERS.md "Errors"
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
NO_SUCH_ITEM = -32001
CONFLICT = -32002
ANCHOR_EXPIRED = -32006
NOT_SUPPORTED = -32007
EXISTS = -32008
NOT_EMPTY = -32009
CANCELLED = -32010
INVALID_NAME = -32013
UNSUPPORTED_VERSION = -32014
NOT_INITIALIZED = -32015

CAPABILITY_TYPES = {
    "changes": str,
    "ranges": bool,
    "create": bool,
    "modify": bool,
    "delete": bool,
    "rename": bool,
    "conditionalWrites": bool,
    "maxPageSize": int,
}


class RpcError(Exception):
    def __init__(self, error: dict):
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


class ExtensionProcess:
    """One extension child process and the daemon's end of its pipes."""

    def __init__(self, argv: list, staging: Path, log: Path, env: dict | None = None):
        self.staging = staging
        self.log_path = log
        self._log = open(log, "ab")
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, **(env or {})},
        )
        self.violations: list[str] = []
        self.notifications: list[dict] = []
        self.untagged_errors: list[dict] = []  # answers with "id": null
        self._responses: dict = {}
        self.answer_order: list = []  # request ids in the order answered
        self._sent: set = set()
        self._next_id = 0
        self._write_lock = threading.Lock()
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- the extension's output, checked line by line ------------------------

    def _violation(self, text: str) -> None:
        self.violations.append(text)

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            line = stream.readline(MAX_LINE_BYTES + 2)
            if not line:
                break
            if not line.endswith(b"\n"):
                self._violation(f"a line over {MAX_LINE_BYTES} bytes or unterminated: {line[:80]!r}")
                continue
            try:
                message = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                self._violation(f"not JSON: {line[:200]!r}")
                continue
            self._take(message)
        with self._changed:
            self._changed.notify_all()

    def _take(self, message) -> None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._violation(f"not a JSON-RPC 2.0 object: {message!r:.200}")
            return
        with self._changed:
            if "method" in message:
                if "id" in message:
                    self._violation(f"a request from the extension (none in 1.0): {message!r:.200}")
                elif not isinstance(message.get("params", {}), dict):
                    self._violation(f"notification params not an object: {message!r:.200}")
                else:
                    self.notifications.append(message)
            elif ("result" in message) == ("error" in message):
                self._violation(f"a response has exactly one of result and error: {message!r:.200}")
            elif "error" in message and not (
                isinstance(message["error"], dict)
                and isinstance(message["error"].get("code"), int)
                and isinstance(message["error"].get("message"), str)
            ):
                self._violation(f"an error is {{code: int, message: string}}: {message!r:.200}")
            elif message.get("id") is None:
                self.untagged_errors.append(message)
            elif message["id"] not in self._sent:
                self._violation(f"an answer to no request: {message!r:.200}")
            elif message["id"] in self._responses:
                self._violation(f"a request answered twice: {message!r:.200}")
            else:
                self._responses[message["id"]] = message
                self.answer_order.append(message["id"])
            self._changed.notify_all()

    # -- the daemon's input --------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        with self._write_lock:
            self.process.stdin.write(data)
            self.process.stdin.flush()

    def send(self, message: dict) -> None:
        self.send_raw(json.dumps(message).encode("utf-8") + b"\n")

    def notify(self, method: str, params: dict | None = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params or {}})

    def start(self, method: str, params: dict | None = None, request_id=None):
        """Send a request without waiting; its id."""
        if request_id is None:
            self._next_id += 1
            request_id = self._next_id
        self._sent.add(request_id)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    def wait(self, request_id, timeout: float = 20) -> dict:
        deadline = time.monotonic() + timeout
        with self._changed:
            while request_id not in self._responses:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no answer to request {request_id} in {timeout} s; log: {self.log_tail()}")
                if self.process.poll() is not None and not self._reader.is_alive():
                    raise EOFError(f"the extension exited ({self.process.returncode}); log: {self.log_tail()}")
                self._changed.wait(min(remaining, 0.2))
            return self._responses[request_id]

    def call(self, method: str, params: dict | None = None, timeout: float = 20):
        response = self.wait(self.start(method, params), timeout)
        if "error" in response:
            raise RpcError(response["error"])
        return response["result"]

    def wait_untagged(self, count: int, timeout: float = 10) -> list:
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.untagged_errors) < count and time.monotonic() < deadline:
                self._changed.wait(0.2)
            return list(self.untagged_errors)

    # -- life cycle ----------------------------------------------------------

    def initialize(self, provider_id: str = "conformance", options: dict | None = None, version: str = "1.0"):
        return self.call(
            "initialize",
            {
                "protocolVersion": version,
                "providerId": provider_id,
                "stagingDirectory": str(self.staging),
                "options": options or {},
            },
        )

    def shutdown(self, timeout: float = 5) -> int:
        """shutdown, exit; the exit status (the protocol wants 0 within 5 s)."""
        if self.process.poll() is None:
            try:
                self.call("shutdown", timeout=timeout)
                self.notify("exit")
                self.process.stdin.close()
            except (OSError, EOFError, TimeoutError):
                pass
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return -9
        finally:
            self._log.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._log.close()

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""


# -- Item rules --------------------------------------------------------------


def name_problem(name) -> str | None:
    if not isinstance(name, str) or not name:
        return "not a non-empty string"
    if name in (".", "..") or "/" in name or "\0" in name:
        return "'.', '..', '/' or NUL"
    try:
        if len(name.encode("utf-8")) > MAX_NAME_BYTES:
            return "over 255 bytes"
    except UnicodeEncodeError:
        return "not UTF-8"
    return None


def check_item(item) -> dict:
    """Assert that ``item`` is an Item (docs/PROVIDERS.md "Items"); returns it."""
    assert isinstance(item, dict), f"an Item is an object: {item!r}"
    identifier = item.get("id")
    assert isinstance(identifier, str) and identifier, f"id is a non-empty string: {item!r}"
    assert len(identifier.encode("utf-8")) <= MAX_ID_BYTES, f"id over {MAX_ID_BYTES} bytes"
    if identifier == "root":
        assert item.get("parent") is None, f"the root's parent is null: {item!r}"
        assert item.get("kind") == "folder", "the root is a folder"
    else:
        assert isinstance(item.get("parent"), str) and item["parent"], f"parent is an id: {item!r}"
        assert name_problem(item.get("name")) is None, f"bad name ({name_problem(item.get('name'))}): {item!r}"
    assert item.get("kind") in ("file", "folder", "symlink"), f"kind: {item!r}"
    size = item.get("size")
    assert isinstance(size, int) and not isinstance(size, bool) and size >= 0, f"size: {item!r}"
    assert isinstance(item.get("mtime"), (int, float)) and not isinstance(item.get("mtime"), bool), f"mtime: {item!r}"
    mode = item.get("mode")
    assert isinstance(mode, int) and 0 <= mode <= 0o7777, f"mode is permission bits: {item!r}"
    version = item.get("version")
    assert isinstance(version, dict), f"version: {item!r}"
    for part in ("content", "metadata"):
        assert isinstance(version.get(part), str), f"version.{part} is a string: {item!r}"
        assert len(version[part].encode("utf-8")) <= MAX_TOKEN_BYTES, f"version.{part} too long"
    if item["kind"] == "symlink":
        assert isinstance(item.get("target"), str), f"a symlink has a target: {item!r}"
    return item


def check_staged(path: str, staging: Path) -> bytes:
    """Assert that a fetched path is a regular file inside the staging folder; its bytes."""
    assert isinstance(path, str), "fetch's path is a string"
    resolved = os.path.realpath(path)
    assert os.path.dirname(resolved) == os.path.realpath(staging) or resolved.startswith(
        os.path.realpath(staging) + os.sep
    ), f"{path} is outside the staging folder {staging}"
    info = os.lstat(path)
    assert stat.S_ISREG(info.st_mode), f"{path} is not a regular file"
    assert info.st_nlink == 1, f"{path} has other hard links"
    return Path(path).read_bytes()
