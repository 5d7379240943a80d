"""Subjects of the extension conformance suite, each a real child process.

- ``folder``: docs/examples/extensions/folder.py over a fresh folder.
- ``swift-folder``: the same store served by the Swift SDK's example
  (docs/examples/extensions/swift-folder, product
  ``scopefs-folder-extension``), from SCOPEFS_SWIFT_FOLDER_EXTENSION or
  .build/debug (``swift build`` makes it; ``make test-extensions`` builds).
- ``s3``: extensions/s3/scopefs_s3.py against moto's S3 server, started
  here on a free port of 127.0.0.1 and spoken to over real HTTP (moto
  enforces If-Match / If-None-Match with 412).
- ``rclone-webdav``, ``rclone-sftp``: extensions/rclone/scopefs_rclone.py
  on ``rclone serve webdav`` / ``rclone serve sftp`` (Debian's rclone;
  sftp with a user and password) over a real folder of the session, each
  test in its own subfolder (the ``path`` option).
- any other extension: SCOPEFS_EXTENSION_COMMAND (a shell-quoted command)
  and SCOPEFS_EXTENSION_OPTIONS (JSON for ``initialize``'s options) add a
  subject "custom". The suite works inside a folder it creates under the
  root, so a store that holds other things is fine.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conformance import ExtensionProcess

ROOT = Path(__file__).resolve().parents[2]
FOLDER_EXTENSION = ROOT / "docs" / "examples" / "extensions" / "folder.py"
S3_EXTENSION = ROOT / "extensions" / "s3" / "scopefs_s3.py"
RCLONE_EXTENSION = ROOT / "extensions" / "rclone" / "scopefs_rclone.py"
SWIFT_FOLDER_EXTENSION = Path(
    os.environ.get("SCOPEFS_SWIFT_FOLDER_EXTENSION", ROOT / ".build" / "debug" / "scopefs-folder-extension")
)
BUCKET = "scopefs-conformance"


@dataclass
class Subject:
    """An extension command and the store its processes share in one test."""

    name: str
    argv: list
    options: dict
    env: dict
    tmp: Path
    processes: list = field(default_factory=list)

    def launch(self) -> ExtensionProcess:
        """A new process, not yet initialized."""
        index = len(self.processes)
        staging = self.tmp / f"staging-{index}"
        staging.mkdir()
        process = ExtensionProcess(self.argv, staging, self.tmp / f"extension-{index}.log", self.env)
        self.processes.append(process)
        return process

    def spawn(self, version: str = "1.0") -> ExtensionProcess:
        """A new process, initialized with the subject's options (at
        `version`: 1.1 for what 1.1 added, `streamsFetch`)."""
        process = self.launch()
        process.capabilities = process.initialize(options=self.options, version=version)["capabilities"]
        return process


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory):
    """moto's S3 server on 127.0.0.1, its URL; stopped at the session's end."""
    # No skip when moto is missing: `make deps` installs it (extensions/requirements.txt).
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("moto's server did not start")
            time.sleep(0.1)
    yield url
    server.terminate()
    server.wait(10)
    log.close()


@pytest.fixture(scope="session")
def s3_environment(moto_server, tmp_path_factory):
    """AWS variables for the extension (fake keys; no ~/.aws read) and the bucket."""
    nowhere = tmp_path_factory.mktemp("aws")
    env = {
        "AWS_ACCESS_KEY_ID": "conformance",
        "AWS_SECRET_ACCESS_KEY": "conformance",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(nowhere / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(nowhere / "credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    import boto3

    boto3.client(
        "s3",
        endpoint_url=moto_server,
        aws_access_key_id="conformance",
        aws_secret_access_key="conformance",
        region_name="us-east-1",
    ).create_bucket(Bucket=BUCKET)
    return env


def wait_for_port(port: int, server: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError(f"{what} did not start")
            time.sleep(0.05)


# rclone serve keeps folder listings for 5 minutes by default (its VFS):
# the tests change the served folder behind its back and want that seen.
SERVE_UNCACHED = ["--dir-cache-time", "0s"]


@dataclass
class RcloneServer:
    """``rclone serve KIND`` over ``folder``: what the extension's remote holds."""

    folder: Path
    remote: str
    env: dict


def rclone_environment(tmp: Path) -> dict:
    """No user configuration is read: the remotes are connection strings."""
    return {"RCLONE_CONFIG": str(tmp / "rclone.conf"), "XDG_CACHE_HOME": str(tmp / "cache")}


