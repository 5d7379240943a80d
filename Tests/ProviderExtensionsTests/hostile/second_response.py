"""Answers ``item "twice"`` twice (a second response is a violation)."""

import time

from base import answer, item, serve


def handle(method, params, request_id):
    answer(request_id, item(params.get("id", "x")))
    if params.get("id") == "twice":
        time.sleep(0.05)
        answer(request_id, item("twice"))


serve(handle)
