"""Exits with status 3 right after ``initialize``, unless the file named by
the option ``healed`` exists: a crash loop the owner can mend."""

import os
import sys
import threading

from base import answer, item, serve


def initialized(params):
    healed = params.get("options", {}).get("healed", "")
    if not os.path.exists(healed):
        threading.Timer(0.05, lambda: os._exit(3)).start()


serve(lambda method, params, request_id: answer(request_id, item(params.get("id", "x"))), on_initialize=initialized)
sys.exit(1)
