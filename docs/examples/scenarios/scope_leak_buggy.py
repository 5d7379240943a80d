#!/usr/bin/env python3
"""An app that reloads a document in a loop and starts accessing it on
every pass, but stops only once, at the end: each pass leaks a security
scope (SPEC S8). Harmless-looking until the app runs long enough to use up
its budget (SPEC S10: start fails with EDQUOT, for good); ScopeFS records
the leaked counters when the process exits (SPEC S11).

Its scenario catches the leak (exit 1), after the README's session and
docs/CLIENTS.md's world, from the checkout:

    $ scopefs test docs/examples/scenarios/scope-leak.yaml --app com.example.app --expose "$PWD" -- \
          python3 "$PWD/docs/examples/scenarios/scope_leak_buggy.py" Providers/local/docs/file.txt \
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
for _ in range(200):
    try:
        scopefs.start_accessing(path)  # BUG: a start on every pass...
        with open(path, "rb") as document:
            document.read()
    except PermissionError:
        print("lost access to the document", flush=True)
        break
    time.sleep(0.05)
scopefs.stop_accessing(path)  # ...and one stop at the end
print("done", flush=True)
