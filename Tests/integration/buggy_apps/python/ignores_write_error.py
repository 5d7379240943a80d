"""Ignores EPERM on a write and reports success: the editor saves its
document through the descriptor it keeps; after a revoke the write fails
(EPERM, SPEC S14), the buggy app swallows the error and tells the user
"saved". The fixed twin says the save failed."""

import os

import scopefs
from corpus_app import FIXED, document, say, wait_until_revoked

path = document()
with scopefs.accessing(path):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"draft\n")
    say("READY")
    wait_until_revoked(path)
    try:
        os.pwrite(fd, b"final\n", 0)
        os.fsync(fd)
    except OSError as error:
        if FIXED:  # FIXED: a failed save is told, never reported as done
            say(f"could not save the document: {os.strerror(error.errno)}")
            raise SystemExit(0) from None
        # BUG: the error is swallowed and the save reported as done
    say("saved the document")
