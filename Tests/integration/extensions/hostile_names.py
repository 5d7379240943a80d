#!/usr/bin/env python3
"""A hostile extension for the mount's tests: its listing mixes good items
with names that would leave the provider or break the rules (``..``,
``a/b``, NUL, 256 bytes), an item whose parent is a file, a symlink to
/etc, two items with one name, and an item whose parent chain loops.
Only the good ones may appear in the replica. Raw JSON-RPC, no SDK."""

import json
import sys


def item(identifier, name=None, parent="root", kind="file", **extra):
    return {
        "id": identifier,
        "parent": parent,
        "name": identifier if name is None else name,
        "kind": kind,
        "size": 3,
        "mtime": 0.0,
        "mode": 0o644,
        "version": {"content": "c", "metadata": "m"},
    } | extra


ITEMS = {
    "root": [
        item("good1"),
        item("dotdot", name=".."),
        item("dot", name="."),
        item("slash", name="a/b"),
        item("nul", name="a\u0000b"),
        item("long", name="n" * 256),
        item("twin1", name="twin"),
        item("twin2", name="twin"),
        item("folder", kind="folder"),
        item("link", kind="symlink", target="/etc"),
        item("loop1", parent="loop2"),
        item("loop2", parent="loop1"),
    ],
    "folder": [item("child", parent="folder"), item("under-a-file", parent="good1")],
}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method, params, rid = request.get("method"), request.get("params") or {}, request.get("id")
    if method == "initialize":
        capabilities = {"changes": "none", "ranges": True, "create": False, "modify": False, "delete": False}
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "protocolVersion": "1.0",
                    "name": "hostile-names",
                    "version": "0",
                    "capabilities": capabilities,
                },
            }
        )
    elif method == "list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"items": ITEMS.get(params["id"], []), "nextPage": None}})
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    elif method == "exit":
        sys.exit(0)
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32001, "message": "no such item"}})
