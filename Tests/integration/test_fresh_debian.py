"""Issue 19, "Done when": a fresh Debian 12 installs the .deb and runs the
README session verbatim.

A minimal Debian 12 root (`debootstrap --variant=minbase bookworm` from
deb.debian.org) is made once and cached in /var/cache/scopefs-ci
(SCOPEFS_DEBIAN_ROOT_CACHE). Each run puts a throw-away overlay on it in a
private mount and pid namespace, enters it with pivot_root (its own /proc, the
host's /dev with /dev/fuse, /sys for cgroups, network and resolver),
installs the package with `apt install ./scopefs_VERSION_amd64.deb` (apt
fetches fuse3, bubblewrap, ... from Debian), and runs the README's session
block as root in /root, as a new user would paste it. Downloaded .debs are
cached next to the root, so later runs need no download.

Needs root, debootstrap (`make deps` installs it), unshare and overlayfs;
without debootstrap the test fails rather than skips, as every
integration test does where FUSE works.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from scopefs_harness import describe, run_bounded
from test_readme import session_block

CACHE = Path(os.environ.get("SCOPEFS_DEBIAN_ROOT_CACHE", "/var/cache/scopefs-ci"))
ROOT = CACHE / "bookworm-minbase"
ARCHIVES = CACHE / "apt-archives"
MIRROR = "http://deb.debian.org/debian"
BOOTSTRAP_TIMEOUT = 1200  # once per machine: a download of about 40 MB and an install
SESSION_TIMEOUT = 600


def bootstrapped_root() -> Path:
    """The cached Debian 12 root, made now when missing (a partial one from
    an interrupted run is made again)."""
    if (ROOT / "etc" / "debian_version").is_file():
        return ROOT
    debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    assert os.path.exists(debootstrap), "debootstrap is missing: `make deps` installs it (APT_PACKAGES)"
    partial = CACHE / "bookworm-minbase.partial"
    if partial.exists():
        shutil.rmtree(partial)
    CACHE.mkdir(parents=True, exist_ok=True)
    p = run_bounded(
        [debootstrap, "--variant=minbase", "bookworm", partial, MIRROR],
        BOOTSTRAP_TIMEOUT,
        dict(os.environ),
        out_dir=CACHE,
        what="debootstrap bookworm",
    )
    assert p.returncode == 0, describe(p)
    partial.rename(ROOT)
    return ROOT


# Runs as pid 1 of a private pid and mount namespace: the overlay over the
# cached root, a fresh /proc (no overmounts: the sandbox of `scopefs run`
# mounts its own /proc from a user namespace, which the kernel allows only
# while the /proc it sees is fully visible), the host's /dev (with
# /dev/fuse) and /sys (cgroups), then pivot_root into it: chroot would do
# for apt, but a chrooted process may not make the user namespace of the
# sandbox of `scopefs run`. $1 root, $2 work dir, $3 the
# .deb's folder, $4 apt's archive cache; the rest is the command run inside.
ENTER = r"""
set -e
root=$1 work=$2 debs=$3 archives=$4; shift 4
m=$work/merged
mkdir -p "$work/upper" "$work/work" "$m"
mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/work" "$m"
mount -t proc proc "$m/proc"
mount --rbind /dev "$m/dev"
mount --rbind /sys "$m/sys"
mount -t tmpfs -o mode=1777 tmpfs "$m/tmp"
mount -t tmpfs -o mode=755 tmpfs "$m/run"
mkdir -p "$m/debs"
mount --bind "$debs" "$m/debs"
mount --bind "$archives" "$m/var/cache/apt/archives"
cp /etc/resolv.conf "$m/etc/resolv.conf"
mkdir -p "$m/.oldroot"
cd "$m"
pivot_root . .oldroot
exec /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive \
    /bin/sh -c 'umount -l /.oldroot && rmdir /.oldroot && cd / && exec "$@"' enter "$@"
"""


def inside_fresh_debian(tmp_path: Path, deb_file: Path, script: str) -> subprocess.CompletedProcess:
    root = bootstrapped_root()
    ARCHIVES.mkdir(parents=True, exist_ok=True)
    (ARCHIVES / "partial").mkdir(exist_ok=True)
    debs = tmp_path / "debs"
    debs.mkdir()
    shutil.copy(deb_file, debs / deb_file.name)
    work = tmp_path / "overlay"
    argv = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--pid",
        "--fork",
        "sh",
        "-c",
        ENTER,
        "enter",
        root,
        work,
        debs,
        ARCHIVES,
        "bash",
        "-c",
        script,
    ]
    try:
        return run_bounded(argv, SESSION_TIMEOUT, dict(os.environ), out_dir=tmp_path, what="the fresh Debian 12 root")
    finally:
        # Its mounts ended with its namespaces; the overlay's upper layer
        # (the installed package, the session's files) goes too.
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.scopefs_timeout(1800)
def test_fresh_debian_installs_the_deb_and_runs_the_readme_session(deb, tmp_path):
    """Done when (issue 19): on a fresh Debian 12, `apt install` of the
    package pulls what it needs, and the README's session runs verbatim
    with the installed `scopefs` and ends with its mount gone."""
    if os.geteuid() != 0:
        pytest.fail("the fresh-Debian test needs root (debootstrap, overlay, /dev/fuse)")
    session = session_block()
    script = f"""
set -e
cd
apt-get update -qq
apt-get install -y -qq --no-install-recommends /debs/{shlex.quote(deb.name)} >/tmp/apt.log 2>&1 || {{ cat /tmp/apt.log; exit 90; }}
command -v scopefs
scopefs --version
echo '--- session ---'
{session}
echo '--- end ---'
echo "mounts left: $(grep -c " $HOME/scopefs " /proc/self/mountinfo || true)"
"""
    p = inside_fresh_debian(tmp_path, deb, script)
    assert p.returncode == 0, describe(p)
    out = p.stdout
    assert "/usr/bin/scopefs" in out, describe(p)
    session_out = out.split("--- session ---", 1)[1]
    assert "Container" in session_out and "Providers" in session_out, describe(p)
    assert "no scope yet: EPERM" in session_out, describe(p)
    # In scope twice: `scope exec`, and `run --hold-scopes` (issue 50.3).
    assert session_out.count("It was a dark and stormy night.") == 2, describe(p)
    assert "exit 77: only you change grants" in session_out, describe(p)
    assert "chapter1.txt ->" in session_out, describe(p)
    assert "mounts left: 0" in out, "the session left its mount\n" + describe(p)
