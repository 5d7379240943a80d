"""An extension's provider for the tests of provider extensions (SPEC
S41-S43, S49): the controlled folder example over a "remote" folder of the
test's (`Cloud`, the `cloud` fixture), the app session that reads and
writes through it, and its small helpers. A helper module, not a test
module: test_extension_providers.py and the other extension tests import
it, so none of them imports another test module.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from doc_scope_helpers import mount, status
from scopefs_harness import ALPHA

HERE = Path(__file__).resolve().parent
CONTROLLED = HERE / "extensions" / "controlled_folder.py"
CLOUD = "cloud"
BIG = 20 << 20  # a file read by range: 20 MiB
REPORT = b"quarterly report\n" * 100


class Cloud:
    """The remote folder, the extension's switches and the provider."""

    def __init__(self, env):
        self.env = env
        self.remote = env.root / "remote"
        self.control = env.root / "control"
        (self.remote / "docs").mkdir(parents=True)
        self.control.mkdir()
        (self.remote / "docs" / "report.txt").write_bytes(REPORT)
        (self.remote / "docs" / "big.bin").write_bytes(os.urandom(BIG))
        (self.remote / "elsewhere.txt").write_bytes(b"not granted\n")
        for path in (self.remote, self.remote / "docs", self.control):
            os.chmod(path, 0o777)
        # Short periods so that tests wait seconds, not minutes.
        env.base_env.update(
            SCOPEFS_EXTENSION_POLL_SECONDS="1",
            SCOPEFS_EXTENSION_RETRY_SECONDS="0.5",
            SCOPEFS_EXTENSION_STALL_SECONDS="3",
        )
        env.cli(
            "provider",
            "add",
            CLOUD,
            "--extension",
            f"/usr/bin/python3 {CONTROLLED} {self.remote} {self.control}",
            "--writable",
            self.remote,
            "--writable",
            self.control,
        )

    def path(self, app: str, rel: str = "") -> str:
        return self.env.prov(app, CLOUD, rel)

    def switch(self, name: str, value: str | None) -> None:
        target = self.control / name
        if value is None:
            target.unlink(missing_ok=True)
        else:
            target.write_text(value)

    def calls(self) -> list[str]:
        try:
            return (self.control / "calls").read_text().splitlines()
        except FileNotFoundError:
            return []

    def sync(self) -> None:
        self.env.cli("provider", "sync", CLOUD)

    def extension_status(self) -> dict:
        for entry in status(self.env).get("daemon", {}).get("extensions") or []:
            if entry["provider"] == CLOUD:
                return entry
        raise AssertionError(f"status names no extension provider {CLOUD}: {status(self.env)}")


@pytest.fixture
def cloud(env):
    world = Cloud(env)
    mount(env)
    world.sync()
    # The extension's process, its replica's database and the writer child
    # are the daemon's from here on: the descriptor check starts now.
    env._record_daemon()
    return world


# An app process (default sandbox) that starts a scope on argv[1] and then
# runs the commands the test sends, one JSON object per line.
APP = r"""
import json, signal

class Interrupted(Exception):
    pass

def interrupted(signum, frame):
    raise Interrupted()

signal.signal(signal.SIGUSR1, interrupted)
folder = sys.argv[1]
emit({"start": outcome(lambda: os.getxattr(folder, "user.scopefs.start").decode())})

def attr(path, name):
    return outcome(lambda: os.getxattr(path, name).decode())

def stat_of(path):
    info = os.stat(path)
    return {"size": info.st_size, "blocks": info.st_blocks, "mode": oct(info.st_mode & 0o7777)}

def read_range(path, offset, length):
    with open(path, "rb") as f:
        f.seek(offset)
        return hashlib.sha256(f.read(length)).hexdigest()

def read_interruptible(path):
    try:
        with open(path, "rb") as f:
            return {"ok": len(f.read(4096))}
    except Interrupted:
        return {"errno": "EINTR"}
    except OSError as exc:
        return {"errno": ename(exc)}

import hashlib
while True:
    line = sys.stdin.readline()
    if not line:
        break
    cmd = json.loads(line)
    op, path = cmd["op"], cmd.get("path")
    if op == "stat":
        emit(outcome(stat_of, path))
    elif op == "attr":
        emit(attr(path, cmd["name"]))
    elif op == "list":
        emit(outcome(lambda: sorted(os.listdir(path))))
    elif op == "read":
        emit(outcome(read_range, path, cmd.get("offset", 0), cmd.get("length", -1)))
    elif op == "write":
        def write():
            with open(path, "wb") as f:
                f.write(cmd["data"].encode())
            return "written"
        emit(outcome(write))
    elif op == "patch":
        # An editor's save in place: open for writing without truncating,
        # write at an offset, close (the rest of the file is kept).
        def patch():
            descriptor = os.open(path, os.O_WRONLY)
            try:
                return os.pwrite(descriptor, cmd["data"].encode(), cmd.get("offset", 0))
            finally:
                os.close(descriptor)
        emit(outcome(patch))
    elif op == "rename":
        emit(outcome(os.rename, path, cmd["to"]))
    elif op == "unlink":
        emit(outcome(os.unlink, path))
    elif op == "mkdir":
        emit(outcome(os.mkdir, path))
    elif op == "hold":
        def hold():
            global held
            held = os.open(path, os.O_RDONLY)
            return "held"
        emit(outcome(hold))
    elif op == "create-hold":
        # A new file kept open for writing after its first bytes are
        # fsynced, as an editor's or a database's.
        def create_hold():
            global written
            written = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(written, cmd["data"].encode())
            os.fsync(written)
            return "held"
        emit(outcome(create_hold))
    elif op == "held-pwrite":
        emit(outcome(lambda: os.pwrite(written, cmd["data"].encode(), cmd["offset"])))
    elif op == "held-close":
        emit(outcome(os.close, written))
    elif op == "held-read":
        emit(outcome(lambda: hashlib.sha256(os.pread(held, cmd["length"], cmd["offset"])).hexdigest()))
    elif op == "slow-read":
        emit({"reading": True})
        emit(read_interruptible(path))
"""


def session(env, cloud, app=ALPHA, rel="docs"):
    s = env.app_session(app, APP, cloud.path(app, rel), sandbox=True)
    started = s.recv()
    return s, started


def ask(s, **cmd):
    s.popen.stdin.write((json.dumps(cmd) + "\n").encode())
    s.popen.stdin.flush()
    return s.recv()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def in_scope(env, app: str, path: str, expression: str):
    """An app process (default sandbox) that starts a scope on `path` and
    reports `expression` (Python, of `path`) or its errno."""
    code = f"path = sys.argv[1]; os.getxattr(path, 'user.scopefs.start'); emit(outcome(lambda: {expression}))"
    return env.app_json(app, code, path, sandbox=True)


def start_slow_read(s, path: str) -> None:
    """Asks the APP session to read `path` and waits until it is reading."""
    s.popen.stdin.write((json.dumps({"op": "slow-read", "path": path}) + "\n").encode())
    s.popen.stdin.flush()
    assert s.recv() == {"reading": True}
