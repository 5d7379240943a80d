"""Answers each ``item`` after 150 ms on a thread of its own, and
``item "max"`` with the most requests it ever had in flight at once (in
the item's size): the host must keep that at 16 or fewer."""

import threading
import time

from base import answer, item, serve

lock = threading.Lock()
in_flight = 0
most = 0


def work(params, request_id):
    global in_flight
    time.sleep(0.15)
    with lock:
        in_flight -= 1
    answer(request_id, item(params["id"]))


def handle(method, params, request_id):
    global in_flight, most
    if params.get("id") == "max":
        reply = item("max")
        reply["size"] = most
        answer(request_id, reply)
        return
    with lock:
        in_flight += 1
        most = max(most, in_flight)
    threading.Thread(target=work, args=(params, request_id)).start()


serve(handle)
