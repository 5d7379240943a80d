"""`scopefs portal`'s FileChooser backend (org.freedesktop.impl.portal.
FileChooser): a portal request becomes a pick the owner's `scopefs agent`
answers, on a real session bus (Debian's dbus-daemon). SPEC S45, S21a, S14.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from doc_scope_helpers import mount
from pick_agent import Agent
from scopefs_harness import (
    ALPHA,
    BETA,
    LOCAL,
    NOBODY,
    REPORT_BYTES,
    Env,
    binary_problem,
    describe,
    run_bounded,
    wait_for,
)
from test_portal import AS_NOBODY, BUS_CONFIG, SYSTEM_PYTHON, Portal, SessionBus, privacy

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
    mount(env)  # the default mount: strict scopes
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


# An app's FileChooser.OpenFile through the portal frontend, from inside
# `scopefs run --portal-bus` (Debian's python3 with python3-gi): waits for
# the Request's Response, reads the first returned file, then after the
# test's go reads it again on the same descriptor.
OPEN_THROUGH_FRONTEND = """
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
token = "scopefs1"
handle = "/org/freedesktop/portal/desktop/request/%s/%s" % (bus.get_unique_name()[1:].replace(".", "_"), token)
loop, got = GLib.MainLoop(), {}
def on_response(connection, sender, path, interface, name, parameters, *rest):
    got["response"], got["results"] = parameters.unpack()
    loop.quit()
bus.signal_subscribe(None, "org.freedesktop.portal.Request", "Response", handle, None, 0, on_response)
options = sys.argv[1].replace("TOKEN", token)
arguments = GLib.Variant.parse(GLib.VariantType("(ssa{sv})"), "('', 'Open', %s)" % options, None, None)
bus.call_sync("org.freedesktop.portal.Desktop", "/org/freedesktop/portal/desktop",
              "org.freedesktop.portal.FileChooser", "OpenFile", arguments, None, 0, 60000, None)
GLib.timeout_add_seconds(60, loop.quit)
loop.run()
uris = got.get("results", {}).get("uris", [])
result = {"response": got.get("response"), "uris": uris}
if uris:
    path = GLib.filename_from_uri(uris[0])[0]
    fd = os.open(path, os.O_RDONLY)
    result["read"] = os.pread(fd, 16, 0).hex()
step(result)
if uris:
    emit({"again": outcome(lambda: os.pread(fd, 16, 0).hex())})
else:
    emit({})
"""


class AppAccountBus(SessionBus):
    """A SessionBus that also accepts connections of other users: a root
    owner's apps run as the app account, and so does their bus proxy."""

    def __init__(self, root: Path):
        self.socket = root / "bus"
        self.address = f"unix:path={self.socket}"
        self.config = root / "bus.conf"
        config = BUS_CONFIG.format(address=self.address)
        self.config.write_text(config.replace('<allow own="*"/>', '<allow own="*"/>\n    <allow user="*"/>'))
        self.config.chmod(0o644)
        self.prefix = []
        self.process = None
        self.start()


