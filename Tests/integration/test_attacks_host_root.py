"""Issue 28, finding 1 (critical) and the host-layout part of finding 5: a
sandboxed app is never host root, cannot reach the kernel's knobs, and
sees no host path of the state directory or the binary. Each attack runs
as users run ScopeFS: the default mount (strict scopes) and the default
sandbox, once with a root owner and once with a non-root owner.

Seen failing on the old main (root owner): the app was uid 0 with uid_map
`0 0 1`, `/proc/sys/vm/drop_caches` and `kernel/core_pattern` opened for
writing, and /proc/1/cmdline and mountinfo named the state directory and
the binary. SPEC S39, S5 (amended), S32.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from doc_scope_helpers import mount as mount_with_scopes
from scopefs_harness import ALPHA, LOCAL, NON_ROOT_OWNER_PRELUDE, describe, mount_count, run_bounded, scopefs_bin

# Each file changes the kernel for the whole machine; each is root's and
# guarded only by its mode. Opened for writing, never written: a success is
# the finding.
KERNEL_KNOBS = [
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/vm/drop_caches",
    "/proc/sys/kernel/randomize_va_space",
    "/proc/sys/fs/protected_symlinks",
    "/proc/sysrq-trigger",
]

# What the app learns about itself and the sandbox (Debian's python3, as an
# app developer's script would be).
PROBE = r"""
import errno, json, os, sys
knobs = {}
for path in sys.argv[1].split(","):
    try:
        fd = os.open(path, os.O_WRONLY)
        os.close(fd)
        knobs[path] = "WRITABLE"
    except OSError as exc:
        knobs[path] = errno.errorcode.get(exc.errno, str(exc.errno))
mine = os.path.join(os.environ["HOME"], "Documents", "made-by-the-app.txt")
with open(mine, "w") as f:
    f.write("mine")
info = os.stat(mine)
print(json.dumps({
    "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
    "uid_map": open("/proc/self/uid_map").read(),
    "knobs": knobs,
    "cmdline": open("/proc/1/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace"),
    "mountinfo": open("/proc/self/mountinfo").read(),
    "file_uid": info.st_uid,
    "status": dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line),
}))
"""


def probe(argv_prefix: list[str], run_argv: list[str], env_vars: dict) -> dict:
    p = run_bounded(
        argv_prefix + run_argv + ["--", "python3", "-c", PROBE, ",".join(KERNEL_KNOBS)],
        60,
        env_vars,
        what="the probe app",
    )
    assert p.returncode == 0, describe(p)
    return json.loads(p.stdout.strip().splitlines()[-1])


NOBODY = 65534


def host_paths(state: Path) -> list[str]:
    binary = scopefs_bin().resolve()
    return [str(state), str(state.resolve()), str(binary), str(binary.parent)]


def assert_confined(got: dict, expected_uid: int, state: Path) -> None:
    assert got["uid"] == expected_uid and got["euid"] == expected_uid, got
    # With a root owner the app is in the host's user namespace (the
    # identity map), so its uid is its host uid. A non-root owner's app is
    # in a user namespace made by the owner, which maps one uid only: it
    # cannot be host root whatever it is called inside.
    lines = got["uid_map"].splitlines()
    if expected_uid == NOBODY:
        assert len(lines) == 1 and lines[0].split()[2] == "1", got["uid_map"]
    else:
        assert lines == ["         0          0 4294967295"], got["uid_map"]
    assert got["status"]["NoNewPrivs"] == "1" and int(got["status"]["CapEff"], 16) == 0, got["status"]
    assert all(result in ("EACCES", "EPERM", "EROFS", "ENOENT") for result in got["knobs"].values()), got["knobs"]
    for path in host_paths(state):
        assert path not in got["cmdline"], (path, got["cmdline"])
        assert path not in got["mountinfo"], (path, got["mountinfo"])
    # The app's own file is its own (programs that check ownership trust it).
    assert got["file_uid"] == expected_uid, got


def account_uid(name: str) -> int:
    p = subprocess.run(["id", "-u", name], capture_output=True, text=True)
    assert p.returncode == 0, f"the {name} account is missing: `make deps` creates it\n{p.stderr}"
    return int(p.stdout)


def test_a_root_owners_app_runs_as_the_app_account_and_cannot_touch_the_kernel(env):
    """Finding 1 with a root owner: the app runs as the scopefs-app
    account, every kernel knob refuses it, the host's core_pattern is
    unchanged, and files it creates stay root's on the host while it sees
    them as its own (docs/SECURITY.md "Who an app runs as")."""
    if os.geteuid() != 0:
        pytest.fail("the root-owner case needs root")
    core_pattern = Path("/proc/sys/kernel/core_pattern").read_text()
    env.grant(ALPHA, f"{LOCAL}:docs")
    mount_with_scopes(env)
    got = probe([], env.run_argv(ALPHA, [], sandbox=True)[:-1], env.base_env)
    assert_confined(got, account_uid("scopefs-app"), env.state)
    assert Path("/proc/sys/kernel/core_pattern").read_text() == core_pattern
    host_file = env.state / "containers" / ALPHA / "Documents" / "made-by-the-app.txt"
    assert host_file.stat().st_uid == 0, "a file the app made is the owner's on the host"


def test_a_root_owners_app_cannot_run_a_core_pattern_command_as_root(env):
    """Finding 1's exploit as printed: set core_pattern to a pipe, then
    crash. The write is refused and nothing runs on the host."""
    marker = Path(tempfile.gettempdir()) / f"scopefs-core-{os.getpid()}"
    marker.unlink(missing_ok=True)
    knob = Path("/proc/sys/kernel/core_pattern")
    before = knob.read_text()
    mount_with_scopes(env)
    attack = (
        f'echo "|/bin/sh -c id>{marker}" > /proc/sys/kernel/core_pattern; '
        'sh -c "kill -SEGV \\$\\$"; cat /proc/sys/kernel/core_pattern'
    )
    try:
        p = env.run_app(ALPHA, ["sh", "-c", attack], sandbox=True)
        assert knob.read_text() == before, describe(p)
        assert not marker.exists(), describe(p)
    finally:
        # On a build with the finding, the attack changed the host: undo it.
        if knob.read_text() != before:
            knob.write_text(before)
        marker.unlink(missing_ok=True)


# --- a non-root owner ---------------------------------------------------------

# The non-root owner's whole session runs in a private mount namespace
# (NON_ROOT_OWNER_PRELUDE), and unmounts before it ends.
NOBODY_SESSION = (
    "root=$1 binary=$2 probe=$3 knobs=$4"
    + NON_ROOT_OWNER_PRELUDE
    + r"""
