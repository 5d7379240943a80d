"""Writes through a revoked presenter: an editor presents its document
(it hears what happens to it, like an NSFilePresenter) and keeps it open
to save. When it hears that its grant was revoked, the buggy app saves
its edits to the document anyway, through the descriptor it kept: a
write the user has just forbidden (EPERM, SPEC S14), however it handles
the error. The fixed twin stops writing when it hears the revoke."""

import os

import scopefs
from corpus_app import FIXED, document, say

path = document()
with scopefs.accessing(path):
    fd = os.open(path, os.O_WRONLY)
    notices = scopefs.watch_documents(timeout=10)  # from now on
    say("READY")
    for notice in notices:
        if notice["kind"] != "revoked":
            continue
        if FIXED:  # FIXED: a revoked document is not written again
            say("lost access to the document; the edits stay unsaved")
            break
        try:
            os.pwrite(fd, b"edited\n", 0)  # BUG: saving through the revoked presenter
        except PermissionError:
            say("lost access to the document; the edits stay unsaved")
        break
    os.close(fd)
