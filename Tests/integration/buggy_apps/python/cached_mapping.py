"""Caches a mapping: maps its document and keeps reading the mapping.
After a revoke the kernel drops the mapped pages (SPEC S14) and the next
touch faults into a denied read: SIGBUS kills the buggy app. The fixed
twin copies the content out, unmaps at once, and reads the document again
through read(2), where a revoke is an error it can handle."""

import mmap
import os

import scopefs
from corpus_app import FIXED, document, say, wait_until_revoked

path = document()
with scopefs.accessing(path):
    fd = os.open(path, os.O_RDONLY)
    mapping = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    content = mapping[:]
    if FIXED:
        mapping.close()  # FIXED: no mapping outlives the load
    say("READY")
    wait_until_revoked(path)
    if not FIXED:
        content = mapping[:]  # BUG: the cached mapping after a revoke: SIGBUS
    try:
        content = os.pread(fd, len(content), 0)
    except PermissionError:
        say("lost access to the document")
    os.close(fd)