s() { as_owner "$binary" --state "$root/state-parent/state" "$@"; }
s init >/dev/null
s provider add local "$root/provider" >/dev/null
s app add com.example.alpha >/dev/null
s grant com.example.alpha local:docs >/dev/null
s mount "$root/mnt" >/dev/null
trap 's unmount "$root/mnt" >/dev/null 2>&1 || fusermount3 -u "$root/mnt"' EXIT
s run --app com.example.alpha -- python3 -c "$probe" "$knobs"
"""
)


def test_a_non_root_owners_app_keeps_the_owners_uid_and_cannot_touch_the_kernel(tmp_path):
    """Finding 1 with a non-root owner (uid 65534 here): the app keeps the
    owner's uid in a user namespace that maps only that uid, every kernel
    knob refuses it, and the sandbox names neither the state directory nor
    the binary."""
    root = Path(tempfile.mkdtemp(prefix="scopefs-owner-", dir="/tmp"))
    try:
        os.chmod(root, 0o755)
        for folder in ("state-parent", "provider/docs", "mnt", "dev"):
            (root / folder).mkdir(parents=True)
        (root / "provider/docs/report.txt").write_text("the report\n")
        for path in [root, *root.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        binary = str(scopefs_bin().resolve())
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", NOBODY_SESSION, "session"]
        p = run_bounded(argv + [str(root), binary, PROBE, ",".join(KERNEL_KNOBS)], 90, dict(os.environ), what="owner")
        assert p.returncode == 0, describe(p)
        got = json.loads(p.stdout.strip().splitlines()[-1])
        assert_confined(got, NOBODY, root / "state-parent" / "state")
    finally:
        if not mount_count(root / "mnt"):
            shutil.rmtree(root, ignore_errors=True)


def test_other_users_and_the_app_account_outside_a_run_see_nothing(env):
    """A root daemon's mount now has allow_other (for the app account), so
    every local user reaches it: each is a stranger unless it is an app
    process or the owner. The app account itself, outside `scopefs run`,
    gets ENOENT (a stranger) for the app's container and granted folder,
    and uid 65534 EACCES, as the kernel answered it before allow_other;
    neither can create a file there (SECURITY.md "Who an app runs as")."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    mount_with_scopes(env)
    attempt = (
        "import os, sys, errno\n"
        "out = []\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n"
        "        os.listdir(p); out.append('LISTED')\n"
        "    except OSError as e:\n"
        "        out.append(errno.errorcode[e.errno])\n"
        "try:\n"
        "    open(os.path.join(sys.argv[1], 'x'), 'w'); out.append('CREATED')\n"
        "except OSError as e:\n"
        "    out.append(errno.errorcode[e.errno])\n"
        "print(' '.join(out))\n"
    )
    targets = [env.container(ALPHA), env.prov(ALPHA, LOCAL, "docs"), env.app_dir(ALPHA)]
    for who in ("scopefs-app", "65534"):
        uid = account_uid("scopefs-app") if who == "scopefs-app" else NOBODY
        p = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", "python3", "-c", attempt] + targets,
            capture_output=True,
            text=True,
            timeout=30,
        )
        # The account is let in (its runs need it) as a stranger; any
        # other uid is refused as the kernel refused it before.
        expected = "ENOENT" if who == "scopefs-app" else "EACCES"
        assert p.stdout.split() == [expected] * 4, (who, describe(p))


def test_a_killed_daemons_sandbox_endpoint_is_swept_at_the_next_mount(env):
    """The sandbox endpoint lives outside the state directory
    (/run/scopefs/app-PID.sock for root): one left by a daemon killed with
    SIGKILL is removed when the next daemon starts, so they do not pile up."""
    folder = Path("/run/scopefs")
    folder.mkdir(mode=0o711, exist_ok=True)
    dead = next(pid for pid in range(4_000_000, 4_100_000) if not Path(f"/proc/{pid}").exists())
    stale = folder / f"app-{dead}.sock"
    stale.touch()
    mount_with_scopes(env)
    assert not stale.exists()
    assert (folder / f"app-{env.daemon_pid()}.sock").exists()
