#!/usr/bin/env python3
"""The fixed version of cached_descriptor_buggy.py: a read that fails with
EPERM means the user took the document away (SPEC S14). The app closes
the descriptor, checks whether it may open the document again, and, as it
may not, tells the user and ends cleanly instead of crashing. Its security
scope is stopped on every way out (``scopefs.accessing``, SPEC S7, S8).
"""

import os
import sys
import time

try:
    import scopefs
except ImportError:  # run from a checkout: the client is in clients/python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "clients", "python"))
    import scopefs

path = os.path.join(os.environ.get("SCOPEFS_MOUNT", "."), sys.argv[1])
lost = False
with scopefs.accessing(path):
    fd = os.open(path, os.O_RDONLY)
    print("READY", flush=True)
    for _ in range(100):
        try:
            os.pread(fd, 64, 0)
        except PermissionError:
            os.close(fd)
            try:
                fd = os.open(path, os.O_RDONLY)  # access restored meanwhile?
                continue
            except PermissionError:
                lost = True
                break
        time.sleep(0.05)
    if not lost:
        os.close(fd)
print("lost access to the document; closed it" if lost else "done", flush=True)