class Frontend:
    """Debian's xdg-desktop-portal (1.16) on the test's bus, finding only
    ScopeFS's backend: XDG_DESKTOP_PORTAL_DIR names the folder of .portal
    files it reads, XDG_CURRENT_DESKTOP the desktop whose `UseIn=` it picks.
    PREFIX runs it as the owner when the owner is not root."""

    BINARY = "/usr/libexec/xdg-desktop-portal"

    def __init__(self, env, portal, prefix: list[str] | None = None):
        self.prefix = prefix or []
        portals = env.root / "portals"
        portals.mkdir()
        shutil.copy(Path(__file__).resolve().parents[2] / "mount-scripts" / "portal" / "scopefs.portal", portals)
        environ = dict(portal.environ, XDG_DESKTOP_PORTAL_DIR=str(portals), XDG_CURRENT_DESKTOP="scopefs")
        self.log = env.root / "frontend.err"
        with open(self.log, "w") as err:
            self.process = subprocess.Popen(
                [*(prefix or []), self.BINARY, "--replace"],
                stdout=err,
                stderr=err,
                env=environ,
                start_new_session=True,
            )

        def owned():
            assert self.process.poll() is None, "xdg-desktop-portal exited:\n" + self.log.read_text()
            p = bus_call(self.prefix, portal.environ, "NameHasOwner", "org.freedesktop.portal.Desktop")
            return "true" in p.stdout

        wait_for("xdg-desktop-portal owning org.freedesktop.portal.Desktop", owned, timeout=20)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def serve_desktop(env, runtime: Path, prefix: list[str] | None = None):
    """A session bus with `scopefs portal` (its layout at the default place,
    $XDG_RUNTIME_DIR/doc, RUNTIME/doc), the frontend, and a mounted
    ScopeFS, all run by PREFIX (the owner's account when it is not root)."""
    if not Path(Frontend.BINARY).exists() or not shutil.which("xdg-dbus-proxy"):
        pytest.fail("xdg-desktop-portal and xdg-dbus-proxy are needed (make deps installs them)")
    mount(env)  # the default mount: strict scopes
    # A root owner's apps (and their bus proxies) run as the app account; a
    # non-root owner's bus is a plain session bus, its owner's alone.
    bus = SessionBus(runtime.parent, prefix) if prefix else AppAccountBus(runtime.parent)
    env.base_env.update(DBUS_SESSION_BUS_ADDRESS=bus.address, XDG_RUNTIME_DIR=str(runtime))
    served = Portal(env, bus, runtime / "doc", caller=prefix)
    frontend = Frontend(env, served, prefix)
    yield served
    frontend.stop()
    served.stop()
    bus.stop()


@pytest.fixture
def desktop(env):
    runtime = env.root / "run"
    runtime.mkdir(mode=0o700)
    (runtime / "doc").mkdir()
    yield from serve_desktop(env, runtime)


def open_read_and_lose(env, desktop, revoker: str, owner: list[str] | None = None) -> None:
    """The body of the end-to-end OpenFile tests: OWNER runs the owner's
    own calls to the portal (the owner's account when it is not root)."""
    agent = Agent(env, [{"choose": [f"{LOCAL}:docs/report.txt"]}], count=1)
    options = "{'handle_token': <'TOKEN'>, 'filters': <[('Text', [(uint32 0, '*.txt')])]>}"
    app = env.app_session(ALPHA, OPEN_THROUGH_FRONTEND, options, sandbox=True, extra=("--portal-bus",))
    first = app.recv(timeout=60)
    log = agent.finish()
    assert first["response"] == 0, (first, log, desktop.log.read_text())
    [uri] = first["uris"]
    document = Path(uri.removeprefix("file://"))
    assert document.parent.parent == desktop.mountpoint, "a document path of the Documents portal"
    assert bytes.fromhex(first["read"]) == REPORT_BYTES[:16]
    [grant] = privacy(env, ALPHA)
    assert grant["path"] == "docs/report.txt" and grant["state"] == "active"
    if revoker == "scopefs":
        env.cli("revoke", ALPHA, f"{LOCAL}:docs/report.txt")
    else:
        [answer] = desktop.calls(("RevokePermissions", "ssas", [document.parent.name, ALPHA, ["read"]]), prefix=owner)
        assert answer == {"reply": None}, answer
    app.send()
    assert app.recv() == {"again": {"errno": "EPERM"}}
    assert app.finish() == 0, app.stderr()


@pytest.mark.parametrize("revoker", ["scopefs", "portal"])
def test_app_opens_a_file_through_the_portal_and_loses_it(env, desktop, revoker):
    """SPEC S45, S21a, S14: an app in the default sandbox (strict scopes)
    calls org.freedesktop.portal.FileChooser.OpenFile on the frontend
    through its filtered bus; ScopeFS's backend asks the scripted agent;
    the frontend exports the choice through the Documents portal (ScopeFS
    again) and hands the app a document path, which it reads. The owner
    revokes (`scopefs revoke`, or the portal's RevokePermissions): the next
    read on the same descriptor fails with EPERM."""
    open_read_and_lose(env, desktop, revoker)


