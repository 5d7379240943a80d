"""The remote set (issue 32): cloud-storage clients side by side against
one S3 server.

    python3 bench/run.py --set remote [--quick] [--reps N] [--systems ...]
    make bench BENCH_ARGS="--set remote"        (or: make bench-remote)

One moto S3 server (PyPI moto[server], pinned in
extensions/requirements.txt) on 127.0.0.1 holds the bucket; every system
reads and writes the same objects under its "work/" prefix:

| system | what it is |
|---|---|
| `rclone-copy` | `rclone copyto`, `cat --count`, `lsf`, `copy`: the command line, the whole-object baseline |
| `rclone-mount` | `rclone mount :s3:BUCKET --vfs-cache-mode full` (Debian's rclone) |
| `s3fs` | Debian's s3fs-fuse: `url=`, `use_path_request_style`, a passwd file |
| `scopefs` | ScopeFS with the s3 extension (`scopefs provider add bench-s3 --extension s3 --option bucket=B --option endpointUrl=URL`), the workloads run as an app in scope, as in the local set; skipped, with the reason printed, while `scopefs provider add` has no `--extension` |

Each repetition mounts every system afresh (a new cache folder, a new
ScopeFS state), so every row meets cold caches; systems take turns one
at a time, in an order that rotates. Rows, per system:

- first read of the big object (512 MiB): `fsops read` through the mount;
  `rclone copyto` to a local file for rclone-copy;
- its first 4 KiB, of a second big object never read: `head -c 4096`;
  `rclone cat --count 4096`;
- listing a folder of 10,000 objects: one readdir pass (`fsops list`);
  `rclone lsf`. ScopeFS lists placeholders it synced before: an extension
  provider's folder exists for a grant once `scopefs provider sync` has
  the bucket's listing, so that sync is a row of its own (the first);
- `git status` in a repository uploaded as objects (the project's tracked
  files, committed and packed, every file of the work tree and of .git an
  object): the first run reads every file (it downloads them; its result
  is a row too), the second runs over the materialized tree;
- upload of 1,000 files of 4 KiB: `cp -r` of a local folder into the
  mount, timed until cp returns and until all 1,000 objects are listed
  in the bucket (mounts that upload later differ there); `rclone copy`.

Sizes scale with SCOPEFS_BENCH_REMOTE_SCALE (default 1; `--quick` 1/16):
the big object, the folder and the upload shrink by that factor.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass

import deps
import report
import systems as sysmod
import workloads as wl
from deps import log
from dev_workloads import GIT

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUCKET = "scopefs-bench"
PREFIX = sysmod.WORKDIR + "/"  # every system sees the bucket's "work/" folder
ACCESS_KEY = SECRET_KEY = "scopefs-bench"
REGION = "us-east-1"
SCALE_VARIABLE = "SCOPEFS_BENCH_REMOTE_SCALE"
QUICK_SCALE = 1 / 16
DOCS_BEGIN = "<!-- remote set: begin (bench/remote.py writes this part) -->"
DOCS_END = "<!-- remote set: end -->"
# git over a mount: no ownership refusal, no mode noise (S3 keeps no modes).
GIT_STATUS = [*GIT, "-c", "core.fileMode=false", "status", "--porcelain"]


@dataclass
class Sizes:
    big_mib: int
    list_objects: int
    upload_files: int
    reps: int
    scale: float
    upload_bytes: int = 4096


def sizes_for(quick: bool, reps: int | None) -> Sizes:
    scale = float(os.environ.get(SCALE_VARIABLE) or (QUICK_SCALE if quick else 1))
    return Sizes(
        big_mib=max(1, round(512 * scale)),
        list_objects=max(10, round(10_000 * scale)),
        upload_files=max(10, round(1_000 * scale)),
        reps=reps or (1 if quick else 3),
        scale=scale,
    )


KEYS = [
    ("sync", "ScopeFS: first sync of the bucket's listing (before its grant)"),
    ("read-first", "first read of a {big_mib} MiB object"),
    ("head-4k", "first 4 KiB of a {big_mib} MiB object"),
    ("list", "list a {list_objects:,}-object folder"),
    ("git-first", "git status, first run ({repo_files:,} files, downloads them)"),
    ("git-materialized", "git status over the materialized tree"),
    ("upload-app", "upload {upload_files:,} files of 4 KiB: until cp returns"),
    ("upload-remote", "upload {upload_files:,} files of 4 KiB: until all are in the bucket"),
]


# -- the store ---------------------------------------------------------------


class Store:
    """moto's S3 server on 127.0.0.1, our child; its objects in TMP."""

    def __init__(self, tmp: str):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        spill = os.path.join(tmp, "moto")  # large objects spill to files
        os.makedirs(spill)
        self.log = open(os.path.join(tmp, "moto.log"), "wb")
        self.server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.log,
            stderr=self.log,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "TMPDIR": spill},
            **sysmod.DAEMON_SESSION,
        )
        if not sysmod.wait_until(self._answers, 30, step=0.1):
            raise sysmod.SetupError("moto's S3 server did not start")
        import boto3
        from botocore.config import Config

        self.client = boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            config=Config(max_pool_connections=32),
        )
        self.client.create_bucket(Bucket=BUCKET)

    def _answers(self):
        try:
            urllib.request.urlopen(self.url + "/moto-api/", timeout=1).close()
            return True
        except OSError:
            return False

    def environment(self, tmp: str) -> dict:
        """AWS variables (the S3 extension, boto3) and rclone's S3 backend
        options as variables, so `:s3:BUCKET/...` reaches this store."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_CONFIG_FILE": os.path.join(tmp, "aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": os.path.join(tmp, "aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",
            "RCLONE_CONFIG": os.path.join(tmp, "rclone.conf"),
            "RCLONE_S3_PROVIDER": "Other",
            "RCLONE_S3_ENDPOINT": self.url,
            "RCLONE_S3_ACCESS_KEY_ID": ACCESS_KEY,
            "RCLONE_S3_SECRET_ACCESS_KEY": SECRET_KEY,
            "RCLONE_S3_REGION": REGION,
        }

    def put_many(self, items) -> None:
        """(key, bytes) pairs, 16 at a time."""
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            for done in pool.map(lambda item: self.client.put_object(Bucket=BUCKET, Key=item[0], Body=item[1]), items):
                del done

    def put_file(self, key: str, path: str) -> None:
        self.client.upload_file(path, BUCKET, key)

    def count(self, prefix: str) -> int:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return sum(page.get("KeyCount", 0) for page in pages)

    def delete_prefix(self, prefix: str) -> None:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        for page in pages:
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                self.client.delete_objects(Bucket=BUCKET, Delete={"Objects": keys, "Quiet": True})

    def stop(self) -> None:
        sysmod.stop_process(self.server, timeout=0)
        self.log.close()


def populate(store: Store, ctx, sizes: Sizes) -> int:
    """The objects every system works on; the repository's file count."""
    big = os.path.join(ctx.tmp, "big.bin")
    with open(big, "wb") as out:
        block = os.urandom(1 << 20)
        for i in range(sizes.big_mib):
            out.write(i.to_bytes(8, "little") + block[8:])
    log(f"bench: uploading two {sizes.big_mib} MiB objects")
    for name in ("big-read", "big-head"):
        store.put_file(PREFIX + name, big)
    os.unlink(big)
    log(f"bench: uploading a folder of {sizes.list_objects:,} objects")
    store.put_many((f"{PREFIX}list/f{i:05d}", b"x" * 16) for i in range(sizes.list_objects))
    repo = make_repo(os.path.join(ctx.tmp, "repo"))
    items, files = [], 0
    for folder, _, names in os.walk(repo):
        rel = os.path.relpath(folder, repo)
        base = PREFIX + "repo/" + ("" if rel == "." else rel + "/")
        items.append((base, b""))  # a folder marker: every client sees empty folders
        for name in names:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                with open(path, "rb") as f:
                    items.append((base + name, f.read()))
        files += len(names)
    log(f"bench: uploading a git repository of {files:,} files")
    store.put_many(items)
    source = os.path.join(ctx.tmp, "upload-source")
    os.makedirs(source)
    for i in range(sizes.upload_files):
        with open(os.path.join(source, f"u{i:05d}"), "wb") as f:
            f.write(os.urandom(sizes.upload_bytes))
    ctx.upload_source = source
    return int(subprocess.run(GIT + ["-C", repo, "ls-files"], capture_output=True, text=True).stdout.count("\n"))


