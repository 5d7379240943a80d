"""Installs what the benchmark needs and builds its C helpers.

Debian packages come from apt (one `apt-get update` before the first
install), matplotlib from PyPI with Debian's python3-matplotlib as the
fallback. The C helpers are built into bench/.build-bench/ (git-ignored).
"""

import gzip
import importlib
import os
import shutil
import subprocess
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(BENCH, ".build-bench")
EXAMPLES = "/usr/share/doc/libfuse3-dev/examples"
PORTAL_BIN = "/usr/libexec/xdg-document-portal"

# command or file that must exist -> Debian package that provides it
REQUIRED = {
    "cc": "gcc",
    "pkg-config": "pkg-config",
    "fusermount3": "fuse3",
    EXAMPLES + "/passthrough_ll.c": "libfuse3-dev",
    "/usr/include/fuse3/fuse_lowlevel.h": "libfuse3-dev",
    "tar": "tar",
    "git": "git",
    "make": "make",
    "find": "findutils",
}
# Only the document portal needs these; without them it is skipped.
PORTAL = {"dbus-daemon": "dbus-daemon", PORTAL_BIN: "xdg-desktop-portal"}

_apt_updated = False


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def _present(thing):
    if thing.startswith("/"):
        return os.path.exists(thing) or os.path.exists(thing + ".gz")
    return shutil.which(thing) is not None


def apt_install(packages):
    """Installs Debian packages; returns True on success."""
    global _apt_updated
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not _apt_updated:
        log("bench: apt-get update")
        subprocess.run(["apt-get", "update"], env=env, stdout=subprocess.DEVNULL, check=False)
        _apt_updated = True
    log("bench: apt-get install -y " + " ".join(packages))
    r = subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", *packages],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if r.returncode != 0:
        log("bench: apt-get install failed: " + r.stderr.strip()[-500:])
    return r.returncode == 0


def ensure_packages(portal):
    needs = {**REQUIRED, **(PORTAL if portal else {})}
    missing = sorted({pkg for thing, pkg in needs.items() if not _present(thing)})
    if missing:
        apt_install(missing)
    # The portal is the only system that may be skipped; everything else is required.
    still = [t for t in REQUIRED if not _present(t)]
    if still:
        sys.exit("bench: missing after installation: " + ", ".join(still))


def ensure_matplotlib():
    """Returns the pyplot module, installing matplotlib if needed, or None."""
    try:
        return _pyplot()
    except ImportError:
        pass
    log("bench: pip install matplotlib")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "matplotlib"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if r.returncode == 0:
        importlib.invalidate_caches()
        try:
            return _pyplot()
        except ImportError:
            pass
    # Debian's package serves Debian's python3; usable here when the versions match.
    if apt_install(["python3-matplotlib"]) and sys.version_info[:2] == (3, 11):
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            return _pyplot()
        except ImportError:
            pass
    log("bench: matplotlib is unavailable; no chart will be drawn")
    return None


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _example(name):
    """Path of a libfuse example source, decompressing NAME.gz if needed."""
    plain = os.path.join(EXAMPLES, name)
    if os.path.exists(plain):
        return plain
    out = os.path.join(BUILD, name)
    with gzip.open(plain + ".gz", "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def _stale(target, sources):
    if not os.path.exists(target):
        return True
    return any(os.path.getmtime(s) > os.path.getmtime(target) for s in sources)


def _cc(target, sources, extra):
    if not _stale(target, sources):
        return target
    log(f"bench: cc -> {os.path.relpath(target, BENCH)}")
    cmd = ["cc", "-O2", "-Wall", "-o", target, sources[0], *extra]
    r = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"bench: building {target} failed:\n{r.stderr}")
    return target


def build_helpers():
    """Builds fsops and passthrough_ll; returns their paths."""
    os.makedirs(BUILD, exist_ok=True)
    fsops = _cc(os.path.join(BUILD, "fsops"), [os.path.join(BENCH, "fsops.c")], [])
    src = _example("passthrough_ll.c")
    header = _example("passthrough_helpers.h")
    # The example includes "passthrough_helpers.h" from its own folder.
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "fuse3"], check=True, capture_output=True, text=True
    ).stdout.split()
    ptll = _cc(os.path.join(BUILD, "passthrough_ll"), [src, header], ["-I" + os.path.dirname(header), *flags])
    return fsops, ptll
