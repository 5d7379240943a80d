"""Sends notifications as fast as it can (about 10,000 a second: `changed`,
`log`, `$/progress` of no request, one it never defined) while it answers
``item`` normally."""

import threading
import time

from base import answer, item, notify, serve


def flood():
    kinds = [
        ("changed", {}),
        ("log", {"level": "info", "message": "flood"}),
        ("$/progress", {"id": 123456, "completed": 1, "total": 2}),
        ("somethingNew", {}),
    ]
    sent = 0
    start = time.monotonic()
    while True:
        method, params = kinds[sent % len(kinds)]
        notify(method, params)
        sent += 1
        if sent % 100 == 0:
            # About 10,000 a second: sleep off what is ahead of schedule.
            ahead = sent / 10000 - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)


def initialized(params):
    threading.Thread(target=flood, daemon=True).start()


serve(lambda method, params, request_id: answer(request_id, item(params["id"])), on_initialize=initialized)
