#!/usr/bin/env python3
"""The fixed version of cached_descriptor_buggy.py: a read that fails with
EPERM means the user took the document away (SPEC S14). The app closes
the descriptor, checks whether it may open the document again, and, as it
may not, tells the user and ends cleanly instead of crashing.
"""

import os
import sys
import time

path = os.path.join(os.environ.get("SCOPEFS_MOUNT", "."), sys.argv[1])
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
            print("lost access to the document; closed it", flush=True)
            sys.exit(0)
    time.sleep(0.05)
os.close(fd)
print("done", flush=True)
