#!/usr/bin/env python3
"""Asks the user for a text document, reads it in scope, and follows it
while it moves (issue 17). Run it as an app, with an agent answering:

    scopefs agent &                                   # the owner's side
    PYTHONPATH=clients/python scopefs run --app com.example.app -- \
        python3 docs/examples/picker.py [SECONDS]
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
