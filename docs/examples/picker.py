#!/usr/bin/env python3
"""Asks the user for a text document, reads it in scope, and follows it
while it moves (issue 17) for SECONDS (default 30). Run it as an app, with
an agent answering; after the README's session and docs/CLIENTS.md's
world, from the checkout (docs/examples/pick-file.json chooses the
session's local:Novel/chapter1.txt; run `scopefs agent` in another
terminal instead to choose yourself in its picker):

    $ scopefs agent --script docs/examples/pick-file.json --count 1 & sleep 1   # it waits for requests
    $ scopefs run --app com.example.app --expose "$PWD" --env PYTHONPATH="$PWD/clients/python" -- \
          python3 "$PWD/docs/examples/picker.py" 1
"""

import sys

import scopefs

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30
notices = scopefs.watch_documents(timeout=seconds)  # from now on
try:
    [path] = scopefs.pick(mode="open", content_types=["public.plain-text"])
except scopefs.PickCancelled:
    print("cancelled")
    sys.exit(1)

with scopefs.accessing(path):  # Apple's rule: start before use
    with scopefs.coordinate(path, "read"):  # no other app writes meanwhile
        with open(path) as document:
            print(f"picked {path}: {len(document.read())} characters")

for notice in notices:  # like NSFilePresenter
    print(notice["kind"], notice["path"], flush=True)
    if notice["kind"] == "moved":
        path = notice["path"]
    if notice["kind"] in ("deleted", "revoked"):
        break
