"""Resolves a stale bookmark without renewing it: the app keeps a
bookmark of its document; the document is renamed on the host, so the
bookmark resolves with isStale (SPEC S26). Apple's rule: make a new
bookmark and keep that one. The buggy app keeps the old one, so every
later resolution (here the next "launch") is stale again. The fixed twin
renews it."""

import os
import time

import scopefs
from corpus_app import FIXED, document, say

path = document()
bookmark = os.getxattr(path, "user.scopefs.bookmark").decode()
say("READY")
deadline = time.monotonic() + 10
while not (found := scopefs.resolve_bookmark(bookmark)).is_stale and time.monotonic() < deadline:
    time.sleep(0.05)  # until the rename on the host is seen
say(f"the document is now {os.path.basename(found.path)} (stale: {found.is_stale})")
if FIXED:
    bookmark = os.getxattr(found.path, "user.scopefs.bookmark").decode()  # FIXED: renewed
# BUG (without --fixed): the stale bookmark is kept
again = scopefs.resolve_bookmark(bookmark)  # the next launch
say(f"reopened {os.path.basename(again.path)} (stale: {again.is_stale})")
