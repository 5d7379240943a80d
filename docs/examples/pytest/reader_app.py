#!/usr/bin/env python3
"""A small app under test: it keeps a bookmark of a document and reads the
document again and again, following it when it moves (SPEC S26). It
survives what the tests in test_reader_app.py do to it: a failed open
(EIO) is retried, a move is followed, a revoke ends it cleanly.

Its tests run it (test_reader_app.py); by hand, after the README's session
and docs/CLIENTS.md's world ($FILE), from the checkout, revoked after a
second:

    $ scopefs run --app com.example.app --expose "$PWD" --env PYTHONPATH="$PWD/clients/python" -- \
          python3 "$PWD/docs/examples/pytest/reader_app.py" "$FILE" &
    $ sleep 1 && scopefs revoke com.example.app local:docs && wait $!   # reading docs/file.txt, lost access
    $ scopefs restore com.example.app local:docs
"""

import errno
import sys
import time

import scopefs

path = sys.argv[1]
with scopefs.accessing(path):
    token = scopefs.bookmark_data(path)
print("READY", flush=True)
current = None
for _ in range(400):
    try:
        found = scopefs.resolve_bookmark(token)
        if found.provider_path != current:
            current = found.provider_path
            print("reading", current, flush=True)
        with scopefs.accessing(found.path):
            with open(found.path, "rb") as document:
                document.read()
    except PermissionError:
        print("lost access", flush=True)
        sys.exit(0)
    except OSError as exc:
        print("read failed:", errno.errorcode.get(exc.errno, exc.errno), flush=True)
    time.sleep(0.05)
print("gave up waiting", flush=True)
sys.exit(1)
