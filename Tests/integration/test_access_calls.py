"""access(2) through the mount (SPEC S9, S47, S4, S32): the kernel checks
no permission bits of its own on ScopeFS's mount (no default_permissions)
and asks the file system; its answer is the one an open would get, from
the one access rule, then the host's permissions. Without it every
access(2) said yes: `access(W_OK)` of a read-only grant too, for a root
owner's app and a non-root owner's alike. chdir asks it as well (X_OK),
and stays a lookup: it needs no scope.
"""

from __future__ import annotations

import json
import os

from doc_scope_helpers import mount
from scopefs_harness import (
    ALPHA,
    BETA,
    LOCAL,
    NON_ROOT_OWNER_PRELUDE,
    NON_ROOT_OWNER_STATE,
    REPORT_BYTES,
    describe,
    non_root_owner_root,
    run_non_root_session,
    snippet,
)

REPORT = "docs/report.txt"

# argv: a granted file and its folder. access(2) by libc itself, so the
# errno is the kernel's (Python's os.access keeps only a bool).
PROBE = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def access(path, mask):
    if libc.access(os.fsencode(path), mask) != 0:
        raise OSError(ctypes.get_errno(), "access")
target, folder = sys.argv[1], sys.argv[2]
result = {"unscoped_read": attempt(access, target, os.R_OK), "exists": attempt(access, target, os.F_OK)}
result["chdir_unscoped"] = attempt(os.chdir, folder)
start_accessing(target)
result["read"] = attempt(access, target, os.R_OK)
result["write"] = attempt(access, target, os.W_OK)
result["read_write"] = attempt(access, target, os.R_OK | os.W_OK)
result["open_for_writing"] = attempt(lambda: os.close(os.open(target, os.O_WRONLY)))
result["ungranted"] = attempt(access, os.path.join(folder, "secret.txt"), os.F_OK)
emit(result)
"""

READ_ONLY = {
    "unscoped_read": "EPERM",
    "exists": "OK",
    "chdir_unscoped": "OK",
    "read": "OK",
    "write": "EPERM",
    "read_write": "EPERM",
    "open_for_writing": "EPERM",
    "ungranted": "ENOENT",
}
READ_WRITE = dict(READ_ONLY, write="OK", read_write="OK", open_for_writing="OK")


def test_access_answers_as_an_open_would_for_a_root_owners_apps(env):
    """SPEC S47, S9, S32: an app of a root owner asking access(W_OK) of a
    read-only grant gets EPERM, as its open for writing does; of a
    read-write grant, yes; R_OK needs the scope as a read does; F_OK and
    chdir need none; an ungranted sibling is ENOENT. The owner's shell
    (the inspect view, S4) may read but gets EROFS for W_OK."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}", read_only=True)
    env.grant(BETA, f"{LOCAL}:{REPORT}")
    mount(env)
    for app, expected in ((ALPHA, READ_ONLY), (BETA, READ_WRITE)):
        target = env.prov(app, LOCAL, REPORT)
        got = env.app_json(app, PROBE, target, os.path.dirname(target))
        assert got == expected, (app, got)
    inspect = env.host_json(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "def access(path, mask):\n    if libc.access(os.fsencode(path), mask) != 0:\n"
        "        raise OSError(ctypes.get_errno(), 'access')\n"
        "emit({'read': attempt(access, sys.argv[1], os.R_OK), 'write': attempt(access, sys.argv[1], os.W_OK)})",
        env.prov(ALPHA, LOCAL, REPORT),
    )
    assert inspect == {"read": "OK", "write": "EROFS"}, inspect
    assert (env.backing(LOCAL) / REPORT).read_bytes() == REPORT_BYTES


# The non-root owner's session (uid 65534) in a private mount namespace
# (NON_ROOT_OWNER_PRELUDE): a read-only grant of one file, a read-write
# grant of another whose host mode is 0444; the probe runs against each.
NOBODY_SESSION = (
    "root=$1 binary=$2 app=$3"
    + NON_ROOT_OWNER_PRELUDE
    + NON_ROOT_OWNER_STATE
    + r"""
s grant com.example.alpha local:docs/report.txt --read-only >/dev/null
s grant com.example.alpha local:docs/locked.txt >/dev/null
s mount "$root/mnt" >/dev/null
trap 's unmount "$root/mnt" >/dev/null 2>&1 || fusermount3 -u "$root/mnt"' EXIT
docs="$root/mnt/com.example.alpha/Providers/local/docs"
s run --app com.example.alpha -- python3 -c "$app" "$docs/report.txt" "$docs" >"$root/out-ro" 2>"$root/err"
s run --app com.example.alpha -- python3 -c "$app" "$docs/locked.txt" "$docs" >"$root/out-locked" 2>>"$root/err"
tail -n 1 "$root/out-ro"
tail -n 1 "$root/out-locked"
"""
)


def test_access_answers_as_an_open_would_for_a_non_root_owners_apps():
    """SPEC S47, S32: with a non-root owner (uid 65534), access(W_OK) of
    a read-only grant is EPERM; of a read-write grant of a file the host
    keeps at mode 0444, EACCES, the host's own answer (as the open's)."""
    files = {
        "provider/docs/report.txt": REPORT_BYTES,
        "provider/docs/secret.txt": b"top secret\n",
        "provider/docs/locked.txt": b"locked\n",
    }
    with non_root_owner_root("scopefs-access-", ("provider/docs", "mnt"), files) as root:
        os.chmod(root / "provider/docs/locked.txt", 0o444)
        p = run_non_root_session(NOBODY_SESSION, root, snippet(PROBE))
        assert p.returncode == 0, describe(p) + (root / "err").read_text(errors="replace")
        read_only, locked = (json.loads(line) for line in p.stdout.strip().splitlines()[-2:])
        assert read_only == READ_ONLY, read_only
        expected = dict(READ_WRITE, write="EACCES", read_write="EACCES", open_for_writing="EACCES")
        assert locked == expected, locked
