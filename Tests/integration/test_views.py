"""How app processes see the mount: the app view (the default as root), the
shared view, and what unmount does while app views still hold the mount.
SPEC S3, S5, S1, S34 (docs/DECISIONS.md, decision 12, "Mount views")."""

import os
import subprocess

import pytest
from doc_scope_helpers import mount
from scopefs_harness import ALPHA, BETA, DAEMON_EXIT_TIMEOUT, LOCAL, REPORT_BYTES, mount_count, wait_for_exit

VIEW_FACTS = """
mnt, alpha, beta, report = sys.argv[1:5]
start_accessing(report)
mounts = [m for m in (line.split() for line in open("/proc/self/mountinfo", errors="surrogateescape"))
          if m[4] == mnt or m[4].startswith(mnt + "/")]   # other mounts of the machine aside
emit({"view": os.environ.get("SCOPEFS_VIEW"),
      "root": listing(mnt),
      "other": attempt(os.stat, os.path.join(mnt, beta)),
      "create-next-to-app": attempt(os.mkdir, os.path.join(mnt, "new")),
      "report": outcome(lambda: read_bytes(report)[:16].hex()),
      "fuse-mounts": sorted(m[4] for m in mounts if m[m.index("-") + 1] == "fuse.scopefs"),
      "mount-fs": [m[m.index("-") + 1] for m in mounts if m[4] == mnt][-1]})
"""


def test_app_view_holds_only_the_app(env):
    """SPEC S3, S5: by default (as root) an app process runs in a mount
    namespace where MOUNT is a read-only folder holding only MOUNT/<app>,
    bound from the real mount: MOUNT lists only the app, another app's
    directory is ENOENT, nothing can be created next to it (EROFS), and the
    app's items read as through the shared mount."""
    env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    env.mount()
    report = env.prov(ALPHA, LOCAL, "docs/report.txt")
    got = env.app_json(ALPHA, VIEW_FACTS, env.mnt, ALPHA, BETA, report)
    assert got["view"] == "app"
    assert got["root"] == [ALPHA]
    assert got["other"] == "ENOENT"
    assert got["create-next-to-app"] == "EROFS"
    assert got["mount-fs"] == "tmpfs"
    assert got["fuse-mounts"] == sorted([str(env.mnt), env.app_dir(ALPHA)])
    env.view = "shared"
    shared = env.app_json(ALPHA, VIEW_FACTS, env.mnt, ALPHA, BETA, report)
    assert shared["view"] == "shared"
    assert shared["root"] == [ALPHA] and shared["other"] == "ENOENT"
    assert shared["mount-fs"] == "fuse.scopefs"
    assert shared["fuse-mounts"] == [str(env.mnt)]
    assert got["report"] == shared["report"] == {"ok": REPORT_BYTES[:16].hex()}


@pytest.mark.parametrize("view", ["app", "shared"])
def test_strict_scopes_hold_in_every_view(env, view):
    """SPEC S5, S6, S9: strict mode is the same in both views: a read
    without a scope is EPERM, under `scope exec` it returns the file."""
    env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    mount(env, "strict")
    env.view = view
    report = env.prov(ALPHA, LOCAL, "docs/report.txt")
    denied = env.run_app(ALPHA, ["head", "-c", "16", report])
    assert denied.returncode != 0 and "Operation not permitted" in denied.stderr
    p = env.run_app(
        ALPHA, [str(env.bin), "--state", str(env.state), "scope", "exec", report, "--", "head", "-c", "16", report]
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.encode() == REPORT_BYTES[:16]


def test_sandbox_and_shared_view_exclude_each_other(env):
    """SPEC S34, S5, CLI.md 64: the shared view is a view without the
    sandbox: `--shared-view` alone or with `--sandbox` is a usage error that
    names --no-sandbox, and `--sandbox --no-sandbox` is one too."""
    env.mount()
    for view in (["--shared-view"], ["--sandbox", "--shared-view"]):
        p = env.cli("run", "--app", ALPHA, *view, "--", "true", expect=64)
        assert "--no-sandbox" in p.stderr, p.stderr
    p = env.cli("run", "--app", ALPHA, "--sandbox", "--no-sandbox", "--", "true", expect=64)
    assert "exclude" in p.stderr


HOLD_CWD = """
os.chdir(sys.argv[1])
step({"listed": listing(".")})
emit({"after": attempt(os.listdir, ".")})
"""


def start_holder(env):
    """An app process with its cwd in its container (app view), ready. It
    asks to outlive its mount (`--keep-on-mount-loss`): by default `scopefs
    run` ends its app when the mount dies (issue 15), and these tests look
    at what the app sees then."""
    session = env.app_session(ALPHA, HOLD_CWD, env.container(ALPHA), extra=("--keep-on-mount-loss",))
    assert session.recv() == {"listed": ["Documents", "Library", "tmp"]}
    return session


def test_unmount_with_app_views_alive_ends_the_mount(env):
    """SPEC S1, S34: `scopefs unmount` while an app process in its app view
    has its cwd in the mount returns 0 at once, the daemon exits (exit 0),
    and the app's next access fails with ENOTCONN: unmount ends every view."""
    env.mount()
    session = start_holder(env)
    daemon = env.daemon.pid
    p = env.cli("unmount", env.mnt, timeout=DAEMON_EXIT_TIMEOUT + 5)
    assert p.returncode == 0, p.stderr
    env.mounted = False
    assert mount_count(env.mnt) == 0
    how, status = wait_for_exit(daemon, DAEMON_EXIT_TIMEOUT)
    env.daemon = None
    assert how != "alive", "daemon still runs after unmount"
    session.send()
    assert session.recv() == {"after": "ENOTCONN"}
    assert session.finish() == 0


def test_fusermount_with_app_views_alive_stops_the_daemon(env):
    """SPEC S1: a plain `fusermount3 -u` (not the CLI) while an app view
    holds the mount also makes the daemon end the connection and exit."""
    env.mount()
    session = start_holder(env)
    daemon = env.daemon.pid
    r = subprocess.run(["fusermount3", "-u", str(env.mnt)], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    env.mounted = False
    how, _ = wait_for_exit(daemon, DAEMON_EXIT_TIMEOUT)
    env.daemon = None
    assert how != "alive", "daemon still runs after fusermount3 -u"
    session.send()
    assert session.recv() == {"after": "ENOTCONN"}
    session.finish()
    assert not os.path.exists(env.state / "control.sock")
