"""A D-Bus client of org.freedesktop.portal.Documents for test_portal.py.

Run with Debian's /usr/bin/python3 (python3-dbus), not the test's Python:
    portal_client.py BUS_ADDRESS CALLS_JSON
Each call is {"method", "signature", "args"}; an argument may be
{"fd": PATH, "flags": ["O_PATH", ...]} (opened here, passed as a handle),
{"pipe": true} (a pipe's read end) or {"bytes": TEXT} (an `ay`, with a
closing NUL). Prints one JSON line: per call {"reply": ...} or
{"error": D-Bus error name}. Its own process is the caller the portal sees.
"""

import json
import os
import sys

import dbus

NAME = "org.freedesktop.portal.Documents"
PATH = "/org/freedesktop/portal/documents"


def argument(value, opened):
    if isinstance(value, list):
        return [argument(item, opened) for item in value]
    if isinstance(value, dict) and "fd" in value:
        flags = 0
        for flag in value.get("flags", ["O_RDONLY"]):
            flags |= getattr(os, flag)
        fd = os.open(value["fd"], flags)
        opened.append(fd)
        return dbus.types.UnixFd(fd)
    if isinstance(value, dict) and "pipe" in value:
        reading, writing = os.pipe()
        opened.extend([reading, writing])
        return dbus.types.UnixFd(reading)
    if isinstance(value, dict) and "bytes" in value:
        return dbus.ByteArray(value["bytes"].encode() + b"\0")
    return value


def plain(value):
    """A reply as JSON: byte arrays are paths (closing NUL dropped)."""
    if isinstance(value, (dbus.ByteArray, bytes)):
        return bytes(value).rstrip(b"\0").decode()
    if isinstance(value, dbus.Array) and value.signature == "y":
        return bytes(value).rstrip(b"\0").decode()
    if isinstance(value, (dbus.Dictionary, dict)):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (dbus.Array, dbus.Struct, list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, (dbus.String, dbus.ObjectPath)):
        return str(value)
    if isinstance(value, (dbus.UInt32, dbus.Int32, dbus.Boolean, int)):
        return int(value)
    return value


def main():
    bus = dbus.bus.BusConnection(sys.argv[1])
    results = []
    for call in json.loads(sys.argv[2]):
        opened = []
        try:
            args = [argument(a, opened) for a in call["args"]]
            interface = call.get("interface", NAME)
            reply = bus.call_blocking(NAME, PATH, interface, call["method"], call["signature"], args, timeout=20)
            results.append({"reply": plain(reply)})
        except dbus.exceptions.DBusException as exc:
            results.append({"error": exc.get_dbus_name()})
        finally:
            for fd in opened:
                os.close(fd)
    print(json.dumps(results))


main()
