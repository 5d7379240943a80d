"""FileTransfer (GTK's drag-and-drop and copy-paste of files between apps)
from an app in the default sandbox: the files it drags are items of its
ScopeFS mount (`$SCOPEFS_MOUNT/Providers/...`), whose descriptors' paths
mean nothing outside its sandbox. SPEC S45, S47, S14; issue 49.
"""

from __future__ import annotations

import pytest
from scopefs_harness import ALPHA, BETA, LOCAL, REPORT_BYTES, describe, run_bounded
from test_portal import privacy
from test_portal_chooser import desktop, nobody_desktop, nobody_env, owner_desktop  # noqa: F401  (fixtures)

TRANSFER = "org.freedesktop.portal.FileTransfer"

# The dragging app, through its filtered bus (`--portal-bus`): offers a
# file of its mount, a file of its Container, and a file of its own /tmp
# made to look like a provider item; then, after the test revokes its
# grant, the descriptor it opened before. argv: GRANTED FLAGS CONTAINER.
DRAG = """
import dbus
bus = dbus.SessionBus()
transfer = dbus.Interface(bus.get_object("org.freedesktop.portal.Documents", "/org/freedesktop/portal/documents"),
                          "org.freedesktop.portal.FileTransfer")

def offer(fd):
    key = transfer.StartTransfer(dbus.Dictionary({"writable": dbus.Boolean(True)}, signature="sv"))
    try:
        transfer.AddFiles(key, [dbus.types.UnixFd(fd)], dbus.Dictionary({}, signature="sv"))
        return {"key": str(key)}
    except dbus.DBusException as error:
        return {"error": error.get_dbus_name(), "message": error.get_dbus_message()}

granted, flags, container = sys.argv[1], {"rw": os.O_RDWR, "r": os.O_RDONLY}[sys.argv[2]], sys.argv[3]
start_accessing(granted)
kept = os.open(granted, flags)
result = {"granted": offer(kept)}
with open(container, "w") as mine:
    mine.write("the app's own")
result["container"] = offer(os.open(container, os.O_RDONLY))
forged = "/tmp/forged.txt"
with open(forged, "w") as fake:
    fake.write("not an item")
result["forged attributes"] = attempt(os.setxattr, forged, "user.scopefs.provider", b"local")
attempt(os.setxattr, forged, "user.scopefs.path", b"docs/secret.txt")
result["forged"] = offer(os.open(forged, os.O_RDONLY))
step(result)
emit({"after revoke": offer(kept)})
"""


@pytest.mark.parametrize(
    ("spec", "read_only", "access"),
    [("docs/report.txt", False, "read-write"), ("docs", False, "read-write"), ("docs/report.txt", True, "read")],
    ids=["file grant", "folder grant", "read-only grant"],
)
def test_an_app_drags_an_item_of_its_mount_to_another_app(owner_desktop, spec, read_only, access):  # noqa: F811
    """SPEC S45, S47, S14: a sandboxed app (default mount, strict scopes)
    starts a transfer and adds the descriptor of a granted item of its
    ScopeFS mount, beside a single-file grant or inside a folder grant;
    the app it is dropped on retrieves it as a document of that item,
    with write only where the dragger's grant and descriptor allow it.
    Attacks, each refused with nothing granted: a file of its Container
    (no provider item), a file of its own /tmp with forged `user.scopefs.*`
    attributes (not the ScopeFS mount), and the descriptor it opened
    before its grant was revoked (the rule decides now, not the open).
    With a root owner and a non-root one."""
    env, desktop, _ = owner_desktop
    env.grant(ALPHA, f"{LOCAL}:{spec}", read_only=read_only)
    report = env.prov(ALPHA, LOCAL, "docs/report.txt")
    dragger = env.app_session(
        ALPHA,
        DRAG,
        report,
        "r" if read_only else "rw",
        env.container(ALPHA, "mine.txt"),
        sandbox=True,
        extra=("--portal-bus",),
    )
    offered = dragger.recv(timeout=60)
    assert "key" in offered["granted"], (offered, dragger.stderr(), desktop.log.read_text())
    for attack in ("container", "forged"):
        assert offered[attack].get("error", "").startswith("org.freedesktop."), (attack, offered)
        assert "key" not in offered[attack], (attack, offered)

    # A transfer's documents are transient: session grants, which last
    # while a process of the app runs (S16a); this one keeps BETA running.
    running = env.app_session(BETA, 'step({"running": True})')
    assert running.recv() == {"running": True}
    [retrieved] = desktop.calls(
        ("RetrieveFiles", "sa{sv}", [offered["granted"]["key"], {}], TRANSFER), prefix=env.run_argv(BETA, [])
    )
    [path] = retrieved["reply"]
    doc = path.split("/")[-2]
    assert path == f"{desktop.mountpoint}/{doc}/report.txt", retrieved
    [grant] = privacy(env, BETA)
    assert (grant["path"], grant["access"], grant["lifetime"]) == ("docs/report.txt", access, "session"), grant
    # Read as the owner (its portal's layout is its own unless root's).
    copy = run_bounded(
        [*desktop.prefix, "cat", desktop.mountpoint / "by-app" / BETA / doc / "report.txt"],
        20,
        env.base_env,
        what="cat",
    )
    assert copy.stdout.encode() == REPORT_BYTES, describe(copy)

    env.cli("revoke", ALPHA, f"{LOCAL}:{spec}")
    dragger.send()
    late = dragger.recv(timeout=30)["after revoke"]
    assert late.get("error") == "org.freedesktop.portal.Error.NotAllowed", late
    assert dragger.finish() == 0, dragger.stderr()
    assert [g["path"] for g in privacy(env, BETA)] == ["docs/report.txt"], "the attacks granted nothing"
    running.send()
    assert running.finish() == 0
