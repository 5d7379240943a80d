"""`scopefs portal`: org.freedesktop.portal.Documents on a real session bus
(Debian's dbus-daemon), driven by Debian's `flatpak document-*` commands
and by python3-dbus for the calls flatpak never makes. Portal documents are
ScopeFS grants, revoked with ScopeFS semantics. SPEC S45, S14, S16a, S5.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import stat
import subprocess
from pathlib import Path

import pytest
from doc_scope_helpers import mount
from scopefs_harness import (
    ALPHA,
    BETA,
    LOCAL,
    NOBODY,
    REPORT_BYTES,
    describe,
    mount_count,
    run_bounded,
    wait_for,
    wait_for_exit,
)

# Debian's python3 with python3-dbus (the tests' own Python may be another one).
SYSTEM_PYTHON = "/usr/bin/python3"
CLIENT = Path(__file__).resolve().parent / "portal_client.py"

NAME = "org.freedesktop.portal.Documents"
PATH = "/org/freedesktop/portal/documents"
ERROR = "org.freedesktop.portal.Error."
AS_NOBODY = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"]


# A session bus that activates nothing: Debian's session.conf would start
# xdg-document-portal for the first call to the name before the portal
# under test owns it.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>{address}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


class SessionBus:
    """A private session bus (Debian's dbus-daemon) at a fixed socket path,
    so a test can stop it and start another one where clients look for it."""

    def __init__(self, root: Path, prefix: list[str] | None = None):
        self.socket = root / "bus"
        self.address = f"unix:path={self.socket}"
        self.config = root / "bus.conf"
        self.config.write_text(BUS_CONFIG.format(address=self.address))
        self.config.chmod(0o644)
        self.prefix = prefix or []
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        if self.socket.exists():
            self.socket.unlink()
        self.process = subprocess.Popen(
            [*self.prefix, "dbus-daemon", f"--config-file={self.config}", "--nofork"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for(f"dbus-daemon listening at {self.socket}", self.socket.exists, timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None


class Portal:
    """`scopefs portal` on a SessionBus, for one test's Env. PREFIX runs the
    portal and the test's own calls to it (gdbus) as another user; CALLER
    runs only the calls so, for an Env whose commands already run as the
    owner."""

    def __init__(
        self,
        env,
        bus: SessionBus,
        mountpoint: Path,
        prefix: list[str] | None = None,
        state=None,
        environ=None,
        mount: bool = True,
        caller: list[str] | None = None,
    ):
        self.env, self.bus, self.mountpoint, self.prefix = env, bus, mountpoint, caller or prefix or []
        self.environ = dict(environ or env.base_env, DBUS_SESSION_BUS_ADDRESS=bus.address)
        self.log = env.root / "portal.err"
        options = ["--mountpoint", mountpoint] + ([] if mount else ["--no-mount"])
        argv = [*(prefix or []), *env.cli_argv("portal", *options, state=state)]
        with open(self.log, "w") as err:
            self.process = subprocess.Popen(argv, stderr=err, env=self.environ, start_new_session=True)
        self.wait_ready(mount)

    def wait_ready(self, mount: bool = False) -> None:
        def serving():
            assert self.process.poll() is None, "scopefs portal exited:\n" + self.log.read_text()
            return self.gdbus("GetMountPoint", check=False).returncode == 0

        wait_for("scopefs portal owning " + NAME, serving, timeout=15)
        if mount:
            wait_for(f"the document layout at {self.mountpoint}", lambda: mount_count(self.mountpoint) > 0)

    def gdbus(self, method: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        argv = ["gdbus", "call", "--session", "--dest", NAME, "--object-path", PATH, "--method", f"{NAME}.{method}"]
        p = run_bounded([*self.prefix, *argv, *args], 20, self.environ, what=f"gdbus {method}")
        if check:
            assert p.returncode == 0, describe(p)
        return p

    def flatpak(self, *args, expect: int = 0) -> subprocess.CompletedProcess:
        p = run_bounded(["flatpak", *map(str, args)], 30, self.environ, what=f"flatpak {args[0]}")
        assert p.returncode == expect, describe(p)
        return p

    def calls(self, *specs, prefix: list[str] | None = None) -> list[dict]:
        """Calls made by a client process (Debian's python3 with
        python3-dbus); each spec is (method, signature, args[, interface])."""
        wire = [
            {"method": m, "signature": sig, "args": args, **({"interface": rest[0]} if rest else {})}
            for m, sig, args, *rest in specs
        ]
        argv = [*(prefix or []), SYSTEM_PYTHON, CLIENT, self.bus.address, json.dumps(wire)]
        p = run_bounded(argv, 60, self.environ, what="portal client")
        assert p.returncode == 0, describe(p)
        return json.loads(p.stdout.strip().splitlines()[-1])

    def stop(self) -> None:
        """SIGTERM: the portal unmounts its layout and exits 0."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            how, _ = wait_for_exit(self.process.pid, 10)
            assert how != "alive", "scopefs portal survived SIGTERM"
        status = self.process.wait(timeout=10)
        left = mount_count(self.mountpoint)
        if left:
            subprocess.run(["fusermount3", "-uz", str(self.mountpoint)], check=False)
        assert not left, "scopefs portal left its layout mounted"
        assert status == 0, f"scopefs portal exited {status}:\n" + self.log.read_text()


@pytest.fixture
def portal(env):
    if not shutil.which("flatpak") or not shutil.which("dbus-daemon"):
        pytest.fail("flatpak and dbus-daemon are needed (make deps installs them)")
    bus = SessionBus(env.root)
    (env.root / "doc").mkdir()
    served = Portal(env, bus, env.root / "doc")
    yield served
    served.stop()
    bus.stop()


def privacy(env, app: str | None = None) -> list[dict]:
    return json.loads(env.cli("privacy", *([app] if app else []), "--json").stdout)


def test_flatpak_document_commands_change_scopefs_grants(env, portal):
    """SPEC S45: `flatpak document-export`, `documents`, `document-info` and
    `document-unexport` work unchanged against `scopefs portal`, and what
    they grant is a ScopeFS grant that `scopefs privacy` and `events` show."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    exported = portal.flatpak("document-export", report).stdout.strip()
    doc_id = Path(exported).parent.name
    assert exported == f"{portal.mountpoint}/{doc_id}/report.txt"
    assert privacy(env) == [], "a document exported to no app grants nothing"

    portal.flatpak("document-export", "--app", ALPHA, "--allow-write", report)
    [grant] = privacy(env, ALPHA)
    assert (grant["provider"], grant["path"], grant["access"]) == (LOCAL, "docs/report.txt", "read-write")
    assert grant["lifetime"] != "session", "a persistent document's grant outlives the session"

    info = portal.flatpak("document-info", report).stdout
    assert f"id: {doc_id}" in info and f"origin: {report}" in info
    assert f"\t{ALPHA}\tread, write" in info
    listed = portal.flatpak("documents").stdout
    assert doc_id in listed
    events = env.cli("events", "--json").stdout
    assert ALPHA in events and "docs/report.txt" in events

    portal.flatpak("document-unexport", report)
    assert "Not exported" in portal.flatpak("document-info", report).stdout
    assert privacy(env, ALPHA) == [], "deleting the document removes its grants"


def test_transient_document_is_a_session_grant(env, portal):
    """SPEC S45, S16a: a non-persistent document (`--transient`) is a session grant."""
    portal.flatpak("document-export", "--transient", "--app", BETA, env.backing(LOCAL) / "docs" / "secret.txt")
    [grant] = privacy(env, BETA)
    assert grant["lifetime"] == "session", grant


def test_folder_document_is_a_folder_grant(env, portal):
    """SPEC S45: exporting a folder (AddFull's export-directory flag) makes a folder grant."""
    portal.flatpak("document-export", "--app", ALPHA, env.backing(LOCAL) / "deep" / "a")
    [grant] = privacy(env, ALPHA)
    assert (grant["path"], grant["kind"]) == ("deep/a", "folder"), grant


OPEN_AND_WAIT = """
os.setxattr(sys.argv[1], "user.scopefs.start", b"")  # startAccessingSecurityScopedResource
fd = os.open(sys.argv[1], os.O_RDONLY)
first = os.pread(fd, 16, 0)
step({"read": first.hex()})
emit({"again": outcome(lambda: os.pread(fd, 16, 0).hex())})
"""


@pytest.mark.parametrize("revoker", ["scopefs", "portal"])
def test_revoke_either_way_cuts_open_descriptor(env, portal, revoker):
    """SPEC S45, S14: an app reading a document through a descriptor it
    opened loses it when the grant is revoked, through `scopefs revoke` or
    through the portal's RevokePermissions (`flatpak document-export
    --forbid-read`): the next read on the same descriptor fails with EPERM."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    portal.flatpak("document-export", "--app", ALPHA, report)
    mount(env)  # the default mount: strict scopes
    app = env.app_session(ALPHA, OPEN_AND_WAIT, env.prov(ALPHA, LOCAL, "docs/report.txt"))
    assert bytes.fromhex(app.recv()["read"]) == REPORT_BYTES[:16]
    if revoker == "scopefs":
        env.cli("revoke", ALPHA, f"{LOCAL}:docs/report.txt")
    else:
        portal.flatpak("document-export", "--app", ALPHA, "--forbid-read", report)
    app.send()
    assert app.recv() == {"again": {"errno": "EPERM"}}
    assert app.finish() == 0, app.stderr()
    [grant] = privacy(env, ALPHA)
    assert grant["state"] == "revoked"
    assert f"\t{ALPHA}\t" not in portal.flatpak("document-info", report).stdout


def test_document_layout_shows_documents_and_grants(env, portal):
    """SPEC S45: the mount at the mount point has the document store's
    layout: DOC_ID/NAME, by-app/APP/DOC_ID/NAME for the apps holding an
    active grant, the grant's access as mode bits, the host path in
    user.document-portal.host-path; statfs works; a read-write document
    takes writes, a read-only one refuses them and any rename, the
    layout's own folders never change; and a revoke takes the app's
    entries away."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    secret = env.backing(LOCAL) / "docs" / "secret.txt"
    doc = Path(portal.flatpak("document-export", "--app", ALPHA, "--allow-write", report).stdout.strip()).parent.name
    other = Path(portal.flatpak("document-export", "--app", BETA, secret).stdout.strip()).parent.name
    root = portal.mountpoint
    assert sorted(os.listdir(root)) == sorted(["by-app", doc, other])
    assert sorted(os.listdir(root / "by-app")) == sorted([ALPHA, BETA])
    assert os.listdir(root / "by-app" / ALPHA) == [doc]
    assert os.listdir(root / "by-app" / BETA) == [other]
    assert (root / doc / "report.txt").read_bytes() == REPORT_BYTES
    assert (root / "by-app" / ALPHA / doc / "report.txt").read_bytes() == REPORT_BYTES
    mode = lambda path: stat.S_IMODE(os.stat(path).st_mode)  # noqa: E731
    assert mode(root / "by-app" / ALPHA / doc / "report.txt") & 0o600 == 0o600, "read-write: rw for the owner"
    assert mode(root / "by-app" / BETA / other / "secret.txt") & 0o222 == 0, "read-only: no write bit"
    assert os.getxattr(root / "by-app" / ALPHA / doc / "report.txt", "user.document-portal.host-path") == bytes(
        str(report), "utf-8"
    )
    assert os.statvfs(root).f_blocks > 0 and os.statvfs(root / doc / "report.txt").f_bsize > 0
    # A read-write document takes writes (what an app does with the path
    # SaveFile gave it); a read-only one refuses them (EACCES); the
    # layout's names and folders never change (EPERM, as the reference's).
    (root / "by-app" / ALPHA / doc / "report.txt").write_bytes(b"written through the layout")
    assert report.read_bytes() == b"written through the layout"
    with pytest.raises(OSError) as write:
        os.open(root / "by-app" / BETA / other / "secret.txt", os.O_WRONLY)
    assert write.value.errno == errno.EACCES
    with pytest.raises(OSError) as truncate:
        os.truncate(root / "by-app" / BETA / other / "secret.txt", 0)
    assert truncate.value.errno == errno.EACCES
    with pytest.raises(OSError) as make:
        (root / "new").mkdir()
    assert make.value.errno == errno.EPERM
    # A document folder changes only by saves (S48, test_portal_saves.py):
    # a read-only grant makes no temporary there.
    with pytest.raises(OSError) as rename:
        os.rename(root / "by-app" / BETA / other / "secret.txt", root / "by-app" / BETA / other / "moved.txt")
    assert rename.value.errno == errno.EACCES
    env.cli("revoke", BETA, f"{LOCAL}:docs/secret.txt")
    wait_for("BETA's entries gone after the revoke", lambda: BETA not in os.listdir(root / "by-app"))
    assert other in os.listdir(root), "the document itself stays"


def test_layout_descriptor_is_cut_by_a_revoke(env, portal):
    """SPEC S45, S14: a descriptor opened under by-app/APP reads while the
    app's grant is active and fails with EPERM at the next read after
    `scopefs revoke`, on the same descriptor."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    doc = Path(portal.flatpak("document-export", "--app", ALPHA, report).stdout.strip()).parent.name
    fd = os.open(portal.mountpoint / "by-app" / ALPHA / doc / "report.txt", os.O_RDONLY)
    try:
        assert os.pread(fd, 16, 0) == REPORT_BYTES[:16]
        env.cli("revoke", ALPHA, f"{LOCAL}:docs/report.txt")
        with pytest.raises(OSError) as cut:
            os.pread(fd, 16, 0)
        assert cut.value.errno == errno.EPERM
    finally:
        os.close(fd)


@pytest.mark.parametrize("revoker", ["scopefs", "portal-write", "portal-read"])
def test_layout_write_descriptor_is_cut_by_a_revoke(env, portal, revoker):
    """SPEC S45, S14: a descriptor opened for writing under by-app/APP
    writes while the app's read-write grant stands, and its next write
    fails with EPERM once the grant is revoked (`scopefs revoke`, or the
    portal's RevokePermissions of read) or narrowed to read-only
    (RevokePermissions of write, `--forbid-write`); the host file keeps
    only what was written before."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    exported = portal.flatpak("document-export", "--app", ALPHA, "--allow-write", report).stdout.strip()
    doc = Path(exported).parent.name
    fd = os.open(portal.mountpoint / "by-app" / ALPHA / doc / "report.txt", os.O_WRONLY | os.O_TRUNC)
    try:
        assert os.pwrite(fd, b"before", 0) == 6
        if revoker == "scopefs":
            env.cli("revoke", ALPHA, f"{LOCAL}:docs/report.txt")
        else:
            forbid = "--forbid-write" if revoker == "portal-write" else "--forbid-read"
            portal.flatpak("document-export", "--app", ALPHA, forbid, report)
        with pytest.raises(OSError) as cut:
            os.pwrite(fd, b" and after", 6)
        assert cut.value.errno == errno.EPERM
        with pytest.raises(OSError) as grow:
            os.ftruncate(fd, 100)
        assert grow.value.errno == errno.EPERM, "no size change without the grant"
    finally:
        os.close(fd)
    assert report.read_bytes() == b"before"


LAYOUT_FROM_APP = """
emit({"list": attempt(os.listdir, sys.argv[1]),
      "read": attempt(read_bytes, sys.argv[2])})
"""


def test_app_process_cannot_use_the_layout(env, portal):
    """SPEC S45, S5: the layout serves the owner's processes; an app
    process of `scopefs run` (here without the sandbox, which would not
    show it at all) gets EACCES and reads its documents through its view."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    exported = portal.flatpak("document-export", "--app", ALPHA, report).stdout.strip()
    mount(env)  # the default mount: strict scopes
    answer = env.app_json(ALPHA, LAYOUT_FROM_APP, portal.mountpoint, exported)
    assert answer == {"list": "EACCES", "read": "EACCES"}


STORM = """
import errno, json, os, sys, time
root, doc, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
path = os.path.join(root, "by-app", sys.argv[4], doc, "report.txt")
seen, end = {}, time.monotonic() + seconds
while time.monotonic() < end:
    try:
        os.listdir(root)
        with open(path, "rb") as f:
            data = f.read()
        what = "ok" if data == open(sys.argv[5], "rb").read() else "WRONG BYTES"
    except OSError as exc:
        what = errno.errorcode[exc.errno]
    seen[what] = seen.get(what, 0) + 1
print(json.dumps(seen))
"""


def test_layout_under_concurrent_use_and_revocation(env, portal):
    """SPEC S45, S14 (xdg-desktop-portal#1871, flatpak#6166: the reference
    mount hangs under concurrent use): 24 processes list the layout and
    read a document while its grant is revoked and restored 10 times; none
    hangs, each read gives the file's bytes or a denial (EPERM, ENOENT),
    and the portal answers afterwards."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    doc = Path(portal.flatpak("document-export", "--app", ALPHA, report).stdout.strip()).parent.name
    readers = [
        subprocess.Popen(
            ["python3", "-c", STORM, str(portal.mountpoint), doc, "6", ALPHA, str(report)],
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        for _ in range(24)
    ]
    for _ in range(10):
        env.cli("revoke", ALPHA, f"{LOCAL}:docs/report.txt")
        env.cli("restore", ALPHA, f"{LOCAL}:docs/report.txt")
    totals: dict[str, int] = {}
    for reader in readers:
        out, _ = reader.communicate(timeout=60)
        assert reader.returncode == 0
        for what, count in json.loads(out).items():
            totals[what] = totals.get(what, 0) + count
    assert set(totals) <= {"ok", "EPERM", "ENOENT"}, totals
    assert totals.get("ok", 0) > 0, totals
    assert portal.gdbus("GetMountPoint").returncode == 0
    assert (portal.mountpoint / "by-app" / ALPHA / doc / "report.txt").read_bytes() == REPORT_BYTES


def test_every_method_refuses_bad_calls_and_grants_nothing(env, portal):
    """SPEC S45, S33: wrong types, unknown ids, descriptors that prove no
    access, `..` and exports holding the mount get clear D-Bus errors, and
    nothing is granted by any of them."""
    backing = env.backing(LOCAL)
    report = {"fd": str(backing / "docs" / "report.txt"), "flags": ["O_PATH"]}
    outside = {"fd": str(env.root / "backing" / "escape" / "outside.txt")}
    folder = {"fd": str(backing / "docs"), "flags": ["O_PATH", "O_DIRECTORY"]}
    write_only = {"fd": str(backing / "docs" / "secret.txt"), "flags": ["O_WRONLY"]}
    link = backing / "docs" / "link.txt"
    link.symlink_to("report.txt")
    symlink_itself = {"fd": str(link), "flags": ["O_PATH", "O_NOFOLLOW"]}
    bad = {
        "Add with a string for the fd": ("Add", "sbb", ["x", True, True]),
        "Add with too few arguments": ("Add", "h", [report]),
        "Add of a pipe": ("Add", "hbb", [{"pipe": True}, True, True]),
        "Add of a write-only fd": ("Add", "hbb", [write_only, True, True]),
        "Add of a symlink's own fd": ("Add", "hbb", [symlink_itself, True, True]),
        "Add outside every provider": ("Add", "hbb", [outside, True, True]),
        "Add of a folder": ("Add", "hbb", [folder, True, True]),
        "AddFull with unknown flags": ("AddFull", "ahusas", [[report], 0x100, ALPHA, ["read"]]),
        "AddFull with an unknown permission": ("AddFull", "ahusas", [[report], 2, ALPHA, ["read", "own"]]),
        "AddFull with a bad app id": ("AddFull", "ahusas", [[report], 2, "../evil", ["read"]]),
        "AddFull all or nothing": ("AddFull", "ahusas", [[report, outside], 2, ALPHA, ["read"]]),
        "AddNamed with ..": ("AddNamed", "haybb", [folder, {"bytes": ".."}, True, True]),
        "AddNamed with a slash": ("AddNamed", "haybb", [folder, {"bytes": "../escape"}, True, True]),
        "AddNamed on a file fd": ("AddNamed", "haybb", [report, {"bytes": "x"}, True, True]),
        "GrantPermissions of an unknown id": ("GrantPermissions", "ssas", ["ffffffff", ALPHA, ["read"]]),
        "RevokePermissions of an unknown id": ("RevokePermissions", "ssas", ["nope", ALPHA, ["read"]]),
        "Delete of an unknown id": ("Delete", "s", ["nope"]),
        "Info of an unknown id": ("Info", "s", ["nope"]),
        "Info with a number": ("Info", "u", [7]),
        "Lookup with ..": ("Lookup", "ay", [{"bytes": f"{backing}/docs/../docs/report.txt"}]),
        "Lookup of a relative path": ("Lookup", "ay", [{"bytes": "docs/report.txt"}]),
        "List with a number": ("List", "u", [1]),
    }
    answers = portal.calls(*bad.values())
    outcomes = {what: answer.get("error", answer) for what, answer in zip(bad, answers, strict=True)}
    invalid_args = "org.freedesktop.DBus.Error.InvalidArgs"
    assert outcomes == {
        "Add with a string for the fd": invalid_args,
        "Add with too few arguments": invalid_args,
        "Add of a pipe": ERROR + "InvalidArgument",
        "Add of a write-only fd": ERROR + "NotAllowed",
        "Add of a symlink's own fd": ERROR + "InvalidArgument",
        "Add outside every provider": ERROR + "NotAllowed",
        "Add of a folder": ERROR + "NotAllowed",
        "AddFull with unknown flags": ERROR + "InvalidArgument",
        "AddFull with an unknown permission": ERROR + "InvalidArgument",
        "AddFull with a bad app id": ERROR + "InvalidArgument",
        "AddFull all or nothing": ERROR + "NotAllowed",
        "AddNamed with ..": ERROR + "InvalidArgument",
        "AddNamed with a slash": ERROR + "InvalidArgument",
        "AddNamed on a file fd": ERROR + "InvalidArgument",
        "GrantPermissions of an unknown id": ERROR + "NotFound",
        "RevokePermissions of an unknown id": ERROR + "NotFound",
        "Delete of an unknown id": ERROR + "NotFound",
        "Info of an unknown id": ERROR + "NotFound",
        "Info with a number": invalid_args,
        "Lookup with ..": ERROR + "InvalidArgument",
        "Lookup of a relative path": ERROR + "InvalidArgument",
        "List with a number": invalid_args,
    }
    assert portal.calls(("List", "s", [""])) == [{"reply": {}}], "no bad call made a document"

    # A real document, then bad changes of it.
    [added] = portal.calls(("Add", "hbb", [report, True, True]))
    doc = added["reply"]
    assert len(doc) == 8, added
    answers = portal.calls(
        ("GrantPermissions", "ssas", [doc, "a/b", ["read"]]),
        ("GrantPermissions", "ssas", [doc, ALPHA, ["everything"]]),
        ("GetHostPaths", "as", [["nope", doc]]),
        ("Lookup", "ay", [{"bytes": str(backing / "docs" / "report.txt")}]),
        ("Lookup", "ay", [{"bytes": f"{portal.mountpoint}/{doc}/report.txt"}]),
        ("Lookup", "ay", [{"bytes": str(backing / "docs" / "secret.txt")}]),
    )
    assert answers == [
        {"error": ERROR + "InvalidArgument"},
        {"error": ERROR + "InvalidArgument"},
        {"reply": {doc: str(backing / "docs" / "report.txt")}},
        {"reply": doc},
        {"reply": doc},
        {"reply": ""},
    ]
    # A provider folder above the document layout's mount is refused (issue
    # 50: exit 73); exporting that folder or the layout's own folders is
    # refused. A document's file in the layout is that document (issue 49:
    # the frontend re-exports an app's document to open it elsewhere).
    env.cli("provider", "add", "top", env.root, expect=73)
    top = {"fd": str(env.root), "flags": ["O_PATH", "O_DIRECTORY"]}
    layout_folder = {"fd": str(portal.mountpoint / doc), "flags": ["O_PATH", "O_DIRECTORY"]}
    inside = {"fd": str(portal.mountpoint / doc / "report.txt")}
    assert portal.calls(
        ("AddFull", "ahusas", [[top], 8 | 2, ALPHA, ["read"]]),
        ("AddFull", "ahusas", [[layout_folder], 8 | 2, ALPHA, ["read"]]),
    ) == [{"error": ERROR + "NotAllowed"}, {"error": ERROR + "NotAllowed"}]
    assert privacy(env) == [], "no bad call granted anything"
    [again] = portal.calls(("Add", "hbb", [inside, True, True]))
    assert again == {"reply": doc}, again


def test_version_and_add_full_reply(env, portal):
    """SPEC S45: the interface is version 5; AddFull answers ids and the
    mount point, and grants write only where the descriptor shows it."""
    report = {"fd": str(env.backing(LOCAL) / "docs" / "report.txt"), "flags": ["O_RDONLY"]}
    version, added = portal.calls(
        ("Get", "ss", [NAME, "version"], "org.freedesktop.DBus.Properties"),
        ("AddFull", "ahusas", [[report], 2, ALPHA, ["read", "write"]]),
    )
    assert version == {"reply": 5}
    [ids, extra] = added["reply"]
    assert extra == {"mountpoint": str(portal.mountpoint)}
    [grant] = privacy(env, ALPHA)
    # The descriptor was read-only: it proves no write access, so none is granted.
    assert grant["access"] == "read", grant
    assert portal.calls(("Info", "s", [ids[0]])) == [
        {"reply": [str(env.backing(LOCAL) / "docs" / "report.txt"), {ALPHA: ["read"]}]}
    ]


def test_portal_survives_a_bus_restart(env, portal):
    """SPEC S45: when the session bus goes and comes back, the portal takes
    its name again and still knows its persistent documents."""
    report = env.backing(LOCAL) / "docs" / "report.txt"
    exported = portal.flatpak("document-export", report).stdout.strip()
    portal.bus.stop()
    portal.bus.start()
    portal.wait_ready()
    assert Path(exported).parent.name in portal.flatpak("documents").stdout


def test_app_process_cannot_grant_itself_through_the_portal(env, portal):
    """SPEC S45, S5: an app process of `scopefs run` that reaches the bus
    (here without the sandbox) is refused: the portal acts with the owner's
    rights, so it answers only the owner's own processes."""
    mount(env)  # the default mount: strict scopes
    secret = {"fd": str(env.backing(LOCAL) / "docs" / "secret.txt")}
    prefix = env.run_argv(ALPHA, [])  # `scopefs run --app ALPHA --no-sandbox --`
    answers = portal.calls(
        ("AddFull", "ahusas", [[secret], 2, ALPHA, ["read", "write"]]),
        ("List", "s", [""]),
        prefix=prefix,
    )
    assert answers == [{"error": ERROR + "NotAllowed"}, {"error": ERROR + "NotAllowed"}]
    assert privacy(env, ALPHA) == []


def test_descriptor_of_a_file_the_caller_cannot_open_is_refused(env):
    """SPEC S45: an O_PATH descriptor needs no permission on the file; the
    portal checks that its caller could open it, as xdg-document-portal
    does. An owner who is not root exports an unreadable file: refused."""
    home = env.root / "nobody"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    state, files = home / "state", home / "files"
    as_nobody = dict(env.base_env, HOME=str(home), XDG_STATE_HOME=str(home / "xdg"))

    def nobody(*argv, expect=0):
        p = run_bounded([*AS_NOBODY, *map(str, argv)], 30, as_nobody, what=" ".join(map(str, argv))[:80])
        assert p.returncode == expect, describe(p)
        return p

    nobody("mkdir", "-p", files)
    nobody("sh", "-c", f"echo closed > {files}/closed.txt && chmod 000 {files}/closed.txt")
    nobody("sh", "-c", f"echo open > {files}/open.txt")
    nobody(env.bin, "--state", state, "init")
    nobody(env.bin, "--state", state, "provider", "add", "files", files)
    bus = SessionBus(home, AS_NOBODY)
    # No layout: /dev/fuse is root's here.
    served = Portal(env, bus, home / "doc", AS_NOBODY, state=state, environ=as_nobody, mount=False)
    try:
        closed, opened = served.calls(
            ("Add", "hbb", [{"fd": str(files / "closed.txt"), "flags": ["O_PATH"]}, True, True]),
            ("Add", "hbb", [{"fd": str(files / "open.txt"), "flags": ["O_PATH"]}, True, True]),
            prefix=AS_NOBODY,
        )
    finally:
        served.stop()
        bus.stop()
    assert closed == {"error": ERROR + "NotAllowed"}
    assert len(opened.get("reply", "")) == 8, opened
    assert json.loads(nobody(env.bin, "--state", state, "privacy", "--json").stdout) == []


READ_APP_INFO = """
emit({"text": read_bytes("/.flatpak-info").decode(),
      "mode": oct(os.stat("/.flatpak-info").st_mode & 0o7777),
      "write": attempt(lambda: os.close(os.open("/.flatpak-info", os.O_WRONLY))),
      "replace": attempt(os.rename, "/.flatpak-info", "/.flatpak-info.old")})
"""


def test_sandboxed_app_carries_its_flatpak_info(env):
    """SPEC S45, S5: an app run in the sandbox has a read-only
    `/.flatpak-info` naming its app id, where xdg-desktop-portal looks for
    it (/proc/PID/root/.flatpak-info) to attribute the app's requests."""
    mount(env)  # the default mount: strict scopes
    info = env.app_json(ALPHA, READ_APP_INFO, sandbox=True)
    assert info["text"] == f"[Application]\nname={ALPHA}\n"
    assert info["mode"] == "0o444"
    # Mode 0444 to the app's account, and the sandbox's root is not the app's to change.
    assert (info["write"], info["replace"]) == ("EACCES", "EACCES"), info


@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_bus_only_portal_ends_cleanly_on_signals(env, ending):
    """SPEC S45 (issue 49): `scopefs portal --no-mount` ends with 0 on
    SIGTERM, SIGHUP and SIGINT, as the portal with its layout does and as
    xdg-document-portal does, so a systemd unit is left "inactive", not
    "failed" (before: killed by the signal, exit 143 from a shell)."""
    bus = SessionBus(env.root)
    served = Portal(env, bus, env.root / "doc", mount=False)
    try:
        served.process.send_signal(ending)
        status = served.process.wait(timeout=10)
    finally:
        served.stop()
        bus.stop()
    assert status == 0, f"exit {status} on {ending.name}:\n" + served.log.read_text()


def test_portal_exit_codes(env, portal):
    """SPEC S45, S34 (docs/CLI.md): without `scopefs init` 66, without a
    session bus 69, while another process owns the name 77 (and the first
    portal's layout is left alone)."""
    no_state = env.cli("portal", "--no-mount", state=env.root / "nothing", expect=66)
    assert "scopefs init" in no_state.stderr
    no_bus = run_bounded(
        env.cli_argv("portal", "--no-mount"),
        30,
        dict(env.base_env, DBUS_SESSION_BUS_ADDRESS=f"unix:path={env.root}/no-bus"),
        what="scopefs portal without a bus",
    )
    assert no_bus.returncode == 69, describe(no_bus)
    second = run_bounded(
        env.cli_argv("portal", "--mountpoint", env.root / "doc2"), 30, portal.environ, what="a second portal"
    )
    assert second.returncode == 77, describe(second)
    assert "another document portal" in second.stderr
    assert mount_count(env.root / "doc2") == 0
    assert mount_count(portal.mountpoint) == 1


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_a_transient_documents_grant_ends_with_its_portal(env, how):
    """SPEC S45, S16a: a transient document lasts its portal's lifetime,
    and so does the session grant it gave: after a restart, whether the
    portal stopped cleanly or was killed, the app has no grant of it; a
    persistent document's grant of another app stays."""
    bus = SessionBus(env.root)
    (env.root / "doc").mkdir()
    first = Portal(env, bus, env.root / "doc")
    again = None
    try:
        first.flatpak("document-export", "--transient", "--app", BETA, env.backing(LOCAL) / "docs" / "secret.txt")
        first.flatpak("document-export", "--app", ALPHA, env.backing(LOCAL) / "docs" / "report.txt")
        [grant] = privacy(env, BETA)
        assert (grant["path"], grant["lifetime"], grant["state"]) == ("docs/secret.txt", "session", "active"), grant
        if how == "sigkill":
            first.process.kill()
            first.process.wait(timeout=10)
        else:
            first.stop()
        again = Portal(env, bus, env.root / "doc")
        assert privacy(env, BETA) == [], "the transient document's grant outlived its portal"
        assert [g["path"] for g in privacy(env, ALPHA)] == ["docs/report.txt"]
    finally:
        try:
            (again or first).stop()
        finally:
            bus.stop()


def test_persistent_documents_outlive_the_portal(env, portal):
    """SPEC S45, S16a: a restarted portal knows its persistent documents;
    a transient one was the portal's only, and its grant a session grant."""
    kept = portal.flatpak("document-export", env.backing(LOCAL) / "docs" / "report.txt").stdout.strip()
    gone = portal.flatpak("document-export", "--transient", env.backing(LOCAL) / "docs" / "secret.txt").stdout
    portal.stop()
    again = Portal(env, portal.bus, portal.mountpoint)
    try:
        listed = again.flatpak("documents").stdout
        assert Path(kept).parent.name in listed
        assert Path(gone.strip()).parent.name not in listed
        assert (portal.mountpoint / Path(kept).parent.name / "report.txt").read_bytes() == REPORT_BYTES
    finally:
        again.stop()
