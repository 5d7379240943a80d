"""Leaks a scope in a loop: reloads its document five times, starting
access on every pass and stopping once at the end, so it exits with four
scopes counted: a leak (SPEC S8, S11). The fixed twin balances every
start with a stop on the same pass."""

import scopefs
from corpus_app import FIXED, document, say

path = document()
for _ in range(5):
    if FIXED:
        with scopefs.accessing(path):  # FIXED: one stop per start
            open(path, "rb").close()
        continue
    scopefs.start_accessing(path)  # BUG: a start on every pass...
    open(path, "rb").close()
if not FIXED:
    scopefs.stop_accessing(path)  # ...and one stop at the end
say("done")
