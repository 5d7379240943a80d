"""Lists two files whose ids (and names) differ only by Unicode
normalisation, as a store keyed by path (S3) has them: `café.txt` in NFC
and in NFD."""

from base import CAPABILITIES, answer, item, serve

COMPOSED = "caf\u00e9.txt"
DECOMPOSED = "cafe\u0301.txt"


def handle(method, params, request_id):
    if method == "list":
        answer(request_id, {"items": [item(COMPOSED), item(DECOMPOSED)], "nextPage": None})
    else:
        answer(request_id, item(params.get("id", COMPOSED)))


serve(handle, CAPABILITIES | {"changes": "none"})
