"""`scopefs portal`'s FileChooser backend (org.freedesktop.impl.portal.
FileChooser): a portal request becomes a pick the owner's `scopefs agent`
answers, on a real session bus (Debian's dbus-daemon). SPEC S45, S21a, S14.
"""

from __future__ import annotations

import json
import shutil

import pytest
from scopefs_harness import ALPHA, BETA, LOCAL, describe, run_bounded
from test_pick_requests import Agent
from test_portal import SYSTEM_PYTHON, Portal, SessionBus, privacy

BACKEND = "org.freedesktop.impl.portal.desktop.scopefs"
IMPL = "org.freedesktop.impl.portal.FileChooser"
DESKTOP_PATH = "/org/freedesktop/portal/desktop"
ERROR = "org.freedesktop.portal.Error."

# A direct caller of the backend, as the portal frontend calls it: Debian's
# python3 with python3-gi (GDBus). argv: BUS METHOD HANDLE APP OPTIONS,
# OPTIONS in GVariant text. Prints {"response", "results"} or {"error"}.
BACKEND_CALL = """
import json, sys
from gi.repository import Gio, GLib
bus = Gio.DBusConnection.new_for_address_sync(
    sys.argv[1], Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION)
method, handle, app, options = sys.argv[2:6]
try:
    args = GLib.Variant.parse(None, f"(objectpath '{handle}', '{app}', '', 'Pick', {options})")
    if len(sys.argv) > 6:  # a raw argument tuple: wrong types on purpose
        args = GLib.Variant.parse(None, sys.argv[6])
    reply = bus.call_sync("%s", "%s", "%s", method, args, None, 0, 60000, None).unpack()
    print(json.dumps({"response": reply[0], "results": reply[1]}))
except GLib.Error as error:
    print(json.dumps({"error": Gio.DBusError.get_remote_error(error)}))
""" % (BACKEND, DESKTOP_PATH, IMPL)


@pytest.fixture
def chooser(env):
    if not shutil.which("dbus-daemon"):
        pytest.fail("dbus-daemon is needed (make deps installs it)")
    env.mount()
    bus = SessionBus(env.root)
    (env.root / "doc").mkdir()
    served = Portal(env, bus, env.root / "doc")
    yield served
    served.stop()
    bus.stop()


def call_backend(
    portal,
    method,
    app,
    options="@a{sv} {}",
    raw=None,
    handle="/org/freedesktop/portal/desktop/request/1_1/t",
    prefix=(),
):
    argv = [*prefix, SYSTEM_PYTHON, "-c", BACKEND_CALL, portal.bus.address, method, handle, app, options]
    if raw:
        argv.append(raw)
    p = run_bounded(argv, 90, portal.environ, what=f"backend {method}")
    assert p.returncode == 0, describe(p)
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_open_file_becomes_a_pick_the_agent_answers(env, chooser):
    """SPEC S21a, S45: OpenFile for an app becomes a pick for that app;
    the scripted agent's choice comes back as the host file's URI, response 0."""
    agent = Agent(env, [{"choose": [f"{LOCAL}:docs/report.txt"]}], count=1)
    answer = call_backend(
        chooser, "OpenFile", ALPHA, "{'filters': <[('Text', [(uint32 0, '*.txt'), (uint32 1, 'text/plain')])]>}"
    )
    out = agent.finish()
    assert answer == {"response": 0, "results": {"uris": [f"file://{env.backing(LOCAL)}/docs/report.txt"]}}, out
    assert ALPHA in out
    [grant] = privacy(env, ALPHA)
    assert grant["path"] == "docs/report.txt"


def test_cancelled_pick_answers_1_and_grants_nothing(env, chooser):
    """SPEC S21a: the owner cancels: response 1 (the impl interface's
    "cancelled by the user"), no URI, no grant."""
    agent = Agent(env, [{"cancel": True}], count=1)
    answer = call_backend(chooser, "OpenFile", ALPHA, "{'multiple': <true>}")
    agent.finish()
    assert answer == {"response": 1, "results": {}}
    assert privacy(env, ALPHA) == []


def test_no_agent_answers_2(env, chooser):
    """SPEC S21a: nobody to ask (no `scopefs agent`): response 2, ended otherwise."""
    assert call_backend(chooser, "OpenFile", ALPHA) == {"response": 2, "results": {}}
    assert privacy(env, ALPHA) == []


@pytest.mark.parametrize(
    ("options", "raw", "app", "error"),
    [
        ("{'multiple': <'yes'>}", None, ALPHA, ERROR + "InvalidArgument"),
        ("{'filters': <[('x', [(uint32 7, '*')])]>}", None, ALPHA, ERROR + "InvalidArgument"),
        ("{'current_folder': <b'relative'>}", None, ALPHA, ERROR + "InvalidArgument"),
        ("@a{sv} {}", None, "", ERROR + "NotAllowed"),
        ("@a{sv} {}", None, "../etc", ERROR + "InvalidArgument"),
        ("@a{sv} {}", "('not-a-path', 'a', '', '', @a{sv} {})", ALPHA, "org.freedesktop.DBus.Error.InvalidArgs"),
    ],
)
def test_backend_refuses_bad_calls_and_grants_nothing(env, chooser, options, raw, app, error):
    """SPEC S45: wrong types, a pattern kind that is neither glob nor MIME
    type, a relative folder, no app or a bad app id: a clear D-Bus error
    before the agent is asked, nothing granted."""
    agent = Agent(env, [{"choose": [f"{LOCAL}:docs/report.txt"]}], count=1)
    answer = call_backend(chooser, "OpenFile", app, options, raw=raw)
    assert answer == {"error": error}
    assert privacy(env, ALPHA) == []
    agent.popen.kill()
    agent.finish()


def test_app_process_cannot_call_the_backend(env, chooser):
    """SPEC S5: the backend trusts the app id its caller names, so it
    answers the owner's processes (the portal frontend) only: an app process
    of `scopefs run` naming another app (or itself) is refused."""
    prefix = env.run_argv(ALPHA, [])
    for app in (BETA, ALPHA):
        assert call_backend(chooser, "OpenFile", app, prefix=prefix) == {"error": ERROR + "NotAllowed"}
    assert privacy(env, ALPHA) == [] and privacy(env, BETA) == []
