"""Answers ``fetch`` with staged files that break the rules, chosen by id:

- ``good``: a correct file (5 bytes) in the staging folder;
- ``outside``: a file outside the staging folder (the option ``outside``);
- ``symlink``: a symlink in staging to that outside file;
- ``hardlink``: a hard link in staging to that outside file;
- ``size``: a 5-byte file whose answer says 9;
- ``subfolder``: a file in a folder inside staging;
- ``dotdot``: a path that climbs out of staging with ``..``;
- ``version``: a correct file of another version than asked.
"""

import os

from base import answer, item, serve

state = {}


def initialized(params):
    state["staging"] = params["stagingDirectory"]
    state["outside"] = params["options"]["outside"]


def staged(name: str, data: bytes = b"hello") -> str:
    path = os.path.join(state["staging"], name)
    with open(path, "wb") as out:
        out.write(data)
    return path


def handle(method, params, request_id):
    if method != "fetch":
        answer(request_id, item(params.get("id", "x")))
        return
    kind = params["id"]
    staging, outside = state["staging"], state["outside"]
    length = 5
    version = "v1"
    if kind == "good":
        path = staged("good")
    elif kind == "outside":
        path = outside
    elif kind == "symlink":
        path = os.path.join(staging, "link")
        os.symlink(outside, path)
    elif kind == "hardlink":
        path = os.path.join(staging, "hard")
        os.link(outside, path)
    elif kind == "size":
        path = staged("short")
        length = 9
    elif kind == "subfolder":
        os.makedirs(os.path.join(staging, "sub"), exist_ok=True)
        path = os.path.join(staging, "sub", "file")
        with open(path, "wb") as out:
            out.write(b"hello")
    elif kind == "dotdot":
        path = os.path.join(staging, "..", os.path.basename(outside))
    else:  # version
        path = staged("other-version")
        version = "v2"
    answer(request_id, {"path": path, "version": version, "offset": 0, "length": length})


serve(handle, on_initialize=initialized)