@pytest.fixture(scope="session")
def webdav_server(tmp_path_factory):
    # No skip when rclone is missing: `make deps` installs it (APT_PACKAGES).
    tmp = tmp_path_factory.mktemp("webdav")
    folder = tmp / "served"
    folder.mkdir()
    env = rclone_environment(tmp)
    port = free_port()
    log = open(tmp / "serve.log", "wb")
    server = subprocess.Popen(
        ["rclone", "serve", "webdav", str(folder), "--addr", f"127.0.0.1:{port}", *SERVE_UNCACHED],
        stdout=log,
        stderr=log,
        env={**os.environ, **env},
    )
    wait_for_port(port, server, "rclone serve webdav")
    yield RcloneServer(folder, f":webdav,url='http://127.0.0.1:{port}':", env)
    server.terminate()
    server.wait(10)
    log.close()


@pytest.fixture(scope="session")
def sftp_server(tmp_path_factory):
    """``rclone serve sftp`` with a user and password (rclone makes its host key)."""
    tmp = tmp_path_factory.mktemp("sftp")
    folder = tmp / "served"
    folder.mkdir()
    env = rclone_environment(tmp)
    password = uuid.uuid4().hex
    port = free_port()
    log = open(tmp / "serve.log", "wb")
    server = subprocess.Popen(
        [
            "rclone",
            "serve",
            "sftp",
            str(folder),
            "--addr",
            f"127.0.0.1:{port}",
            "--user",
            "scopefs",
            "--pass",
            password,
            *SERVE_UNCACHED,
        ],
        stdout=log,
        stderr=log,
        env={**os.environ, **env},
    )
    wait_for_port(port, server, "rclone serve sftp")
    obscured = subprocess.run(
        ["rclone", "obscure", password], capture_output=True, text=True, check=True, env={**os.environ, **env}
    ).stdout.strip()
    yield RcloneServer(folder, f":sftp,host=127.0.0.1,port={port},user=scopefs,pass={obscured}:", env)
    server.terminate()
    server.wait(10)
    log.close()


def subject_names() -> list:
    names = ["folder", "swift-folder", "s3", "rclone-webdav", "rclone-sftp"]
    if os.environ.get("SCOPEFS_EXTENSION_COMMAND"):
        names.append("custom")
    return names


@pytest.fixture(params=subject_names())
def subject(request, tmp_path):
    if request.param == "folder":
        store = tmp_path / "store"
        store.mkdir()
        made = Subject("folder", [sys.executable, str(FOLDER_EXTENSION), str(store)], {}, {}, tmp_path)
        made.store = store
    elif request.param == "swift-folder":
        if not SWIFT_FOLDER_EXTENSION.is_file():
            pytest.fail(f"{SWIFT_FOLDER_EXTENSION} is missing: run `swift build` (make test-extensions does)")
        store = tmp_path / "store"
        store.mkdir()
        made = Subject("swift-folder", [str(SWIFT_FOLDER_EXTENSION), str(store)], {}, {}, tmp_path)
        made.store = store
    elif request.param == "s3":
        env = request.getfixturevalue("s3_environment")
        url = request.getfixturevalue("moto_server")
        options = {"bucket": BUCKET, "prefix": f"t-{uuid.uuid4().hex[:12]}/", "endpointUrl": url}
        made = Subject("s3", [sys.executable, str(S3_EXTENSION)], options, env, tmp_path)
    elif request.param in ("rclone-webdav", "rclone-sftp"):
        server = request.getfixturevalue(request.param.replace("rclone-", "") + "_server")
        base = f"t-{uuid.uuid4().hex[:12]}"
        (server.folder / base).mkdir()
        options = {"remote": server.remote, "path": base}
        made = Subject(request.param, [sys.executable, str(RCLONE_EXTENSION)], options, server.env, tmp_path)
        made.store = server.folder / base
    else:
        argv = shlex.split(os.environ["SCOPEFS_EXTENSION_COMMAND"])
        options = json.loads(os.environ.get("SCOPEFS_EXTENSION_OPTIONS", "{}"))
        made = Subject("custom", argv, options, {}, tmp_path)
    yield made
    # Every process: no protocol violation, and a clean shutdown (exit 0 within 5 s).
    problems = []
    for index, process in enumerate(made.processes):
        status = process.shutdown()
        if process.violations:
            problems.append(f"process {index} broke the protocol: {process.violations}")
        if status != 0 and not getattr(process, "expect_failure", False):
            problems.append(f"process {index} exited {status} after shutdown/exit; log: {process.log_tail()}")
    assert not problems, "\n".join(problems)
