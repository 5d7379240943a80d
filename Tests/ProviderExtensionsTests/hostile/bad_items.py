"""Answers ``list`` with items that break the limits beside good ones, and
``list "big"`` with more items than its maxPageSize (20)."""

from base import CAPABILITIES, answer, item, serve


def handle(method, params, request_id):
    if method == "list" and params["id"] == "big":
        answer(request_id, {"items": [item(f"b{n}", parent="big") for n in range(21)], "nextPage": None})
    elif method == "list":
        bad_version = item("longversion")
        bad_version["version"]["content"] = "v" * 4097
        wrong_parent = item("elsewhere", parent="other")
        items = [
            item("good1"),
            item("dotdot", name=".."),
            item("dot", name="."),
            item("slash", name="a/b"),
            item("empty", name=""),
            item("nul", name="a\u0000b"),
            item("long", name="n" * 256),
            item("i" * 2049, name="longid"),
            item("", name="emptyid"),
            bad_version,
            wrong_parent,
            {"id": "notanitem"},
            item("good2", name="n" * 255),
        ]
        answer(request_id, {"items": items, "nextPage": None})
    elif method == "item" and params["id"] == "shape":
        answer(request_id, ["not", "an", "item"])
    elif method == "changes":
        answer(request_id, {"updated": [item("ok"), item("bad", name="..")], "deleted": ["gone", 7], "anchor": "a2"})
    else:
        answer(request_id, item(params.get("id", "x"), name=".."))


serve(handle, CAPABILITIES | {"maxPageSize": 20})
