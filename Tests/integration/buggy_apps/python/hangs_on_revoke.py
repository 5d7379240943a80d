"""Hangs on a revoke: after a revoke the app waits for its document to
come back, retrying its read for ever, so it never ends (a revoke is the
user's decision, not a transient error). The fixed twin gives up after a
few tries, tells the user and ends."""

import os
import time

import scopefs
from corpus_app import FIXED, document, say, wait_until_revoked

path = document()
with scopefs.accessing(path):
    fd = os.open(path, os.O_RDONLY)
    say("READY")
    wait_until_revoked(path)
    tries = 0
    while True:
        try:
            os.pread(fd, 64, 0)
            break
        except PermissionError:
            tries += 1
            if FIXED and tries == 3:  # FIXED: a bounded retry
                say("lost access to the document")
                break
            time.sleep(0.1)  # BUG (without --fixed): retries for ever
    os.close(fd)
