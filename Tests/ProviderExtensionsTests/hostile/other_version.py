"""Speaks another protocol: answers ``initialize`` with ``unsupportedVersion``
(option ``answer: error``) or with a version it was not offered
(``answer: 1.3``), then behaves (``shutdown``, ``exit``)."""

import json
import sys

from base import answer, fail, send

for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        if message["params"]["options"].get("answer") == "error":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32014, "message": "I speak 2.0", "data": {"supported": ["2.0"]}},
                }
            )
        else:
            answer(request_id, {"protocolVersion": "1.3", "name": "future", "version": "9", "capabilities": {}})
    elif method == "shutdown":
        answer(request_id, {})
    elif method == "exit":
        sys.exit(0)
    elif request_id is not None:
        fail(request_id, -32015, "not initialized")
