"""Sends a *request* of its own (version 1.0 has none): a violation."""

from base import answer, item, send, serve


def handle(method, params, request_id):
    if params.get("id") == "ask":
        send({"jsonrpc": "2.0", "id": 1, "method": "whoAreYou", "params": {}})
    answer(request_id, item(params.get("id", "x")))


serve(handle)
