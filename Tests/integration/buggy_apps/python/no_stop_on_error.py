"""Never stops a scope on an error path: the app stops accessing its
document after a successful read, but the way out it takes when the read
fails (EPERM after a revoke) returns without the stop, so the scope stays
counted when the app exits: a leak (SPEC S11). The fixed twin stops on
every way out."""

import os
import sys

import scopefs
from corpus_app import FIXED, document, say, wait_until_revoked

path = document()
scopefs.start_accessing(path)
fd = os.open(path, os.O_RDONLY)
say("READY")
wait_until_revoked(path)
try:
    os.pread(fd, 64, 0)
except PermissionError:
    os.close(fd)
    say("lost access to the document")
    if FIXED:
        scopefs.stop_accessing(path)  # FIXED: every way out stops
    sys.exit(0)  # BUG (without --fixed): this way out never stops
os.close(fd)
scopefs.stop_accessing(path)
