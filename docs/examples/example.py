#!/usr/bin/env python3
"""Example app for the ScopeFS Python client module (docs/CLIENTS.md, SPEC S31).

After the README's session and docs/CLIENTS.md's world ($FILE), from the
checkout (it finds clients/python next to itself):

    $ scopefs run --app com.example.app --expose "$PWD" -- python3 "$PWD/docs/examples/example.py" "$FILE"

Shows strict mode (SPEC S9): before start the read fails with EPERM; after
start it works and the scope count is 1; after stop the count is 0. For a
folder it prints the first entry (by name) instead of the first line. A
container path needs no scope: start returns False and the count is
"not-needed". Same output format as the Swift and C examples.
"""

from __future__ import annotations

import errno
import os
import sys

try:
    import scopefs
except ImportError:  # run from a checkout without PYTHONPATH
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
    import scopefs


def errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, f"errno {exc.errno}")


def first_line(path: str) -> tuple[str, str]:
    """The first line of a file, or the first entry (by name) of a folder."""
    if os.path.isdir(path):
        entries = sorted(os.listdir(path))
        return "first entry", entries[0] if entries else "(empty)"
    with open(path, encoding="utf-8", errors="replace") as f:
        return "first line", f.readline().rstrip("\n")


def describe_count(path: str) -> str:
    try:
        count = scopefs.scope_count(path)
    except OSError as exc:
        return f"error {errno_name(exc)}"
    return "not-needed" if count is None else str(count)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} PATH", file=sys.stderr)
        return 64
    path = argv[1]

    print(f"path: {path}")
    print(f"scope count before: {describe_count(path)}")
    try:
        first_line(path)
        print("read before start: ok")
    except OSError as exc:
        print(f"read before start: {errno_name(exc)}")

    try:
        started = scopefs.start_accessing(path)  # True: counted, False: not needed
    except OSError as exc:  # ScopeDenied, BudgetExhausted, FileNotFoundError, ...
        print(f"start accessing: error {errno_name(exc)}")
        return 1
    print(f"start accessing: {'true' if started else 'false'}")
    print(f"scope count during: {describe_count(path)}")

    status = 0
    try:
        label, text = first_line(path)
        print(f"{label}: {text}")
    except OSError as exc:
        print(f"first line: error {errno_name(exc)}")
        status = 1

    if started:
        scopefs.stop_accessing(path)
        print("stop accessing: done")
    print(f"scope count after: {describe_count(path)}")
    # The same in one statement: `with scopefs.accessing(path): ...`
    return status


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    sys.exit(main(sys.argv))