# ---------------------------------------------------------------------------
# a non-root owner


class OwnerNamespace:
    """A private mount namespace whose /dev/fuse any user may open, as
    test_attacks_host_root.py's NOBODY_SESSION arranges it (/dev/fuse may be
    0600, and libfuse does not fall back to fusermount3 on EACCES). The test
    process itself enters it while a non-root owner's session runs, so the
    helpers (mount checks, reads of the document layout) and every process
    they start see that owner's mounts; leaving restores the test's own."""

    CLONE_NEWNS = 0x00020000
    ARRANGE = r"""
set -e
mount -t tmpfs -o mode=755 tmpfs "$1"
mknod -m 666 "$1/fuse" c 10 229
mount --bind "$1/fuse" /dev/fuse
echo ready
exec cat
"""

    def __init__(self):
        self.dev = Path(tempfile.mkdtemp(prefix="scopefs-ns-dev-", dir="/tmp"))
        # The holder keeps the namespace until its stdin closes.
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", self.ARRANGE, "arrange", str(self.dev)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.cwd = os.getcwd()
        self.home = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        try:
            assert self.holder.stdout.readline().strip() == "ready", "the owner's mount namespace was not arranged"
            self._enter(f"/proc/{self.holder.pid}/ns/mnt")
        except BaseException:
            self._end_holder()
            raise

    def _enter(self, namespace: str | int) -> None:
        fd = namespace if isinstance(namespace, int) else os.open(namespace, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if self.libc.setns(fd, self.CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), f"setns {namespace}")
        finally:
            if fd != namespace:
                os.close(fd)
        os.chdir(self.cwd)  # setns moves the working directory to the namespace's root

    def leave(self) -> None:
        self._enter(self.home)
        self._end_holder()

    def _end_holder(self) -> None:
        os.close(self.home)
        self.holder.stdin.close()
        self.holder.stdout.close()
        self.holder.wait(timeout=10)
        os.rmdir(self.dev)


class NonRootOwnerEnv(Env):
    """An Env whose owner is uid 65534 (NOBODY): every `scopefs` it runs
    (init, mount, agent, run, privacy, revoke, portal) runs as that user,
    with a home, state, mount point and XDG_RUNTIME_DIR of its own, and its
    files are the owner's. Its mount is the default one (strict scopes)."""

    def __init__(self):
        super().__init__()
        self.mnt.rmdir()
        home = self.root / "owner"
        self.state, self.mnt, self.runtime = home / "state", home / "mnt", home / "run"
        for folder in (home, self.mnt, self.runtime, self.runtime / "doc"):
            folder.mkdir()
            os.chown(folder, NOBODY, NOBODY)
        self.runtime.chmod(0o700)
        self.base_env.update(HOME=str(home), XDG_STATE_HOME=str(home / "xdg-state"), XDG_RUNTIME_DIR=str(self.runtime))

    def cli_argv(self, *args, state: Path | None = None) -> list[str]:
        return [*AS_NOBODY, "--", *super().cli_argv(*args, state=state)]

    def mount_args(self, open_files: str | None = None, allow_other: bool = False) -> list:
        return ["mount", self.mnt]

    def owner_password_file(self, server_file: Path) -> Path:
        """A copy of its own (0600): `init --database` refuses a password
        file another user owns or others may read (77)."""
        copy = self.root / "owner" / "owner.pw"
        shutil.copy(server_file, copy)
        os.chown(copy, NOBODY, NOBODY)
        copy.chmod(0o600)
        return copy

    def _make_backing_tree(self) -> None:
        super()._make_backing_tree()
        for folder, _, files in os.walk(self.root / "backing"):
            for path in [folder, *(os.path.join(folder, name) for name in files)]:
                os.chown(path, NOBODY, NOBODY)


@pytest.fixture
def nobody_env():
    """The `env` fixture's world, owned by NOBODY, inside OwnerNamespace."""
    problem = binary_problem()
    if problem:
        pytest.fail(problem)
    namespace = OwnerNamespace()
    try:
        world = NonRootOwnerEnv()
        try:
            world.init_world()
            yield world
        finally:
            problems = world.teardown()
    finally:
        namespace.leave()
    if problems:
        pytest.fail("teardown problems:\n- " + "\n- ".join(problems), pytrace=False)


