"""A bare JSON-RPC loop for the host's hostile test extensions.

No SDK on purpose: these extensions break docs/PROVIDERS.md in the ways a
buggy or malicious one could, and the SDK would not let them. Each script
imports this (its own folder is on sys.path), answers ``initialize`` and
``shutdown`` like a well-behaved extension, and misbehaves in ``handle``.
"""

from __future__ import annotations

import json
import sys
import threading

_out = threading.Lock()

CAPABILITIES = {
    "changes": "poll",
    "ranges": True,
    "create": False,
    "modify": False,
    "delete": False,
    "maxPageSize": 10,
}


def write_line(line: str) -> None:
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def send(message: dict) -> None:
    write_line(json.dumps(message))


def answer(request_id, result) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def fail(request_id, code: int, message: str) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def notify(method: str, params: dict) -> None:
    send({"jsonrpc": "2.0", "method": method, "params": params})


def item(identifier: str, name: str | None = None, parent: str | None = "root", kind: str = "file") -> dict:
    return {
        "id": identifier,
        "parent": parent,
        "name": identifier if name is None else name,
        "kind": kind,
        "size": 0,
        "mtime": 0.0,
        "mode": 0o644,
        "version": {"content": "c", "metadata": "m"},
    }


def serve(handle, capabilities: dict | None = None, on_initialize=None) -> None:
    """Reads requests until ``exit``; ``handle(method, params, id)`` answers."""
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method == "initialize":
            if on_initialize is not None:
                on_initialize(params)
            result = {"protocolVersion": "1.0", "name": "hostile", "version": "0"}
            answer(request_id, result | {"capabilities": capabilities or CAPABILITIES})
        elif method == "shutdown":
            answer(request_id, {})
        elif method == "exit":
            sys.exit(0)
        elif request_id is not None:
            handle(method, params, request_id)
    sys.exit(1)
