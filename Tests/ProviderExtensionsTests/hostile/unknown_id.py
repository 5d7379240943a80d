"""Answers ``item "stray"`` with a response to an id the daemon never sent."""

from base import answer, item, serve


def handle(method, params, request_id):
    if params.get("id") == "stray":
        answer(request_id + 1000, item("stray"))
    else:
        answer(request_id, item(params.get("id", "x")))


serve(handle)
