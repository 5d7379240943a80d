"""Remote stores for provider-extension tests, each in its own network
namespace behind a link with real faults (netns_link.py).

- ``S3Remote``: moto's S3 server (PyPI ``moto[server]``, pinned in
  extensions/requirements.txt) at ``http://10.213.a.b:5000`` with one
  bucket; ``env`` holds the AWS variables the S3 extension needs.
- ``RcloneRemote``: ``rclone serve webdav`` (port 8080) or ``rclone serve
  sftp`` (port 2022, user and password) over ``folder``, a real folder of
  the test; ``remote`` is the rclone connection string that reaches it.

Each one's ``link_down()``, ``link_up()`` and ``netem(delay_ms=...,
loss_percent=..., rate=...)`` act on its link only. Changes behind a
test's back: for S3, ``put``/``get``/``delete``/``keys`` (or ``s3(method,
**kwargs)``) go from a thread inside the namespace to the server's
loopback, so they work while the link is down or faulty; for rclone, write
in ``folder``. ``extension_arguments()`` gives the ``scopefs provider
add`` arguments that point an extension at the remote.

``close()`` stops the server (by its pid), removes the namespace and the
veth pair, and raises RemoteError if anything is left; the fixtures in
remote_fixtures.py call it even when the test failed.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from netns_link import Link, LinkError

START_TIMEOUT = 30
S3_PORT, WEBDAV_PORT, SFTP_PORT = 5000, 8080, 2022
# rclone serve keeps folder listings for 5 minutes by default (its VFS):
# tests change the served folder behind its back and want that seen.
SERVE_UNCACHED = ["--dir-cache-time", "0s"]


class RemoteError(RuntimeError):
    """A remote did not start, or its teardown left something behind."""


class Remote:
    """A server in a namespace of its own; subclasses say which."""

    kind = "?"
    port = 0

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log = self.workdir / f"{self.kind}.log"
        self.server: subprocess.Popen | None = None
        self.link = Link()
        self.address = self.link.remote_address
        try:
            self._start()
        except BaseException:
            self.close(check=False)
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the link ---------------------------------------------------------------

    def link_down(self, mode: str = "drop") -> None:
        """ "drop": packets vanish, requests time out; "unreachable": the
        host's route goes too, connections fail at once (EHOSTUNREACH)."""
        self.link.down(mode)

    def link_up(self) -> None:
        self.link.up()

    def netem(self, delay_ms: float = 0, loss_percent: float = 0, rate: str | int | None = None) -> None:
        """Each round trip ``delay_ms`` longer, ``loss_percent`` of the
        server's packets lost, the server sending at most ``rate`` (tc's
        syntax, "8mbit", or bits per second). Replaces earlier settings;
        no arguments: a clean link."""
        self.link.shape(delay_ms, loss_percent, rate)

    # -- the server -------------------------------------------------------------

    def _start(self) -> None:
        raise NotImplementedError

    def _launch(self, argv: list, env: dict | None = None) -> None:
        self.server = self.link.popen(argv, self.log, env)

    def _wait_until(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not ready():
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise RemoteError(f"{what} did not start in {self.link.namespace}: {self.log_tail()}")
            time.sleep(0.1)

    def _port_open(self) -> bool:
        try:
            socket.create_connection((self.address, self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def log_tail(self, size: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def close(self, check: bool = True) -> None:
        """Stops the server by pid, then removes the namespace and its link."""
        problems = []
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(10)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        problems += self.link.close()
        if check and problems:
            raise RemoteError("teardown left: " + "; ".join(problems))


class S3Remote(Remote):
    """moto's S3 server; ``url``, ``bucket``, ``env`` (AWS variables)."""

    kind, port = "s3", S3_PORT
    ACCESS_KEY = SECRET_KEY = "scopefs-remote"
    REGION = "us-east-1"

    def __init__(self, workdir: Path, bucket: str = "scopefs-remote"):
        self.bucket = bucket
        self._client = None
        super().__init__(workdir)

    def _start(self) -> None:
        self.url = f"http://{self.address}:{self.port}"
        self._launch([sys.executable, "-m", "moto.server", "-H", "0.0.0.0", "-p", self.port])
        self._wait_until(self._answers, "moto's S3 server")
        self.s3("create_bucket", Bucket=self.bucket)
        nowhere = self.workdir / "aws"
        nowhere.mkdir(exist_ok=True)
        # Fake keys, and no ~/.aws read: the store is this server only.
        self.env = {
            "AWS_ACCESS_KEY_ID": self.ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": self.SECRET_KEY,
            "AWS_DEFAULT_REGION": self.REGION,
            "AWS_CONFIG_FILE": str(nowhere / "config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(nowhere / "credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        self.options = {"bucket": self.bucket, "endpointUrl": self.url}

    def close(self, check: bool = True) -> None:
        # The admin client's pooled sockets would keep the namespace alive.
        if self._client is not None:
            self._client.close()
        super().close(check)

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(self.url + "/moto-api/", timeout=1).close()
            return True
        except OSError:
            return False

    def extension_arguments(self, **options) -> list[str]:
        """``scopefs provider add ID`` arguments: the s3 extension on this store."""
        return _extension_arguments("s3", {**self.options, **options})

    def client(self, endpoint: str | None = None):
        """A boto3 S3 client of this store, from the root namespace (over the link)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=endpoint or self.url,
            aws_access_key_id=self.ACCESS_KEY,
            aws_secret_access_key=self.SECRET_KEY,
            region_name=self.REGION,
            config=Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=30),
        )

    # -- behind the test's back: from inside the namespace ------------------

    def admin(self, function):
        """FUNCTION(client) with a client of the server's loopback, in a
        thread inside the namespace: unaffected by the link's faults. Every
        request of that client must happen in FUNCTION (a socket belongs to
        the namespace of the thread that made it)."""

        def call():
            if self._client is None:
                self._client = self.client(f"http://127.0.0.1:{self.port}")
            return function(self._client)

        return self.link.inside(call)

    def s3(self, method: str, **kwargs):
        """``client.METHOD(**kwargs)`` from inside the namespace (``admin``)."""
        return self.admin(lambda client: getattr(client, method)(**kwargs))

    def put(self, key: str, data: bytes) -> str:
        """Writes an object; its ETag."""
        return self.s3("put_object", Bucket=self.bucket, Key=key, Body=data)["ETag"]

    def get(self, key: str) -> bytes:
        return self.admin(lambda client: client.get_object(Bucket=self.bucket, Key=key)["Body"].read())

    def delete(self, key: str) -> None:
        self.s3("delete_object", Bucket=self.bucket, Key=key)

    def keys(self, prefix: str = "") -> list[str]:
        def listing(client):
            pages = client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            return [item["Key"] for page in pages for item in page.get("Contents", [])]

        return self.admin(listing)


class RcloneRemote(Remote):
    """``rclone serve webdav|sftp`` over ``folder``; ``remote`` reaches it."""

    USER = "scopefs"

    def __init__(self, workdir: Path, kind: str, folder: Path | None = None):
        if kind not in ("webdav", "sftp"):
            raise ValueError(f"kind is 'webdav' or 'sftp', not {kind!r}")
        self.kind = kind
        self.port = WEBDAV_PORT if kind == "webdav" else SFTP_PORT
        self.folder = Path(folder) if folder else Path(workdir) / "served"
        self.folder.mkdir(parents=True, exist_ok=True)
        # No user configuration is read: the remote is a connection string.
        self.env = {"RCLONE_CONFIG": str(Path(workdir) / "rclone.conf"), "XDG_CACHE_HOME": str(Path(workdir) / "cache")}
        super().__init__(workdir)

    def _start(self) -> None:
        serve = ["rclone", "serve", self.kind, self.folder, "--addr", f"0.0.0.0:{self.port}", *SERVE_UNCACHED]
        if self.kind == "sftp":
            password = uuid.uuid4().hex
            serve += ["--user", self.USER, "--pass", password]
        self._launch(serve, self.env)
        self._wait_until(self._port_open, f"rclone serve {self.kind}")
        if self.kind == "webdav":
            self.remote = f":webdav,url='http://{self.address}:{self.port}':"
        else:
            obscured = subprocess.run(
                ["rclone", "obscure", password],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, **self.env},
            ).stdout.strip()
            self.remote = f":sftp,host={self.address},port={self.port},user={self.USER},pass={obscured}:"
        self.options = {"remote": self.remote}

    def extension_arguments(self, **options) -> list[str]:
        """``scopefs provider add ID`` arguments: the rclone extension on this
        remote (``path=SUBFOLDER`` serves a folder of it)."""
        return _extension_arguments("rclone", {**self.options, **options})


def _extension_arguments(extension: str, options: dict) -> list[str]:
    arguments = ["--extension", extension]
    for key, value in options.items():
        arguments += ["--option", f"{key}={value}"]
    return arguments


class RemoteSet:
    """Remotes made for one test, all closed together."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.made: list[Remote] = []

    def _add(self, remote_class, *args, **kwargs):
        workdir = self.workdir / f"remote-{len(self.made)}"
        remote = remote_class(workdir, *args, **kwargs)
        self.made.append(remote)
        return remote

    def s3(self, bucket: str = "scopefs-remote") -> S3Remote:
        return self._add(S3Remote, bucket=bucket)

    def webdav(self, folder: Path | None = None) -> RcloneRemote:
        return self._add(RcloneRemote, "webdav", folder)

    def sftp(self, folder: Path | None = None) -> RcloneRemote:
        return self._add(RcloneRemote, "sftp", folder)

    def close(self) -> None:
        problems = []
        for remote in reversed(self.made):
            try:
                remote.close()
            except (RemoteError, LinkError, OSError) as error:
                problems.append(str(error))
        self.made.clear()
        if problems:
            raise RemoteError("; ".join(problems))
