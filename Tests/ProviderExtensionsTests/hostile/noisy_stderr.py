"""On ``item "noise"`` writes a 10,000-byte line and then 2,000 short
lines to stderr, as fast as it can, before answering."""

import sys

from base import answer, item, serve


def handle(method, params, request_id):
    if params.get("id") == "noise":
        sys.stderr.write("L" * 10000 + "\n")
        for n in range(2000):
            sys.stderr.write(f"noise {n}\n")
        sys.stderr.flush()
    answer(request_id, item(params.get("id", "x")))


serve(handle)
