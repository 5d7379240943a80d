#!/usr/bin/env python3
"""An app that keeps a document open and reads it again and again through
the same descriptor. When the user revokes access (scopefs revoke), the
next read fails with EPERM (SPEC S14) and this app crashes on it.

It starts accessing the document first, as every app must under the
default strict scopes (SPEC S6, S9). Its scenario catches it (exit 1),
after the README's session and docs/CLIENTS.md's world, from the checkout
(the sandbox shows it read-only):

    $ scopefs test docs/examples/scenarios/revoke-while-open.yaml --app com.example.app --expose "$PWD" -- \
          python3 "$PWD/docs/examples/scenarios/cached_descriptor_buggy.py" Providers/local/docs/file.txt \
          || echo "exit $?: caught"
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
with scopefs.accessing(path):
    fd = os.open(path, os.O_RDONLY)
    print("READY", flush=True)
    for _ in range(100):
        os.pread(fd, 64, 0)  # BUG: EPERM after a revoke is not handled
        time.sleep(0.05)
    os.close(fd)
print("done", flush=True)
