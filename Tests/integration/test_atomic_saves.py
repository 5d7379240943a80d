"""Atomic saves through ScopeFS's mount beside a single-file grant (SPEC
S48): an app that may write a granted file saves it as Foundation's
write(to:atomically: true), GLib and Qt do, by a temporary file in the
file's folder renamed over it. The folder is a bare one (S2: only the
granted file shows), so the temporary is the app's alone, cannot take an
existing name, and never becomes a grant; the grant, the item identifier
and bookmarks follow the new file; a revoke cuts the temporary.
"""

from __future__ import annotations

import json
import os

import pytest
from doc_scope_helpers import GETXATTR, bookmark, mount, resolve_ok
from scopefs_harness import ALPHA, BETA, ITEMS_MOVE, LOCAL, REPORT_BYTES

REPORT = "docs/report.txt"

# argv: the granted file, the temporary's name, its content. Starts
# accessing the file (strict scopes, S9), then saves as the libraries do.
SAVE = """
target, name, text = sys.argv[1], sys.argv[2], sys.argv[3].encode()
folder = os.path.dirname(target)
temp = os.path.join(folder, name)
start_accessing(target)
def write_temp():
    fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        os.write(fd, text)
        os.fsync(fd)
    finally:
        os.close(fd)
result = {"create": attempt(write_temp)}
result["seen"] = attempt(os.stat, temp)
result["rename"] = attempt(os.rename, temp, target)
result["read"] = outcome(lambda: read_bytes(target).decode())
result["leftover"] = attempt(os.stat, temp)
emit(result)
"""


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_a_single_file_grant_is_saved_atomically(env):
    """SPEC S48: the app's temporary beside its granted file is made,
    found, and renamed over the file; the host file is a new one with the
    new content, the grant and the item identifier are the same, and a
    bookmark made before resolves to the file, not stale."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    mount(env)
    target = env.prov(ALPHA, LOCAL, REPORT)
    host = env.backing(LOCAL) / REPORT
    old_inode = host.stat().st_ino
    item = env.app_json(ALPHA, "start_accessing(sys.argv[1])\n" + GETXATTR, target, "user.scopefs.item")
    token = bookmark(env, ALPHA, target)
    got = env.app_json(ALPHA, SAVE, target, ".dat.nosync1234.AbCdEf", "saved atomically")
    assert got == {
        "create": "OK",
        "seen": "OK",
        "rename": "OK",
        "read": {"ok": "saved atomically"},
        "leftover": "ENOENT",
    }, got
    assert host.read_bytes() == b"saved atomically"
    assert host.stat().st_ino != old_inode, "a new file took the name"
    assert env.app_json(ALPHA, "start_accessing(sys.argv[1])\n" + GETXATTR, target, "user.scopefs.item") == item
    resolved = resolve_ok(env, ALPHA, token)
    assert resolved["path"] == target and resolved["isStale"] is False, resolved
    [grant] = [g for g in json.loads(env.cli("privacy", ALPHA, "--json").stdout) if g["path"] == REPORT]
    assert grant["state"] == "active", grant


RULES = """
target, mode = sys.argv[1], sys.argv[2]
folder = os.path.dirname(target)
def make(name):
    os.close(os.open(os.path.join(folder, name), os.O_CREAT | os.O_WRONLY, 0o600))
result = {}
if mode == "scoped":
    start_accessing(target)
result["create"] = attempt(make, "tmp-1")
if mode == "scoped":
    result["existing_name"] = attempt(make, "secret.txt")
    result["folder"] = attempt(os.mkdir, os.path.join(folder, "sub"))
    result["onto_ungranted"] = attempt(os.rename, os.path.join(folder, "tmp-1"), os.path.join(folder, "secret.txt"))
    result["to_new_name"] = attempt(os.rename, os.path.join(folder, "tmp-1"), os.path.join(folder, "tmp-2"))
    result["listed"] = sorted(os.listdir(folder))
    result["unlink"] = attempt(os.unlink, os.path.join(folder, "tmp-2"))
    result["unlink_again"] = attempt(os.unlink, os.path.join(folder, "tmp-2"))
emit(result)
"""


def test_nothing_else_is_made_beside_a_single_file_grant(env):
    """SPEC S48, S9, S2, S33: without the file's scope no temporary is made
    (EPERM); with it, a temporary cannot take a name the host has (EEXIST:
    the ungranted file is never opened), a folder is refused (EPERM), a
    temporary is never renamed onto an ungranted name (EEXIST, the file
    untouched) but may take a new name and be removed; the folder still
    lists only the granted file; a read-only grant makes nothing."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    env.grant(BETA, f"{LOCAL}:{REPORT}", read_only=True)
    mount(env)
    target = env.prov(ALPHA, LOCAL, REPORT)
    assert env.app_json(ALPHA, RULES, target, "unscoped") == {"create": "EPERM"}
    got = env.app_json(ALPHA, RULES, target, "scoped")
    assert got == {
        "create": "OK",
        "existing_name": "EEXIST",
        "folder": "EPERM",
        "onto_ungranted": "EEXIST",
        "to_new_name": "OK",
        "listed": ["report.txt"],
        "unlink": "OK",
        "unlink_again": "ENOENT",
    }, got
    assert (env.backing(LOCAL) / "docs/secret.txt").read_bytes() == b"top secret\n"
    assert env.app_json(BETA, RULES, env.prov(BETA, LOCAL, REPORT), "scoped")["create"] == "EPERM"
    assert sorted(os.listdir(env.backing(LOCAL) / "docs")) == ["report.txt", "secret.txt"]


HOLD = """
target = sys.argv[1]
temp = os.path.join(os.path.dirname(target), "draft")
start_accessing(target)
fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
os.write(fd, b"before")
step({"made": True})
result = {"write": attempt(os.write, fd, b" after"), "rename": attempt(os.rename, temp, target)}
os.close(fd)
emit(result)
"""


def test_revoke_cuts_a_temporary(env):
    """SPEC S48, S14: a revoke of the granted file cuts the temporary's
    descriptor (EPERM at its next write) and the rename over the file;
    another app never sees the temporary (ENOENT)."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    env.grant(BETA, f"{LOCAL}:{REPORT}")
    mount(env)
    target = env.prov(ALPHA, LOCAL, REPORT)
    session = env.app_session(ALPHA, HOLD, target)
    assert session.recv() == {"made": True}
    other = env.app_json(BETA, "emit(attempt(os.stat, sys.argv[1]))", env.prov(BETA, LOCAL, "docs/draft"))
    assert other == "ENOENT"
    env.cli("revoke", ALPHA, f"{LOCAL}:{REPORT}")
    session.send()
    got = session.recv()
    assert session.finish() == 0
    assert got["write"] == "EPERM" and got["rename"] == "EPERM", got
    assert (env.backing(LOCAL) / REPORT).read_bytes() == REPORT_BYTES
