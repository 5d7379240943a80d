"""Run in the host's bubblewrap sandbox: ``fetch "probe"`` stages a JSON
report of what it could reach. The paths to try come as options: a secret
in the daemon's state directory, a file to create outside staging, a
folder outside every bind."""

import json
import os

from base import answer, item, serve

state = {}


def initialized(params):
    state["staging"] = params["stagingDirectory"]
    state["options"] = params["options"]


def attempt(action) -> str:
    try:
        action()
        return "allowed"
    except OSError as error:
        return f"denied: {error.strerror}"


def read(path):
    with open(path, "rb") as source:
        source.read(1)


def write(path):
    with open(path, "wb") as out:
        out.write(b"escaped")


def status() -> dict:
    fields = {}
    with open("/proc/self/status") as source:
        for line in source:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def handle(method, params, request_id):
    if method != "fetch":
        answer(request_id, item(params.get("id", "x")))
        return
    options = state["options"]
    fields = status()
    report = {
        "read_secret": attempt(lambda: read(options["secret"])),
        "write_outside": attempt(lambda: write(options["write"])),
        "list_private": attempt(lambda: os.listdir(options["private"])),
        "read_shadow": attempt(lambda: read("/etc/shadow")),
        "write_staging": attempt(lambda: write(os.path.join(state["staging"], "probe-write"))),
        "write_usr": attempt(lambda: write("/usr/probe")),
        "pid": os.getpid(),
        "uid": os.getuid(),
        "cap_eff": fields.get("CapEff"),
        "no_new_privs": fields.get("NoNewPrivs"),
        "environment": sorted(os.environ),
    }
    os.unlink(os.path.join(state["staging"], "probe-write")) if report["write_staging"] == "allowed" else None
    data = json.dumps(report).encode()
    path = os.path.join(state["staging"], "report")
    with open(path, "wb") as out:
        out.write(data)
    answer(request_id, {"path": path, "version": "v", "offset": 0, "length": len(data)})


serve(handle, on_initialize=initialized)
