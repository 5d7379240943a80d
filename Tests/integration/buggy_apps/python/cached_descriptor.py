"""Caches a descriptor: opens its document once and keeps reading through
that descriptor. After a revoke the read fails with EPERM (SPEC S14); the
buggy app does not expect it and crashes. The fixed twin closes the
descriptor, tells the user and ends cleanly."""

import os

import scopefs
from corpus_app import FIXED, document, say, wait_until_revoked

path = document()
with scopefs.accessing(path):
    fd = os.open(path, os.O_RDONLY)
    os.pread(fd, 64, 0)
    say("READY")
    wait_until_revoked(path)
    if not FIXED:
        os.pread(fd, 64, 0)  # BUG: the cached descriptor's EPERM is not handled
    try:
        os.pread(fd, 64, 0)
    except PermissionError:
        os.close(fd)  # FIXED: the descriptor is dropped, the user told
        say("lost access to the document")
