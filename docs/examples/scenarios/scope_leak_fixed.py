#!/usr/bin/env python3
"""The fixed version of scope_leak_buggy.py: every start is balanced by
exactly one stop on every path out of the pass, which is what
``scopefs.accessing`` does (SPEC S7, S8). When access is lost, the start
fails, no scope is counted, and nothing is left to stop.
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
for _ in range(200):
    try:
        with scopefs.accessing(path):
            with open(path, "rb") as document:
                document.read()
    except PermissionError:
        print("lost access to the document", flush=True)
        break
    time.sleep(0.05)
print("done", flush=True)
