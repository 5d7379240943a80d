"""Answers ``item`` with a line that is not JSON (a protocol violation)."""

from base import answer, item, serve, write_line


def handle(method, params, request_id):
    if params.get("id") == "bad":
        write_line("this is not JSON {")
    else:
        answer(request_id, item(params.get("id", "x")))


serve(handle)