@pytest.fixture
def nobody_desktop(nobody_env):
    yield from serve_desktop(nobody_env, nobody_env.runtime, AS_NOBODY)


@pytest.mark.parametrize("revoker", ["scopefs", "portal"])
def test_a_non_root_owners_app_opens_a_file_through_the_portal_and_loses_it(nobody_env, nobody_desktop, revoker):
    """SPEC S45, S21a, S14 with a non-root owner (uid 65534): its session
    bus, `scopefs portal`, the frontend, `scopefs mount` (the default
    mount), the scripted agent and `scopefs run --portal-bus` all run as
    that user; the app, in the default sandbox with the owner's uid, opens
    a file through the frontend, reads it, and loses it at the revoke."""
    names = ("org.freedesktop.portal.Desktop", "org.freedesktop.portal.Documents", BACKEND)
    owners = {name: name_owner_uid(nobody_desktop, name) for name in names}
    assert owners == dict.fromkeys(names, NOBODY), owners
    assert {process_uid(nobody_env.daemon.pid), process_uid(nobody_desktop.bus.process.pid)} == {NOBODY}
    assert json.loads(nobody_env.cli("status", "--json").stdout)["daemon"]["scopes"] == "strict"
    open_read_and_lose(nobody_env, nobody_desktop, revoker, owner=AS_NOBODY)


@pytest.fixture(params=["root owner", "non-root owner"])
def owner_desktop(request):
    """(env, desktop, name) of a root owner, or of a non-root owner (uid 65534)
    whose bus, portals, mount, agent and app all run as that user."""
    if request.param == "root owner":
        return request.getfixturevalue("env"), request.getfixturevalue("desktop"), "root-owner"
    return request.getfixturevalue("nobody_env"), request.getfixturevalue("nobody_desktop"), "non-root-owner"


def name_owner_uid(portal, name: str) -> int:
    """The uid of the process owning NAME on the portal's bus."""
    p = bus_call(portal.prefix, portal.environ, "GetConnectionUnixUser", name)
    assert p.returncode == 0, describe(p)
    return int(p.stdout.strip().strip("(),").split()[-1])


def bus_call(prefix: list[str], environ: dict, method: str, *args: str):
    """`gdbus call` of the bus daemon's own METHOD (org.freedesktop.DBus),
    run by PREFIX (the owner's account) on the session bus of ENVIRON."""
    argv = [*prefix, "gdbus", "call", "--session", "--dest", "org.freedesktop.DBus"]
    argv += ["--object-path", "/org/freedesktop/DBus", "--method", f"org.freedesktop.DBus.{method}", *args]
    return run_bounded(argv, 10, environ, what=method)


def process_uid(pid: int) -> int:
    return os.stat(f"/proc/{pid}").st_uid


# From inside the sandbox: what the app's bus lets it reach.
PROBE_BUS = """
from gi.repository import Gio, GLib
result = {"address": os.environ.get("DBUS_SESSION_BUS_ADDRESS"), "raw": os.path.exists(sys.argv[1])}
if result["address"]:
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    def call(name, path, interface, method, arguments):
        try:
            bus.call_sync(name, path, interface, method, arguments, None, 0, 20000, None)
            return "ok"
        except GLib.Error as error:
            return Gio.DBusError.get_remote_error(error)
    names = bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ListNames",
                          None, None, 0, 20000, None).unpack()[0]
    result["names"] = sorted(n for n in names if not n.startswith(":"))
    result["backend"] = call(sys.argv[2], "/org/freedesktop/portal/desktop", "org.freedesktop.impl.portal.FileChooser",
                             "OpenFile", GLib.Variant.parse(None, "(objectpath '/org/freedesktop/portal/desktop/request/1_1/x', '%s', '', '', @a{sv} {})" % sys.argv[3]))
    result["portal"] = call("org.freedesktop.portal.Documents", "/org/freedesktop/portal/documents",
                            "org.freedesktop.portal.Documents", "GetMountPoint", None)
    result["own"] = call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "RequestName",
                         GLib.Variant("(su)", ("org.freedesktop.portal.Desktop", 4)))
emit(result)
"""


