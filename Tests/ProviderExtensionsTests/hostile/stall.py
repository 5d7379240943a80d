"""Never answers ``item "stall"`` and ignores ``$/cancel``: the host must
time the call out (ETIMEDOUT) and then kill and restart this process."""

from base import answer, item, serve


def handle(method, params, request_id):
    if params.get("id") != "stall":
        answer(request_id, item(params.get("id", "x")))


serve(handle)
