"""Exits 0 after logging a traceback: the app catches the revoke's EPERM
with a catch-all that logs the whole traceback on standard error and
carries on, so it ends with status 0 and a normal-looking standard
output. The fixed twin handles the error it expects and logs one line."""

import logging
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
    except PermissionError as error:
        if FIXED:
            logging.warning("lost access: %s", error.strerror)  # FIXED: the expected error, in one line
        else:
            logging.exception("reading failed")  # BUG: a traceback logged, and on to exit 0
    os.close(fd)
    say("lost access to the document")
