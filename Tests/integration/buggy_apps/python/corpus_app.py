"""What the Python apps of the corpus share (the C and Swift apps have the
same): the command line ``APP [--fixed] DOCUMENT``, the document relative to
``$SCOPEFS_MOUNT`` (the app's view of the mount, set by ``scopefs run``),
and one wait, for the revoke the test makes once the app printed READY.
"""

import os
import sys
import time

#: ``--fixed``: the twin without the bug.
FIXED = "--fixed" in sys.argv[1:]


def document() -> str:
    relative = next(arg for arg in sys.argv[1:] if arg != "--fixed")
    return os.path.join(os.environ.get("SCOPEFS_MOUNT", "."), relative)


def say(line: str) -> None:
    """A line on standard output, at once (a test reads it while the app runs)."""
    print(line, flush=True)


def wait_until_revoked(path: str, seconds: float = 10) -> None:
    """Until the grant covering ``path`` is revoked, as
    ``user.scopefs.grant-state`` says (a control attribute, never denied,
    SPEC S9: the wait itself makes no denial). Once it does, the revoke is
    in force for the app's next read, a page in the kernel's cache included
    (SPEC S14)."""
    deadline = time.monotonic() + seconds
    while os.getxattr(path, "user.scopefs.grant-state") != b"revoked":
        if time.monotonic() > deadline:
            sys.exit("the test never revoked the document")
        time.sleep(0.01)
