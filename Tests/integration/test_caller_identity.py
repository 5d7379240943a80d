"""Who is calling (issue 46, finding 2; SPEC S5, S45): the document portal,
its layout and its FileChooser backend tell app processes from the owner's
with the daemon's own attribution, whatever it is (run cgroups, or process
events where the owner cannot make cgroups).

The attack: with a non-root owner, an app run with `--portal-bus` called
the Documents portal through its xdg-dbus-proxy and was taken for the
owner (the portal looked for a `scopefs-run-` cgroup, which such an owner's
runs do not have): `List` of another app's documents gave their ids and
host paths, `GrantPermissions` gave the app another app's document, which
it then read through `$XDG_RUNTIME_DIR/doc`, and `Delete` removed one.
Every such call now gets org.freedesktop.portal.Error.NotAllowed
(docs/PORTAL.md, "Who may call"), and the owner's own calls still work.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from doc_scope_helpers import mount
from scopefs_harness import ALPHA, BETA, LOCAL, REPORT_BYTES
from test_portal import AS_NOBODY, ERROR, Portal, SessionBus, privacy
from test_portal_chooser import AppAccountBus, nobody_env  # noqa: F401 (a fixture)

# From inside the sandbox, through the app's bus (its xdg-dbus-proxy):
# what the Documents portal answers the app about another app's documents.
# argv: OTHER_APP OWN_APP DOC OTHER_DOC NAME DOC_MOUNT.
ATTACK = """
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
def call(method, signature=None, *args):
    try:
        reply = bus.call_sync("org.freedesktop.portal.Documents", "/org/freedesktop/portal/documents",
                              "org.freedesktop.portal.Documents", method,
                              GLib.Variant(signature, args) if signature else None, None, 0, 20000, None)
        return {"ok": str(reply.unpack())[:400]}
    except GLib.Error as error:
        return {"error": Gio.DBusError.get_remote_error(error)}
other, mine, doc, other_doc, name, doc_mount = sys.argv[1:7]
result = {
    "mountPoint": "ok" in call("GetMountPoint"),
    "list": call("List", "(s)", other),
    "info": call("Info", "(s)", doc),
    "hostPaths": call("GetHostPaths", "(as)", [doc]),
    "grant": call("GrantPermissions", "(ssas)", doc, mine, ["read", "write"]),
}
result["read"] = outcome(lambda: read_bytes(os.path.join(doc_mount, doc, name))[:16].hex())
result["delete"] = call("Delete", "(s)", other_doc)
emit(result)
"""

READ = """
emit(outcome(lambda: read_bytes(sys.argv[1])[:16].hex()))
"""


def need_tools():
    if not shutil.which("dbus-daemon") or not shutil.which("xdg-dbus-proxy"):
        pytest.fail("dbus-daemon and xdg-dbus-proxy are needed (make deps installs them)")


def serve_portal(env, runtime: Path, prefix: list[str] | None):
    """The default mount, a session bus and `scopefs portal` with its
    layout at $XDG_RUNTIME_DIR/doc (RUNTIME/doc), where `--portal-bus`
    shows the app its `by-app/APP` folder. PREFIX: the owner's account
    when it is not root (its bus is its own); a root owner's bus lets the
    app account (its apps' proxies) in."""
    need_tools()
    mount(env)
    bus = SessionBus(runtime.parent, prefix) if prefix else AppAccountBus(runtime.parent)
    env.base_env.update(DBUS_SESSION_BUS_ADDRESS=bus.address, XDG_RUNTIME_DIR=str(runtime))
    served = Portal(env, bus, runtime / "doc", caller=prefix)
    yield served
    served.stop()
    bus.stop()


@pytest.fixture
def root_portal(env):
    runtime = env.root / "run"
    runtime.mkdir(mode=0o700)
    (runtime / "doc").mkdir()
    yield from serve_portal(env, runtime, None)


@pytest.fixture
def nobody_portal(nobody_env):  # noqa: F811 (the imported fixture)
    yield from serve_portal(nobody_env, nobody_env.runtime, AS_NOBODY)


def attack_and_check(env, portal, owner: list[str] | None) -> None:
    docs = env.backing(LOCAL) / "docs"
    [[report], [secret]] = [
        answer["reply"][0]
        for answer in portal.calls(
            ("AddFull", "ahusas", [[{"fd": str(docs / "report.txt")}], 3, BETA, ["read"]]),
            ("AddFull", "ahusas", [[{"fd": str(docs / "secret.txt")}], 3, BETA, ["read"]]),
            prefix=owner,
        )
    ]
    beta_before = privacy(env, BETA)
    assert len(beta_before) == 2 and privacy(env, ALPHA) == []
    doc_mount = portal.mountpoint

    # A through its --portal-bus proxy, in the default sandbox.
    got = env.app_json(
        ALPHA, ATTACK, BETA, ALPHA, report, secret, "report.txt", doc_mount, sandbox=True, extra=("--portal-bus",)
    )
    refused = {"error": ERROR + "NotAllowed"}
    assert got["mountPoint"], got  # GetMountPoint is open to everyone
    for method in ("list", "info", "hostPaths", "grant", "delete"):
        assert got[method] == refused, (method, got["read"], got)
    assert "ok" not in got["read"], got

    # A process of A's run outside the sandbox (the owner's uid for a
    # non-root owner) reaches the layout itself: refused, not the owner's.
    plain = env.app_json(ALPHA, READ, str(doc_mount / report / "report.txt"))
    assert plain == {"errno": "EACCES"}, plain

    # Nothing changed: B keeps both documents, A has none.
    assert privacy(env, ALPHA) == []
    assert privacy(env, BETA) == beta_before
    [listed] = portal.calls(("List", "s", [BETA]), prefix=owner)
    assert sorted(listed["reply"]) == sorted([report, secret]), listed

    # The owner's own calls still work: it gives A the report, which A
    # then reads through its by-app folder.
    [granted] = portal.calls(("GrantPermissions", "ssas", [report, ALPHA, ["read"]]), prefix=owner)
    assert granted == {"reply": None}, granted
    read = env.app_json(ALPHA, READ, str(doc_mount / report / "report.txt"), sandbox=True, extra=("--portal-bus",))
    assert read == {"ok": REPORT_BYTES[:16].hex()}, read
    [deleted] = portal.calls(("Delete", "s", [secret]), prefix=owner)
    assert deleted == {"reply": None}, deleted


def test_a_non_root_owners_app_cannot_take_other_apps_documents(nobody_env, nobody_portal):  # noqa: F811
    """SPEC S5, S45 (attack), with a non-root owner (uid 65534, runs told
    apart by process events): app A, through its `--portal-bus` proxy,
    is refused List of B's documents, Info and GetHostPaths of one,
    GrantPermissions of one to itself, and Delete of another (NotAllowed);
    it reads nothing of B's through the document mount, and a process of
    its run outside the sandbox gets EACCES from the layout. The owner's
    List, GrantPermissions and Delete still work."""
    attack_and_check(nobody_env, nobody_portal, AS_NOBODY)


def test_a_root_owners_app_cannot_take_other_apps_documents(env, root_portal):
    """The same attack with a root owner (runs in cgroups, apps and their
    proxies as the app account): refused the same way."""
    attack_and_check(env, root_portal, None)
