"""Issue 46, findings 1 and 4: one sandbox profile, the same hardening in
every kind of sandbox ScopeFS starts (SPEC S5, S41; docs/SECURITY.md
"Sandboxes"). The attack probes run against each kind (an app under the
default sandbox, a provider extension, the portal bus proxy of
`scopefs run --portal-bus`), with a root owner and a non-root owner, on
the default mount (strict scopes):

- nothing is host root with a capability: no user namespace made by root
  (whose map `0 0 1` is host root), every capability set empty, even the
  bounding set, no_new_privs, the seccomp filter loaded (mode 2), and no
  further user namespace;
- the kernel's knobs (core_pattern, drop_caches, hostname, ...) refuse to
  open for writing, and the host's core_pattern is unchanged after an
  extension's attempt to set it and crash;
- /dev/shm is a private writable tmpfs (Python's multiprocessing.Lock,
  shm_open, sem_open), /tmp is writable, /sys is absent.

Seen failing on the old main (root owner): the extension's uid_map was
`0 0 1`, core_pattern, drop_caches and hostname opened for writing,
Seccomp was 0; the app's /dev/shm refused multiprocessing.Lock() with
EACCES; the bus proxy had no seccomp filter and a full bounding set.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from scopefs_harness import HERE, NOBODY, NON_ROOT_OWNER_PRELUDE, describe, mount_count, run_bounded, scopefs_bin

PROBES = HERE / "extensions"

# Reads what the host sees of the bus proxy: its credentials and how
# its sandbox mounted /proc/sys, /dev/shm and /sys.
PROXY_REPORT = r"""
import json, os, sys, time
root = sys.argv[1]
deadline = time.time() + 20
while time.time() < deadline:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/comm").read().strip() != "xdg-dbus-proxy":
                continue
            if f"unix:path={root}/bus".encode() not in open(f"/proc/{pid}/cmdline", "rb").read():
                continue
            status = dict(l.split(":\t", 1) for l in open(f"/proc/{pid}/status").read().splitlines() if ":\t" in l)
            mounts = [l.split() for l in open(f"/proc/{pid}/mountinfo").read().splitlines()]
            points = {m[4]: m[5] for m in mounts}
            print(json.dumps({
                "uid": int(status["Uid"].split()[0]),
                "uid_map": open(f"/proc/{pid}/uid_map").read(),
                "status": {k: status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp")},
                "proc_sys": points.get("/proc/sys", ""),
                "dev_shm": "/dev/shm" in points,
                "sys": "/sys" in points,
            }))
            sys.exit(0)
        except (FileNotFoundError, ProcessLookupError):
            continue
    time.sleep(0.1)
sys.exit("no bus proxy of this run appeared")
"""

# One owner's whole session: a local provider and the probe extension, a
# grant, the default mount; the app's probe, the extension's report, and
# the bus proxy's, each on a line of its own. `as_owner` comes first.
SESSION = r"""
s() { as_owner "$binary" --state "$root/state" "$@"; }
s init >/dev/null
s provider add local "$root/provider" >/dev/null
s provider add probe --extension "/usr/bin/python3 $probes/sandbox_report.py $root/ext-out" \
  --writable "$root/ext-out" >/dev/null
s app add com.example.alpha >/dev/null
s grant com.example.alpha local:docs >/dev/null
s mount "$root/mnt" >/dev/null
bus=
trap '[ -n "$bus" ] && kill $bus; s unmount "$root/mnt" >/dev/null 2>&1 || fusermount3 -u "$root/mnt"' EXIT
printf 'app %s\n' "$(s run --app com.example.alpha --expose "$probes" -- python3 "$probes/sandbox_probe.py")"
for i in $(seq 200); do [ -e "$root/ext-out/report.json" ] && break; sleep 0.1; done
printf 'extension %s\n' "$(cat "$root/ext-out/report.json")"
bus=$(as_owner dbus-daemon --session --fork --print-pid=1 --address="unix:path=$root/bus" 2>/dev/null)
DBUS_SESSION_BUS_ADDRESS="unix:path=$root/bus" s run --portal-bus --app com.example.alpha -- sleep 4 >/dev/null &
run=$!
printf 'proxy %s\n' "$(python3 -c "$proxy" "$root")"
wait $run || true
"""

ROOT_PRELUDE = r"""
set -e
as_owner() { env HOME="$root" "$@"; }
"""


def session(owner: str) -> dict[str, dict]:
    """Runs SESSION as `owner` ("root" or "nobody") in a private mount
    namespace and returns the three reports by sandbox kind."""
    root = Path(tempfile.mkdtemp(prefix="scopefs-sandboxes-", dir="/tmp"))
    try:
        os.chmod(root, 0o755)
        for folder in ("provider/docs", "mnt", "dev", "ext-out"):
            (root / folder).mkdir(parents=True)
        (root / "provider/docs/report.txt").write_text("the report\n")
        if owner == "nobody":
            for path in [root, *root.rglob("*")]:
                os.chown(path, NOBODY, NOBODY)
        prelude = NON_ROOT_OWNER_PRELUDE if owner == "nobody" else ROOT_PRELUDE
        script = "root=$1 binary=$2 probes=$3 proxy=$4" + prelude + SESSION
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "session"]
        argv += [str(root), str(scopefs_bin().resolve()), str(PROBES), PROXY_REPORT]
        p = run_bounded(argv, 150, dict(os.environ), what=f"a {owner} owner's session")
        assert p.returncode == 0, describe(p)
        reports = {}
        for line in p.stdout.splitlines():
            kind, _, text = line.partition(" ")
            if kind in ("app", "extension", "proxy") and text.startswith("{"):
                reports[kind] = json.loads(text)
        assert set(reports) == {"app", "extension", "proxy"}, describe(p)
        return reports
    finally:
        if not mount_count(root / "mnt"):
            shutil.rmtree(root, ignore_errors=True)


def account_uid(name: str) -> int:
    import pwd

    return pwd.getpwnam(name).pw_uid


def assert_hardened(kind: str, got: dict) -> None:
    """What every sandbox has, whoever its owner is."""
    status = got["status"]
    assert status["NoNewPrivs"] == "1", (kind, got)
    assert status["Seccomp"] == "2", f"{kind}: no seccomp filter: {got}"
    for capabilities in ("CapEff", "CapPrm", "CapBnd"):
        assert int(status[capabilities], 16) == 0, f"{kind}: {capabilities} {status[capabilities]}: {got}"
    if "knobs" in got:
        assert all(result in ("EACCES", "EPERM", "EROFS", "ENOENT") for result in got["knobs"].values()), (kind, got)
        assert got["shm_lock"] == "ok" and got["shm_write"] == "ok", f"{kind}: /dev/shm: {got}"
        assert got["tmp_write"] == "ok", (kind, got)
        assert got["sys"] is False, f"{kind} sees /sys: {got}"
        assert got["unshare_user"] in ("EPERM", "ENOSPC", "EACCES"), (kind, got)
    else:
        assert got["proc_sys"].startswith("ro"), f"{kind}: /proc/sys is {got['proc_sys']!r}"
        assert got["dev_shm"] and not got["sys"], (kind, got)


def assert_not_host_root(kind: str, got: dict, expected_uid: int) -> None:
    assert got["uid"] == expected_uid, (kind, got)
    lines = got["uid_map"].splitlines()
    if expected_uid == NOBODY:
        # The owner's user namespace maps one uid, which is not root: the
        # owner's (read on the host: `65534 65534 1`; read inside, against
        # bubblewrap's intermediate namespace of --disable-userns: `65534 0 1`).
        assert len(lines) == 1 and lines[0].split()[2] == "1", (kind, got["uid_map"])
    else:
        # No user namespace made by root (`0 0 1`): the host's own map.
        assert lines == ["         0          0 4294967295"], (kind, got["uid_map"])


@pytest.fixture(scope="module")
def root_reports():
    if os.geteuid() != 0:
        pytest.fail("the root-owner case needs root")
    core_pattern = Path("/proc/sys/kernel/core_pattern").read_text()
    reports = session("root")
    assert Path("/proc/sys/kernel/core_pattern").read_text() == core_pattern
    return reports


@pytest.fixture(scope="module")
def nobody_reports():
    return session("nobody")


@pytest.mark.parametrize("kind", ["app", "extension", "proxy"])
def test_every_sandbox_of_a_root_owner_has_the_one_profile(root_reports, kind):
    """Root owner: the app and its bus proxy run as scopefs-app; the
    extension keeps uid 0 (root's own credentials and folders) in no user
    namespace, with every capability set empty, so it is root in name
    only; each has the same hardening."""
    got = root_reports[kind]
    assert_hardened(kind, got)
    assert_not_host_root(kind, got, 0 if kind == "extension" else account_uid("scopefs-app"))


@pytest.mark.parametrize("kind", ["app", "extension", "proxy"])
def test_every_sandbox_of_a_non_root_owner_has_the_one_profile(nobody_reports, kind):
    """Non-root owner (uid 65534): each sandbox is the owner in a user
    namespace of one uid that can make no other, with the same hardening."""
    got = nobody_reports[kind]
    assert_hardened(kind, got)
    assert_not_host_root(kind, got, NOBODY)


def test_a_root_owners_extension_cannot_run_a_core_pattern_command(tmp_path):
    """Finding 1's exploit as printed, from an extension: set core_pattern
    to a pipe, then crash a child. The write is refused and nothing runs."""
    if os.geteuid() != 0:
        pytest.fail("the root-owner case needs root")
    knob = Path("/proc/sys/kernel/core_pattern")
    before = knob.read_text()
    marker = tmp_path / "ran-as-root"
    attack = tmp_path / "core_attack.py"
    attack.write_text(
        "import os, signal, sys\n"
        f"try:\n    open('/proc/sys/kernel/core_pattern', 'w').write('|/bin/sh -c id>{marker}')\n"
        "except OSError as exc:\n    print('refused', exc, file=sys.stderr)\n"
        "if os.fork() == 0:\n    os.kill(os.getpid(), signal.SIGSEGV)\n"
        "os.wait()\nsys.stdin.read()\n"
    )
    root = Path(tempfile.mkdtemp(prefix="scopefs-core-", dir="/tmp"))
    script = r"""
set -e
s() { "$binary" --state "$root/state" "$@"; }
s init >/dev/null
s provider add attack --extension "/usr/bin/python3 $attack" >/dev/null
mkdir -p "$root/mnt"
s mount "$root/mnt" >/dev/null
sleep 3
s unmount "$root/mnt" >/dev/null
"""
    try:
        argv = ["sh", "-c", "root=$1 binary=$2 attack=$3" + script, "attack"]
        p = run_bounded(argv + [str(root), str(scopefs_bin().resolve()), str(attack)], 60, dict(os.environ))
        assert p.returncode == 0, describe(p)
        assert knob.read_text() == before, describe(p)
        assert not marker.exists(), describe(p)
    finally:
        if knob.read_text() != before:
            knob.write_text(before)
        if not mount_count(root / "mnt"):
            shutil.rmtree(root, ignore_errors=True)