def test_app_bus_reaches_the_portals_only(env, desktop):
    """SPEC S5, S45 (attack): an app given the bus (`--portal-bus`) talks
    through xdg-dbus-proxy: it sees and calls the portals, but not another
    name (ScopeFS's own FileChooser backend, which would let it name any
    app), and cannot own a portal's name to impersonate it; nothing is
    granted. Without `--portal-bus` the sandbox shows no bus at all."""
    agent = Agent(env, [{"choose": [f"{LOCAL}:docs/report.txt"]}], count=1)
    bus_socket = str(desktop.bus.socket)
    session = env.app_session(ALPHA, PROBE_BUS, bus_socket, BACKEND, BETA, sandbox=True, extra=("--portal-bus",))
    probe = session.recv(timeout=60)
    assert session.finish() == 0, session.stderr()
    agent.popen.kill()
    agent.finish()
    assert probe["address"] == "unix:path=/run/scopefs/bus" and not probe["raw"], probe
    assert BACKEND not in probe["names"], probe
    assert all(name.startswith("org.freedesktop.portal.") or name == "org.freedesktop.DBus" for name in probe["names"])
    assert probe["backend"] == "org.freedesktop.DBus.Error.ServiceUnknown", probe
    assert probe["portal"] == "ok", "the portals are reachable"
    assert probe["own"] != "ok", probe
    assert privacy(env, BETA) == [] and privacy(env, ALPHA) == []
    plain = env.app_json(ALPHA, PROBE_BUS, bus_socket, BACKEND, BETA, sandbox=True)
    assert plain == {"address": None, "raw": False}


def test_open_several_files_and_a_folder(env, chooser):
    """SPEC S21a: `multiple` lets the agent choose several items, each
    answered as a URI; `directory` picks a folder."""
    agent = Agent(env, [{"choose": [f"{LOCAL}:docs/report.txt", f"{LOCAL}:docs/secret.txt"]}], count=1)
    several = call_backend(chooser, "OpenFile", ALPHA, "{'multiple': <true>}")
    agent.finish()
    docs = env.backing(LOCAL) / "docs"
    assert several == {"response": 0, "results": {"uris": [f"file://{docs}/report.txt", f"file://{docs}/secret.txt"]}}
    agent = Agent(env, [{"choose": [f"{LOCAL}:docs/report.txt"]}], count=1)
    one = call_backend(chooser, "OpenFile", BETA, "{'directory': <true>}")
    agent.finish()
    assert one == {"response": 2, "results": {}}, "a file is no answer to a folder request"
    assert privacy(env, BETA) == []
    agent = Agent(env, [{"choose": [f"{LOCAL}:deep"]}], count=1)
    folder = call_backend(chooser, "OpenFile", BETA, "{'directory': <true>}")
    agent.finish()
    assert folder == {"response": 0, "results": {"uris": [f"file://{env.backing(LOCAL)}/deep"]}}


def test_save_file_makes_the_file_in_the_chosen_folder(env, chooser):
    """SPEC S21a: SaveFile asks the agent for a folder and answers the file
    to save there, made (empty) so the Documents portal can export it; a
    name with a slash is refused before the agent is asked."""
    agent = Agent(env, [{"choose": [f"{LOCAL}:docs"]}], count=1)
    saved = call_backend(chooser, "SaveFile", ALPHA, "{'current_name': <'new note.txt'>}")
    agent.finish()
    target = env.backing(LOCAL) / "docs" / "new note.txt"
    assert saved == {"response": 0, "results": {"uris": [f"file://{env.backing(LOCAL)}/docs/new%20note.txt"]}}
    assert target.exists() and target.stat().st_size == 0
    bad = call_backend(chooser, "SaveFile", ALPHA, "{'current_name': <'../escape.txt'>}")
    assert bad == {"error": ERROR + "InvalidArgument"}
    assert not (env.backing(LOCAL) / "escape.txt").exists()


