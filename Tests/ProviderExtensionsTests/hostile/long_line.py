"""Answers ``item`` with a 2 MiB line: more than the 1 MiB limit."""

from base import answer, item, serve, write_line


def handle(method, params, request_id):
    if params.get("id") == "long":
        write_line('{"jsonrpc": "2.0", "id": %d, "result": "%s"}' % (request_id, "x" * (2 << 20)))
    else:
        answer(request_id, item(params.get("id", "x")))


serve(handle)
