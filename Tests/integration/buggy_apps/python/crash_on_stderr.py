"""Crashes with output on standard error only: after a revoke the app
tells the user it lost access (on standard output, which looks fine),
then its clean-up reads the document once more to remember where the
reader was, and that read's EPERM kills it: the traceback is on standard
error only. The fixed twin's clean-up does not touch a revoked document."""

import os

import scopefs
from corpus_app import FIXED, document, say, wait_until_revoked

path = document()
with scopefs.accessing(path):
    fd = os.open(path, os.O_RDONLY)
    say("READY")
    wait_until_revoked(path)
    try:
        os.pread(fd, 64, 0)
    except PermissionError:
        say("lost access to the document")
    if not FIXED:
        position = os.pread(fd, 64, 0)  # BUG: the clean-up reads the revoked document
    os.close(fd)
