#!/usr/bin/env python3
"""An app that keeps a document open and reads it again and again through
the same descriptor. When the user revokes access (scopefs revoke), the
next read fails with EPERM (SPEC S14) and this app crashes on it.

Run it as an app: scopefs run --app APP -- python3 cached_descriptor_buggy.py Providers/local/docs/report.txt
"""

import os
import sys
import time

path = os.path.join(os.environ.get("SCOPEFS_MOUNT", "."), sys.argv[1])
fd = os.open(path, os.O_RDONLY)
print("READY", flush=True)
for _ in range(100):
    os.pread(fd, 64, 0)  # BUG: EPERM after a revoke is not handled
    time.sleep(0.05)
os.close(fd)
print("done", flush=True)
