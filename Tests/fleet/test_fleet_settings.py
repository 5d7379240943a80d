"""The settings page on a fleet (issue 51, SPEC S44, S46): `scopefs
settings` on a state directory whose isolation layer is a fleet's
PostgreSQL store shows the fleet's apps and grants, and its revoke is the
fleet's, installed by this host's daemon before the page answers (SPEC
S13) -- never this host's SQLite file, which holds none of the fleet's
grants (the page read that file before `IsolationBackend` chose for it).

One host, the owner's, on loopback, mounted in the default strict mode;
its app reads in the default sandbox."""

from __future__ import annotations

import html
import http.client
import json
import re
import select
import signal
import subprocess

import pytest
from fleet_hosts import init_owner_host, keep_daemon_logs, mount
from postgres_server import PostgresServer
from scopefs_harness import ALPHA, LOCAL, Env, describe

REPORT = "docs/report.txt"

# Starts access to the file (strict scopes, SPEC S6, S9) and reads it once.
READ = """
p = sys.argv[1]
def start_and_read():
    os.getxattr(p, "user.scopefs.start")
    return len(read_bytes(p))
emit(outcome(start_and_read))
"""


class Page:
    """`scopefs settings --port 0 --no-open`, signed in with its cookie."""

    def __init__(self, host: Env):
        self.proc = subprocess.Popen(
            host.cli_argv("settings", "--port", "0", "--no-open"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=host.base_env,
            start_new_session=True,
        )
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline().decode() if ready else ""
        if not line.startswith("settings page: http://127.0.0.1:"):
            self.stop()
            raise AssertionError(f"no address printed: {line!r} {self.proc.stderr.read().decode()!r}")
        url = line.split(": ", 1)[1].strip()
        self.port = int(url.split(":")[2].split("/")[0])
        status, headers, _ = self.request("GET", "/?token=" + url.split("token=", 1)[1])
        assert status in (302, 303), (status, headers)
        self.cookie = headers["Set-Cookie"].split(";", 1)[0]

    def request(self, method: str, path: str, body: str | None = None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        headers = {"Cookie": self.cookie} if getattr(self, "cookie", None) else {}
        if body is not None:
            # A change must come from the page itself (its Origin, as a browser sends it).
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            headers["Origin"] = f"http://127.0.0.1:{self.port}"
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode(errors="replace")

    def get(self, path: str) -> str:
        status, _, body = self.request("GET", path)
        assert status == 200, (path, status, body[:2000])
        return html.unescape(body)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError("`scopefs settings` ignored SIGTERM") from None


@pytest.fixture
def owner(tmp_path_factory):
    server = PostgresServer()
    host = Env()
    try:
        init_owner_host(host, server, 30.0)
        mount(host)
        yield host
    finally:
        keep_daemon_logs(tmp_path_factory.mktemp("daemon-logs"), {"a": host})
        problems = host.teardown()
        server.close()
        assert not problems, problems


def fleet_grant(host: Env) -> dict:
    grants = json.loads(host.cli("fleet", "grants", ALPHA, "--json").stdout)
    (grant,) = [g for g in grants if g["relativePath"] == REPORT]
    return grant


def test_the_settings_page_on_a_fleet_shows_and_revokes_the_fleets_grants(owner):
    made = owner.cli("fleet", "grant", ALPHA, f"{LOCAL}:{REPORT}")
    grant_id = made.stdout.split()[1].rstrip(":")
    reader = owner.prov(ALPHA, LOCAL, REPORT)
    assert owner.app_json(ALPHA, READ, reader, sandbox=True).get("ok") is not None
    page = Page(owner)
    try:
        # The apps are the fleet's: this host's SQLite file registers none.
        apps = page.get("/")
        assert ALPHA in apps, apps[:3000]
        # The app's page lists the fleet's grant, with its revoke form.
        app_page = page.get(f"/app?id={ALPHA}")
        assert REPORT in app_page, app_page[:3000]
        csrf = re.search(r'name="csrf" value="([^"]+)"', app_page)
        assert csrf and f'name="grant" value="{grant_id}"' in app_page, app_page[:3000]
        # Revoking from the page is the fleet's revoke, with the owner's
        # role; the daemon has installed it when the page answers (S13).
        body = f"csrf={csrf.group(1)}&app={ALPHA}&grant={grant_id}"
        status, _, answer = page.request("POST", "/revoke", body)
        assert status in (200, 303), (status, answer[:2000])
        assert fleet_grant(owner)["state"] == "revoked", describe(owner.cli("fleet", "grants", ALPHA))
        denied = owner.app_json(ALPHA, READ, reader, sandbox=True)
        assert denied == {"errno": "EPERM"}, denied
        assert "revoked" in page.get(f"/app?id={ALPHA}").lower()
    finally:
        page.stop()