def make_repo(path: str) -> str:
    """The project's tracked files (no symlinks), committed and packed."""
    os.makedirs(path)
    archive = subprocess.run(["git", "-C", REPO, "archive", "HEAD"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", path], input=archive, check=True)
    for folder, _, names in os.walk(path):
        for name in names:
            if os.path.islink(os.path.join(folder, name)):
                os.unlink(os.path.join(folder, name))
    quiet = {"stdout": subprocess.DEVNULL, "check": True}
    subprocess.run(GIT + ["init", "-q", path], **quiet)
    subprocess.run(GIT + ["-C", path, "add", "-A"], **quiet)
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run(GIT + ["-C", path, *identity, "commit", "-q", "-m", "bench tree"], **quiet)
    subprocess.run(GIT + ["-C", path, "gc", "-q"], **quiet)
    return path


# -- the systems -------------------------------------------------------------


class RcloneCopy(sysmod.System):
    """rclone's command line: each row is the command a person would run."""

    name, label = "rclone-copy", "rclone copy (command line)"
    is_mount = False

    def setup(self):
        self.remote = f":s3:{BUCKET}/{PREFIX}"
        self.dest = os.path.join(self.ctx.tmp, "rclone-copy-dest")
        os.makedirs(self.dest, exist_ok=True)

    def teardown(self):
        shutil.rmtree(getattr(self, "dest", "/nonexistent"), ignore_errors=True)

    def info(self):
        return {"version": _version(["rclone", "version"]), "commands": "copyto, cat --count, lsf, copy (defaults)"}


class RcloneMount(sysmod.System):
    name, label = "rclone-mount", "rclone mount --vfs-cache-mode full"
    is_mount = True

    def setup(self):
        self.mnt = os.path.join(self.ctx.tmp, "mnt-rclone")
        os.makedirs(self.mnt, exist_ok=True)
        cache = os.path.join(self.ctx.tmp, "rclone-cache")
        shutil.rmtree(cache, ignore_errors=True)
        self.logfile = os.path.join(self.ctx.tmp, "rclone-mount.log")
        with open(self.logfile, "a") as out:
            self.proc = subprocess.Popen(
                ["rclone", "mount", f":s3:{BUCKET}", self.mnt, "--vfs-cache-mode", "full", "--cache-dir", cache],
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                **sysmod.DAEMON_SESSION,
            )
        _wait_mounted(self, "rclone mount")
        self.root = os.path.join(self.mnt, sysmod.WORKDIR)

    def teardown(self):
        if hasattr(self, "mnt"):
            sysmod.fusermount_u(self.mnt)
        sysmod.stop_process(getattr(self, "proc", None))

    def pids(self):
        return [self.proc.pid]

    def info(self):
        return {"version": _version(["rclone", "version"]), "options": "--vfs-cache-mode full (other options default)"}


class S3fs(sysmod.System):
    name, label = "s3fs", "s3fs-fuse"
    is_mount = True

    def setup(self):
        if not shutil.which("s3fs"):
            raise sysmod.SetupError("s3fs is not installed (Debian package s3fs, in make deps)")
        self.mnt = os.path.join(self.ctx.tmp, "mnt-s3fs")
        os.makedirs(self.mnt, exist_ok=True)
        secrets = os.path.join(self.ctx.tmp, "s3fs-passwd")
        with open(os.open(secrets, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(f"{ACCESS_KEY}:{SECRET_KEY}\n")
        options = f"url={self.ctx.store.url},use_path_request_style,passwd_file={secrets},umask=0022"
        self.logfile = os.path.join(self.ctx.tmp, "s3fs.log")
        with open(self.logfile, "a") as out:
            self.proc = subprocess.Popen(
                ["s3fs", BUCKET, self.mnt, "-f", "-o", options],
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                **sysmod.DAEMON_SESSION,
            )
        _wait_mounted(self, "s3fs")
        self.root = os.path.join(self.mnt, sysmod.WORKDIR)

    teardown, pids = RcloneMount.teardown, RcloneMount.pids

    def info(self):
        return {
            "version": _version(["s3fs", "--version"]),
            "options": "url=, use_path_request_style, passwd_file=, umask=0022 (no local cache: s3fs's default)",
        }


class ScopeFSS3(sysmod.ScopeFS):
    """ScopeFS with the s3 extension; the app and its scope as in the local set."""

    name, label = "scopefs", "ScopeFS (s3 extension, strict, app view)"
    PROVIDER = "bench-s3"
    is_mount = True

    def setup(self):
        r = subprocess.run(
            [self.ctx.scopefs, "provider", "add", "--help"], capture_output=True, text=True, stdin=subprocess.DEVNULL
        )
        if "--extension" not in r.stdout:
            raise sysmod.Skip(
                "`scopefs provider add` has no --extension yet (issue 32's daemon side): no ScopeFS column"
            )
        # A fresh state (and so an empty cache) in every repetition.
        self.state = os.path.join(self.ctx.tmp, self.name + "-state")
        self.mnt = os.path.join(self.ctx.tmp, "mnt-" + self.name)
        for leftover in (self.state, self.mnt):
            if os.path.isdir(leftover) and not sysmod.is_mounted(leftover):
                shutil.rmtree(leftover)
        os.makedirs(self.mnt)
        self.env = dict(os.environ, SCOPEFS_STATE=self.state)
        options = {"bucket": BUCKET, "endpointUrl": self.ctx.store.url}
        extension = ["--extension", "s3"] + [a for k, v in options.items() for a in ("--option", f"{k}={v}")]
        self.run_cli("init")
        self.run_cli("provider", "add", self.PROVIDER, *extension)
        self.run_cli("app", "add", self.APP)
        self.run_cli("mount", *self.ctx.mount_args, self.mnt, timeout=120)
        if not sysmod.is_mounted(self.mnt):
            raise sysmod.SetupError("scopefs mount returned but nothing is mounted at " + self.mnt)
        self.mounted = True
        # The granted folder exists once the replica has the bucket's
        # listing: a grant needs it.
        began = time.monotonic()
        self.run_cli("provider", "sync", self.PROVIDER, timeout=300)
        self.sync_seconds = time.monotonic() - began  # a row of its own: the listing rows exclude it
        out = self.run_cli("grant", self.APP, f"{self.PROVIDER}:{sysmod.WORKDIR}").strip()
        self.grant = out.split()[-1] if out else ""
        self.root = os.path.join(self.mnt, self.APP, "Providers", self.PROVIDER, sysmod.WORKDIR)
        r = subprocess.run(self.cli("scope", "--help"), capture_output=True, text=True, env=self.env)
        self.has_scope = r.returncode == 0 and "scopefs scope" in r.stdout
        self.options = self.run_options()

    def info(self):
        return {
            **super().info(),
            "provider": f"provider add {self.PROVIDER} --extension s3 --option bucket=B --option endpointUrl=URL",
        }


ALL = [RcloneCopy, RcloneMount, S3fs, ScopeFSS3]


def _wait_mounted(system, what):
    if not sysmod.wait_until(lambda: sysmod.is_mounted(system.mnt) or system.proc.poll() is not None, 20):
        raise sysmod.SetupError(f"{what} did not mount within 20 s")
    if not sysmod.is_mounted(system.mnt):
        raise sysmod.SetupError(f"{what} exited: " + sysmod._tail(system.logfile))


def _version(argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    return r.stdout.splitlines()[0].strip() if r.returncode == 0 and r.stdout else "?"


# -- the rows ----------------------------------------------------------------


def rows(ctx, system, tag):
    """(key, seconds) of each row for SYSTEM; a row it has no form of is left out."""
    sizes = ctx.sizes
    phase = ctx.phase
    if hasattr(system, "sync_seconds"):
        yield "sync", system.sync_seconds
    if system.is_mount:
        root = system.root
        yield "read-first", phase(system, ["read", os.path.join(root, "big-read"), "cold"], fresh_cache=False)
        yield "head-4k", phase(system, ["run", "head", "-c", "4096", os.path.join(root, "big-head")], fresh_cache=False)
        yield "list", phase(system, ["list", os.path.join(root, "list"), sizes.list_objects], fresh_cache=False)
        status = ["run", *GIT_STATUS[:1], "-C", os.path.join(root, "repo"), *GIT_STATUS[1:]]
        yield "git-first", phase(system, status, fresh_cache=False)
        yield "git-materialized", phase(system, status, fresh_cache=False)
        upload = ["run", "cp", "-r", ctx.upload_source, os.path.join(root, tag)]
    else:
        remote, dest = system.remote, system.dest
        yield (
            "read-first",
            phase(system, ["run", "rclone", "copyto", remote + "big-read", dest + "/big-read"], fresh_cache=False),
        )
        os.unlink(dest + "/big-read")
        yield (
            "head-4k",
            phase(system, ["run", "rclone", "cat", "--count", "4096", remote + "big-head"], fresh_cache=False),
        )
        yield "list", phase(system, ["run", "rclone", "lsf", remote + "list/"], fresh_cache=False)
        upload = ["run", "rclone", "copy", ctx.upload_source, remote + tag]
    seconds = phase(system, upload, fresh_cache=False)
    yield "upload-app", seconds
    yield "upload-remote", seconds + until_uploaded(ctx, system, PREFIX + tag + "/", sizes.upload_files)
    ctx.store.delete_prefix(PREFIX + tag + "/")


def until_uploaded(ctx, system, prefix, count, timeout=600):
    """Seconds from the end of the upload's phase until COUNT objects are in
    the bucket under PREFIX (mounts that upload after close take longer)."""
    ended = ctx.last_end[system.name]
    deadline = time.monotonic() + timeout
    while ctx.store.count(prefix) < count:
        if time.monotonic() > deadline:
            raise wl.PhaseError(f"{count} uploads not in the bucket after {timeout} s")
        time.sleep(0.05)
    return time.monotonic() - ended


# -- running and reporting ---------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/run.py --set remote", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help=f"scale 1/16 (unless ${SCALE_VARIABLE} says), 1 repetition")
    p.add_argument("--reps", type=int, help="repetitions (default 3, or 1 with --quick)")
    p.add_argument(
        "--systems", default=",".join(c.name for c in ALL), help="subset of " + ", ".join(c.name for c in ALL)
    )
    p.add_argument("--out", default=os.path.join(REPO, "bench-results"), help="folder for remote-results.json")
    docs = p.add_mutually_exclusive_group()
    docs.add_argument(
        "--docs",
        dest="docs",
        action="store_true",
        default=None,
        help="update docs/PERFORMANCE.md's remote section (default for full runs)",
    )
    docs.add_argument("--no-docs", dest="docs", action="store_false")
    a = p.parse_args(argv)
    a.systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    unknown = set(a.systems) - {c.name for c in ALL}
    if unknown:
        p.error("--systems: unknown " + ", ".join(sorted(unknown)))
    if a.docs is None:
        a.docs = not a.quick and SCALE_VARIABLE not in os.environ
    return a


def start(ctx, cls, results):
    """A system mounted afresh, or None (skipped or failed, recorded)."""
    system = cls(ctx)
    entry = results["systems"].setdefault(system.name, {"label": system.label})
    try:
        system.setup()
        entry.update(status="ok", **system.info())
        return system
    except sysmod.Skip as e:
        entry.update(status="skipped", reason=str(e))
    except (sysmod.SetupError, OSError, subprocess.SubprocessError) as e:
        entry.update(status="failed", reason=str(e))
        log(f"bench: FAILED to start {system.label}: {e}")
    system.teardown()
    return None


def run_reps(ctx, classes, results):
    for rep in range(ctx.sizes.reps):
        shift = rep % len(classes)
        order = classes[shift:] + classes[:shift]
        for cls in order:
            if results["systems"].get(cls.name, {}).get("status") == "skipped":
                continue
            system = start(ctx, cls, results)
            if system is None:
                continue
            log(f"bench: rep {rep + 1}/{ctx.sizes.reps} {system.name}")
            ctx.daemon_pids = system.pids()
            try:
                for key, seconds in rows(ctx, system, f"upload-{system.name}-r{rep}"):
                    results["workloads"].setdefault(key, {}).setdefault(system.name, {"samples": []})["samples"].append(
                        seconds
                    )
            except (wl.PhaseError, OSError, subprocess.SubprocessError) as e:
                log(f"bench:   {system.name}: {e}")
                results["errors"].append(f"{system.name} rep {rep + 1}: {e}")
            finally:
                system.teardown()


RATE = {"read-first": "mib", "list": "list_objects", "upload-app": "upload_files", "upload-remote": "upload_files"}


def table(results, names, labels, sizes):
    """Rows as the local set's report: median, min–max, ratios, a rate."""
    out = []
    for key, _ in KEYS:
        per = results["workloads"].get(key, {})
        base = (per.get("rclone-copy") or {}).get("summary")
        mounts = [(per.get(n) or {}).get("summary") for n in ("rclone-mount", "s3fs")]
        best = min((m["median"] for m in mounts if m), default=None)
        for name in names:
            s = (per.get(name) or {}).get("summary")
            if not s:
                continue
            unit = RATE.get(key)
            amount = sizes.big_mib if unit == "mib" else getattr(sizes, unit, 0) if unit else 0
            rate = "" if not unit else f"{amount / s['median']:,.0f} {'MiB/s' if unit == 'mib' else '/s'}"
            out.append(
                [
                    labels[key],
                    name,
                    report.fmt_time(s["median"]),
                    f"{report.fmt_time(s['min'])}–{report.fmt_time(s['max'])}",
                    report.fmt_ratio(s["median"] / base["median"] if base else None),
                    report.fmt_ratio(s["median"] / best if best else None),
                    rate,
                ]
            )
    return out


HEADER = ["workload", "system", "median", "min–max", "× rclone copy", "× faster of rclone mount, s3fs", "rate"]


def text_table(rows_):
    widths = [max(len(r[i]) for r in [HEADER] + rows_) for i in range(len(HEADER))]
    lines, last = [], None
    for r in [HEADER] + rows_:
        cells = [r[0] if r[0] != last else ""] + r[1:]
        last = r[0]
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip())
        if r is HEADER:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(results, rows_):
    m, c = results["machine"], results["config"]
    lines = [
        f"Measured {m['date']} on {m['nproc']} CPUs, kernel {m['kernel']}, git {m['git']}: "
        f"{c['reps']} repetitions (median, min–max), scale {c['sizes']['scale']:g}, whole run "
        f"{results['total_seconds']:.0f} s. One moto {c['moto']} server on 127.0.0.1.",
        "",
    ]
    for v in results["systems"].values():
        if v.get("status") == "ok":
            lines.append(
                f"- {v['label']}: " + "; ".join(f"{k}: {x}" for k, x in v.items() if k not in ("label", "status"))
            )
        else:
            lines.append(f"- {v['label']}: {v.get('status')} — {v.get('reason')}")
    lines += ["", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    last = None
    for r in rows_:
        lines.append("| " + " | ".join([r[0] if r[0] != last else ""] + r[1:]) + " |")
        last = r[0]
    return "\n".join(lines)


def write_docs(text):
    """Replaces the remote set's part of docs/PERFORMANCE.md (between its markers)."""
    path = os.path.join(REPO, "docs", "PERFORMANCE.md")
    with open(path) as f:
        old = f.read()
    if DOCS_BEGIN not in old or DOCS_END not in old:
        log("bench: docs/PERFORMANCE.md has no remote-set markers; not updated")
        return False
    head, rest = old.split(DOCS_BEGIN, 1)
    tail = rest.split(DOCS_END, 1)[1]
    with open(path, "w") as f:
        f.write(head + DOCS_BEGIN + "\n" + text + "\n" + DOCS_END + tail)
    return True


def main(argv) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    sizes = sizes_for(args.quick, args.reps)
    classes = [c for c in ALL if c.name in args.systems]
    deps.ensure_packages(portal=False)
    missing = [p for p, thing in (("rclone", "rclone"), ("s3fs", "s3fs")) if not shutil.which(thing)]
    if missing:
        deps.apt_install(missing)
    fsops, _ = deps.build_helpers()
    scopefs = os.path.abspath(os.environ.get("SCOPEFS_BIN") or os.path.join(REPO, ".build", "release", "scopefs"))
    if "scopefs" in args.systems and not os.access(scopefs, os.X_OK):
        log(f"bench: no ScopeFS binary at {scopefs}; the ScopeFS column is left out")
        classes = [c for c in classes if c.name != "scopefs"]
    tmp = tempfile.mkdtemp(prefix="scopefs-bench-remote-", dir="/dev/shm")
    os.chmod(tmp, 0o755)  # ScopeFS's apps run as its app account and read the upload's source
    ctx = wl.Context(tmp, os.path.join(tmp, "backing"), fsops, None, scopefs, sizes)
    results = {"machine": {}, "config": {}, "systems": {}, "workloads": {}, "errors": []}
    store = None
    try:
        store = ctx.store = Store(tmp)
        os.environ.update(store.environment(tmp))  # rclone, s3fs's children and ScopeFS's daemon inherit it
        # rclone 1.60's S3 client cannot load a CA bundle into its transport
        # (LoadCustomCABundleError) and refuses to start; the store is plain HTTP.
        os.environ.pop("AWS_CA_BUNDLE", None)
        repo_files = populate(store, ctx, sizes)
        results["machine"] = {
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "nproc": os.cpu_count(),
            "kernel": os.uname().release,
            "git": _version(["git", "-C", REPO, "rev-parse", "--short", "HEAD"]),
        }
        results["config"] = {
            "sizes": vars(sizes),
            "reps": sizes.reps,
            "repo_files": repo_files,
            "moto": _moto_version(),
        }
        run_reps(ctx, classes, results)
    finally:
        if store:
            store.stop()
        left = [m for m in sysmod.mountpoints() if m.startswith(tmp + "/")]
        if left:
            log("bench: NOT removing " + tmp + ": still mounted: " + ", ".join(left))
        else:
            subprocess.run(["rm", "-rf", "--one-file-system", tmp])
    for per in results["workloads"].values():
        for entry in per.values():
            entry["summary"] = report.summarise(entry["samples"])
    results["total_seconds"] = time.monotonic() - began
    names = [c.name for c in classes if results["systems"].get(c.name, {}).get("status") == "ok"]
    labels = {key: text.format(repo_files=results["config"].get("repo_files", 0), **vars(sizes)) for key, text in KEYS}
    rows_ = table(results, names, labels, sizes)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "remote-results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print()
    for v in results["systems"].values():
        if v.get("status") != "ok":
            print(f"{v['label']}: {v.get('status')} — {v.get('reason')}")
    print(text_table(rows_))
    if args.docs and write_docs(markdown(results, rows_)):
        print("docs/PERFORMANCE.md's remote section updated")
    print(f"whole run: {results['total_seconds']:.0f} s")
    failed = [n for n, v in results["systems"].items() if v.get("status") == "failed"] + results["errors"]
    if failed:
        print("FAILURES: " + "; ".join(failed))
    return 1 if failed else 0


def _moto_version():
    try:
        import importlib.metadata

        return importlib.metadata.version("moto")
    except Exception:
        return "?"