def test_closed_request_answers_2_at_once(env, chooser):
    """The impl Request's Close (the frontend's, when the app closes its
    request) answers the waiting call with response 2 without waiting for
    the agent, whose answer is then dropped."""
    handle = "/org/freedesktop/portal/desktop/request/1_1/closing"
    agent = Agent(env, [{"waitMs": 4000, "cancel": True}], count=1)
    argv = [SYSTEM_PYTHON, "-c", BACKEND_CALL, chooser.bus.address, "OpenFile", handle, ALPHA, "@a{sv} {}"]
    waiting = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=chooser.environ)
    wait_for("the backend to hold the request", lambda: f"(request {handle}) asks the agent" in chooser.log.read_text())
    started = time.monotonic()
    closed = run_bounded(
        [
            "gdbus",
            "call",
            "--session",
            "--dest",
            BACKEND,
            "--object-path",
            handle,
            "--method",
            "org.freedesktop.impl.portal.Request.Close",
        ],
        20,
        chooser.environ,
        what="Close",
    )
    assert closed.returncode == 0, describe(closed)
    out, _ = waiting.communicate(timeout=20)
    assert json.loads(out.strip().splitlines()[-1]) == {"response": 2, "results": {}}
    assert time.monotonic() - started < 3, "answered at Close, not when the agent answered"
    agent.finish()
    assert privacy(env, ALPHA) == []


def test_filters_reach_the_agent_as_types(env, chooser):
    """SPEC S21a: the filters' types (a glob through shared-mime-info) are
    the pick's: the agent cannot hand a text file to a request for PNG
    images (response 2, nothing granted), and can for `*.txt`."""
    agent = Agent(env, [{"choose": [f"{LOCAL}:docs/report.txt"]}], count=1)
    images = call_backend(chooser, "OpenFile", ALPHA, "{'filters': <[('Images', [(uint32 0, '*.png')])]>}")
    out = agent.finish()
    assert images == {"response": 2, "results": {}}, out
    assert privacy(env, ALPHA) == []
    agent = Agent(env, [{"choose": [f"{LOCAL}:docs/report.txt"]}], count=1)
    text = call_backend(chooser, "OpenFile", ALPHA, "{'current_filter': <('Text', [(uint32 0, '*.TXT')])>}")
    agent.finish()
    assert text["response"] == 0, text


SAVE_THROUGH_FRONTEND = OPEN_THROUGH_FRONTEND.replace('"OpenFile", arguments', '"SaveFile", arguments').replace(
    """    fd = os.open(path, os.O_RDONLY)
    result["read"] = os.pread(fd, 16, 0).hex()""",
    """    with open(path, "w") as saved:  # as any portal app saves: to the path it was given
        saved.write("saved by the app")
    fd = os.open(path, os.O_RDONLY)
    result["read"] = os.pread(fd, 64, 0).decode()""",
)


def test_app_saves_through_the_portal(env, desktop):
    """SPEC S45, S21a: SaveFile through the frontend, on the default mount
    (strict scopes): the agent picks the folder, the backend makes the
    file, the frontend exports it (AddNamedFull) and the app gets its
    document path, writes to it as an unchanged portal app does, and the
    file in the chosen folder holds what it wrote."""
    agent = Agent(env, [{"choose": [f"{LOCAL}:docs"]}], count=1)
    options = "{'handle_token': <'TOKEN'>, 'current_name': <'saved.txt'>}"
    app = env.app_session(ALPHA, SAVE_THROUGH_FRONTEND, options, sandbox=True, extra=("--portal-bus",))
    result = app.recv(timeout=60)
    agent.finish()
    assert result["response"] == 0, result
    [uri] = result["uris"]
    assert Path(uri.removeprefix("file://")).parent.parent == desktop.mountpoint
    assert result["read"] == "saved by the app"
    assert (env.backing(LOCAL) / "docs" / "saved.txt").read_text() == "saved by the app"
    app.send()
    app.recv()
    assert app.finish() == 0, app.stderr()
