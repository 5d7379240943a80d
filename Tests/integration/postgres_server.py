"""A throwaway PostgreSQL server for the fleet tests and for the
integration suite run on the fleet's store (SCOPEFS_IT_STORE=postgresql): Debian's
postgresql-15 binaries, initdb into a temp dir as the `postgres` user,
password (scram-sha-256) logins only, TLS on with a self-signed
certificate, listening on loopback and on the given extra addresses (a
test host's veth). `stop`/`start` kill and bring back the same cluster."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

OWNER_ROLE = "scopefs_owner"
DATABASE = "scopefs"


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL's server is not installed: `make deps` installs postgresql-15")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self, extra_addresses: list[str] = (), port: int | None = None):
        self.bin = _binaries()
        self.user = pwd.getpwnam("postgres")
        self.root = Path(tempfile.mkdtemp(prefix="scopefs-pg-", dir="/tmp"))
        os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
        self.data = self.root / "data"
        self.port = port or _free_port()
        self.addresses = ["127.0.0.1", *extra_addresses]
        self.owner_password = "owner-" + os.urandom(8).hex()
        self.password_file = self.root / "owner.pw"  # the owner's, root's 0600 file
        self.password_file.write_text(self.owner_password + "\n")
        os.chmod(self.password_file, 0o600)
        pwfile = self.root / "initdb.pw"
        pwfile.write_text(self.owner_password + "\n")
        os.chown(pwfile, self.user.pw_uid, self.user.pw_gid)
        self._as_postgres(
            [self.bin / "initdb", "-D", self.data, "-U", OWNER_ROLE, "--auth=scram-sha-256", f"--pwfile={pwfile}"]
        )
        pwfile.unlink()
        self._certificate()
        with open(self.data / "pg_hba.conf", "a") as hba:
            # A test host behind its veth: TLS and a password, never plain text.
            hba.write("hostssl all all 10.213.0.0/16 scram-sha-256\n")
        self.start()
        self.psql(f"CREATE DATABASE {DATABASE}", database="postgres")

    def _certificate(self) -> None:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=scopefs-fleet-test",
             "-keyout", self.data / "server.key", "-out", self.data / "server.crt"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        for name in ("server.key", "server.crt"):
            os.chown(self.data / name, self.user.pw_uid, self.user.pw_gid)
        os.chmod(self.data / "server.key", 0o600)

    def _as_postgres(self, argv: list, timeout: float = 120) -> subprocess.CompletedProcess:
        p = subprocess.run(
            ["runuser", "-u", "postgres", "--", *map(str, argv)],
            capture_output=True, text=True, timeout=timeout, cwd=self.root, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if p.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({p.returncode}): {p.stdout}{p.stderr}")
        return p

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses='{','.join(self.addresses)}' -c ssl=on"
        self._as_postgres(
            [self.bin / "pg_ctl", "-D", self.data, "-l", self.root / "server.log", "-o", options, "-w", "start"]
        )

    def stop(self, mode: str = "immediate") -> None:
        """`immediate` is a crash as far as the clients see: no goodbye."""
        self._as_postgres([self.bin / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop"])

    def url(
        self, role: str = OWNER_ROLE, host: str = "127.0.0.1", sslmode: str | None = None, database: str = DATABASE
    ) -> str:
        query = f"?sslmode={sslmode}" if sslmode else ""
        return f"postgresql://{role}@{host}:{self.port}/{database}{query}"

    def create_database(self, name: str) -> None:
        """A database of its own, for one test world of the integration suite."""
        p = self.psql(f"CREATE DATABASE {name}", database="postgres")
        if p.returncode != 0:
            raise RuntimeError(f"CREATE DATABASE {name} failed: {p.stderr}")

    def drop_database(self, name: str) -> None:
        """Drops NAME, closing the sessions still on it (a killed daemon's)."""
        self.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", database="postgres")

    def psql(self, sql: str, role: str = OWNER_ROLE, password: str | None = None, database: str = DATABASE):
        """Runs SQL as ROLE over TCP; returns the CompletedProcess (not checked)."""
        env = {**os.environ, "PGPASSWORD": password or self.owner_password, "PGCONNECT_TIMEOUT": "5"}
        return subprocess.run(
            ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port),
             "-U", role, "-d", database, "-c", sql],
            capture_output=True, text=True, env=env, timeout=30, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def close(self) -> None:
        try:
            self.stop("fast")
        except RuntimeError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)
