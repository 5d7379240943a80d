"""The "Files and Folders" page (issue 36, SPEC S46) end to end: a real
mount and daemon, an app process in the default sandbox on the default
(strict) mount reading a granted file, `scopefs settings` serving the page,
and Debian's chromium driven by Playwright clicking its switches.

Screenshots of every page are kept in .build/test-artifacts/settings (or
$SCOPEFS_SETTINGS_ARTIFACTS).
"""

from __future__ import annotations

import http.client
import os
import select
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest
from doc_scope_helpers import mount as mount_with_scopes
from previews import cache_preview
from scopefs_harness import ALPHA, BETA, LOCAL, REPO_ROOT, REPORT_BYTES, describe, last_json_line, snippet

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("SCOPEFS_SETTINGS_ARTIFACTS", REPO_ROOT / ".build" / "test-artifacts" / "settings"))
REPORT = "docs/report.txt"

# The app reads the granted file once per line on stdin, after starting
# access to it (strict scopes, SPEC S6, S9), and reports each read.
READER = """
p = sys.argv[1]
os.getxattr(p, "user.scopefs.start")
for _ in sys.stdin:
    emit(outcome(lambda: len(read_bytes(p))))
"""

# An app process that knows the page's address and even its token.
INTRUDER = """
import http.client
port, token = int(sys.argv[1]), sys.argv[2]
try:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/?token=" + token)
    r = c.getresponse()
    body = r.read().decode(errors="replace")
    emit({"status": r.status, "body": body[body.find('role="alert"'):][:300]})
except OSError as exc:
    emit({"errno": ename(exc) if exc.errno else type(exc).__name__})
"""


class Page:
    """`scopefs settings --port 0 --no-open` for one test."""

    def __init__(self, env):
        self.env = env
        self.proc = subprocess.Popen(
            [*map(str, env.cli_argv("settings", "--port", "0", "--no-open"))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env.base_env,
            start_new_session=True,
        )
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline().decode() if ready else ""
        assert line.startswith("settings page: http://127.0.0.1:"), (
            f"no address printed: {line!r} {self.proc.stderr.read1(4000) if not ready else b''!r}"
        )
        self.url = line.split(": ", 1)[1].strip()
        self.port = int(self.url.split(":")[2].split("/")[0])
        self.token = self.url.split("token=", 1)[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.token_file = env.state / "settings.url"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError("`scopefs settings` ignored SIGTERM")

    def request(self, method: str, path: str, body: str | None = None, headers: dict | None = None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode(errors="replace")


@pytest.fixture
def page(env):
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    mount_with_scopes(env)  # the default: strict scopes
    served = Page(env)
    yield served
    served.stop()
    assert not served.token_file.exists(), "the token file outlived the page"


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: `make deps` installs Debian's chromium"
    with sync_playwright() as playwright:
        # --no-sandbox: chromium's own sandbox needs user namespaces that
        # root in a container does not get; the page is the test's subject.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def notice(page) -> str:
    """The page's status line after a change, or what it showed instead."""
    page.wait_for_load_state()
    status = page.get_by_role("status")
    if status.count() == 0:
        raise AssertionError(f"no status after the change; the page says: {page.locator('main').inner_text()}")
    return status.inner_text()


def activity_rows(page, base: str, app: str) -> set[str]:
    page.goto(f"{base}/activity?app={app}")
    return set(page.locator("table.events tbody tr").evaluate_all("rows => rows.map(r => r.className)"))


def test_revoke_and_restore_from_the_page_reach_the_reading_app(env, page, browser):
    """Issue 36: open the page with the token, find the app reading a
    granted file, click revoke: its next read fails with EPERM (S13, S14:
    the daemon installed the revoke before the page said done); restore
    (by keyboard): the read works again (S15); the activity view shows both
    within a second (S29). A screenshot of each page is kept."""
    reader = env.app_session(ALPHA, READER, env.prov(ALPHA, LOCAL, REPORT), sandbox=True)
    reader.send()
    assert reader.recv() == {"ok": len(REPORT_BYTES)}, reader.stderr()

    assert stat.S_IMODE(os.stat(page.token_file).st_mode) == 0o600
    assert page.token_file.read_text().strip() == page.url

    context = browser.new_context(viewport={"width": 1100, "height": 720})
    tab = context.new_page()
    tab.goto(page.url)
    assert tab.url == page.base + "/", "the token must leave the address bar"
    cookie = next(c for c in context.cookies() if c["name"] == "scopefs_settings")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict", cookie
    assert tab.locator("main").get_by_text(ALPHA).count() == 1
    shoot(tab, "apps")

    tab.get_by_role("link", name=ALPHA).click()
    row = tab.locator("tr", has_text=f"{LOCAL}:{REPORT}")
    assert row.locator("td.state-active").count() == 1
    assert tab.get_by_text("Live processes").count() == 1
    shoot(tab, "app")

    row.get_by_role("button", name="Revoke").click()
    assert notice(tab).startswith("Revoked")
    reader.send()
    assert reader.recv() == {"errno": "EPERM"}, "the app's next read after the click must fail with EPERM"
    shoot(tab, "app-revoked")

    # Restore by keyboard alone: focus the switch and press Enter.
    row = tab.locator("tr", has_text=f"{LOCAL}:{REPORT}")
    row.get_by_role("button", name="Restore").focus()
    tab.keyboard.press("Enter")
    tab.wait_for_url("**/app?id=*&done=restored")
    restored_at = time.monotonic()
    reader.send()
    assert reader.recv() == {"ok": len(REPORT_BYTES)}, "restored: the same path reads again (S15)"

    seen: set[str] = set()
    while time.monotonic() - restored_at < 1.0 and not {"event-revoke", "event-restore"} <= seen:
        seen = activity_rows(tab, page.base, ALPHA)
    assert {"event-revoke", "event-restore"} <= seen, f"activity within 1 s shows {seen}"
    assert tab.locator("table.chart meter").count() == 2, "the app's accesses and denials per hour"
    shoot(tab, "activity")
    for name, path in (("items", "/items"), ("providers", "/providers")):
        tab.goto(page.base + path)
        shoot(tab, name)
    tab.goto(f"{page.base}/items?provider={LOCAL}&path={REPORT}")
    assert tab.locator("main li", has_text=ALPHA).count() == 1
    shoot(tab, "items-holder")
    reader.kill()


def test_the_page_reads_at_400_percent_zoom_in_dark_mode_without_script(env, page, browser):
    """Issue 36: 400 % zoom is a 320 px wide window: nothing scrolls
    sideways; dark mode follows prefers-color-scheme; the page works with
    JavaScript off; Tab reaches the skip link first."""
    context = browser.new_context(
        viewport={"width": 320, "height": 640}, color_scheme="dark", java_script_enabled=False
    )
    tab = context.new_page()
    tab.goto(page.url)
    tab.get_by_role("link", name=ALPHA).click()
    tab.wait_for_load_state("load")  # the stylesheet too, before measuring
    assert tab.locator("td.state-active").count() == 1
    # Script is off for the page, not for Playwright's own evaluation.
    width = tab.evaluate("document.documentElement.scrollWidth")
    assert width <= 320, f"the app page is {width} px wide at 320 px"
    background = tab.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(21, 21, 21)", background
    shoot(tab, "app-dark-320px")
    tab.goto(f"{page.base}/activity?app={ALPHA}&live=1")
    tab.wait_for_load_state("load")
    width = tab.evaluate("document.documentElement.scrollWidth")
    assert width <= 320, f"the activity page is {width} px wide at 320 px"
    shoot(tab, "activity-dark-320px")
    tab.goto(f"{page.base}/app?id={ALPHA}")
    tab.keyboard.press("Tab")
    assert tab.evaluate("document.activeElement.textContent") == "Skip to content"
    tab.locator("tr", has_text=REPORT).get_by_role("button", name="Revoke").click()
    assert notice(tab).startswith("Revoked")


def test_items_show_their_previews_without_a_download(env, browser):
    """SPEC S50, S46, issue 53: the Items view shows a granted item's
    preview, read from the mount (here a local provider's file with the
    owner's freedesktop preview), as an image the browser draws; an item
    without one shows none, and a revoked grant's item shows none."""
    cache = env.root / "owner-cache"
    env.base_env["XDG_CACHE_HOME"] = str(cache)
    photo = env.backing(LOCAL) / "photo.txt"
    photo.write_bytes(b"a photo\n")
    preview = cache_preview(cache, photo)
    env.grant(ALPHA, f"{LOCAL}:photo.txt", read_only=True)
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    mount_with_scopes(env)
    served = Page(env)
    try:
        tab = browser.new_context().new_page()
        tab.goto(served.url)
        tab.goto(f"{served.base}/items")
        images = tab.locator("main img.preview")
        assert images.count() == 1, tab.locator("main").inner_html()
        assert images.first.get_attribute("alt") == "preview of photo.txt"
        tab.wait_for_function("() => document.querySelector('img.preview').complete")
        assert images.first.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [4, 4], "the browser drew it"
        shoot(tab, "items-previews")
        address = images.first.get_attribute("src")
        served_png = tab.request.get(served.base + address)
        assert served_png.status == 200 and served_png.headers["content-type"] == "image/png"
        assert served_png.body() == preview
        env.cli("revoke", ALPHA, f"{LOCAL}:photo.txt")
        tab.goto(f"{served.base}/items")
        assert tab.locator("main img.preview").count() == 0, "a revoked grant shows no preview"
        assert tab.request.get(served.base + address).status == 404
    finally:
        served.stop()


def test_hostile_names_show_as_ls_b_and_never_as_markup(env, browser):
    """Issue 36, SPEC S29, S33a: item names are bytes; the page shows them
    as `ls -b` does and escapes them, so a name is never markup or script."""
    names = {
        "<img src=x onerror=alert(1)>.txt": "<img src=x onerror=alert(1)>.txt",
        "<script>alert(2)": "<script>alert(2)",
        "\x1b[31mred.txt": "\\x1b[31mred.txt",
        os.fsdecode(b"caf\xe9.txt"): "caf\\xe9.txt",
    }
    for name in names:
        (env.backing(LOCAL) / name).write_bytes(b"x\n")
        env.grant(BETA, f"{LOCAL}:{name}")
    mount_with_scopes(env)
    served = Page(env)
    try:
        context = browser.new_context()
        tab = context.new_page()
        dialogs: list[str] = []
        tab.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        tab.goto(served.url)
        tab.goto(f"{served.base}/app?id={BETA}")
        text = tab.locator("main").inner_text()
        for shown in names.values():
            assert f"{LOCAL}:{shown}" in text, (shown, text)
        assert "\x1b" not in text
        assert tab.locator("main img").count() == 0 and tab.locator("main script").count() == 0
        tab.goto(f"{served.base}/items")
        shoot(tab, "items-hostile")
        assert dialogs == [], dialogs
    finally:
        served.stop()


def test_without_the_token_or_with_an_old_one_nothing_is_served(env, page):
    """Issue 36 attack tests: no token, a token of an earlier start, a
    forged cross-origin change; each changes nothing."""
    status, _, body = page.request("GET", "/")
    assert status == 401 and ALPHA not in body
    old_token = page.token
    page.stop()
    page.__init__(env)  # a new start: a new token
    assert page.token != old_token
    status, headers, _ = page.request("GET", "/?token=" + old_token)
    assert status == 403 and "Set-Cookie" not in headers
    status, _, _ = page.request("GET", "/", headers={"Cookie": f"scopefs_settings={old_token}"})
    assert status == 401
    # The cookie of this start, but a form posted from another origin (or
    # without the form's CSRF token): refused, the grant stays active.
    cookie = {"Cookie": f"scopefs_settings={page.token}", "Content-Type": "application/x-www-form-urlencoded"}
    for origin, form in (
        ("http://evil.example", f"app={ALPHA}"),
        (f"http://127.0.0.1:{page.port}", f"app={ALPHA}&csrf=guess"),
        (f"http://127.0.0.1:{page.port + 1}", f"app={ALPHA}"),
    ):
        status, _, _ = page.request("POST", "/revoke", body=form, headers={**cookie, "Origin": origin})
        assert status in (401, 403), (origin, status)
    status, _, _ = page.request("GET", "/", headers={"Host": "rebound.example", **cookie})
    assert status == 421
    privacy = env.cli("privacy", ALPHA, "--json").stdout
    assert '"state" : "active"' in privacy, privacy


@pytest.mark.parametrize(
    "how",
    [
        pytest.param(("--share-net",), id="sandbox-share-net"),
        pytest.param((), id="no-sandbox"),
        pytest.param(None, id="default-sandbox"),
    ],
)
def test_an_app_process_is_refused_even_with_the_token(env, page, how):
    """SPEC S46: no app process reaches the page. In the default sandbox
    there is no network to reach it by; an app run with --share-net or
    --no-sandbox reaches the port, and is refused although it was handed
    this start's token (the peer check, docs/SECURITY.md)."""
    code = snippet(INTRUDER)
    args = ["python3", "-c", code, str(page.port), page.token]
    if how is None:
        argv = env.run_argv(ALPHA, args, sandbox=True)
    elif how == ():
        argv = env.run_argv(ALPHA, args, sandbox=False)
    else:
        argv = env.run_argv(ALPHA, args, sandbox=True, extra=how)
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60, env=env.base_env)
    assert p.returncode == 0, describe(p)
    got = last_json_line(p)
    if how is None:
        assert "errno" in got, f"the default sandbox reached the page: {got}"
    else:
        assert got.get("status") == 403, got
        assert "app process" in got["body"] or "another user" in got["body"], got


def test_the_command_refuses_app_processes_and_a_taken_port(env):
    """docs/CLI.md: `scopefs settings` in an app process exits 77 (it would
    be the owner's hand, S46); a port already taken exits 74 with the
    reason; a port out of range is a usage error (64)."""
    mount_with_scopes(env)  # `scopefs run` needs the mount
    p = env.run_app(ALPHA, [str(env.bin), "--state", str(env.state), "settings", "--no-open"])
    assert p.returncode == 77, describe(p)
    assert "refused: this is an app process" in p.stderr, describe(p)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        p = env.cli("settings", "--port", taken.getsockname()[1], "--no-open", expect=74)
        assert "Address already in use" in p.stderr, describe(p)
    env.cli("settings", "--port", "70000", expect=64)


def open_stream(page, path: str = "/activity/events") -> socket.socket:
    """An SSE stream of the page's, as a browser opens it (with the cookie);
    returns the socket once the stream's first bytes came."""
    connection = socket.create_connection(("127.0.0.1", page.port), timeout=10)
    connection.sendall(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{page.port}\r\nAccept: text/event-stream\r\n"
        f"Cookie: scopefs_settings={page.token}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head or (head.startswith(b"HTTP/1.1 200") and b"retry: 1000" not in head):
        chunk = connection.recv(4096)
        assert chunk, f"the stream closed before it began: {head!r}"
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        connection.close()
        raise AssertionError(f"no stream: {head[:200]!r}")
    assert b"text/event-stream" in head, head
    return connection


def read_to_end(connection: socket.socket, deadline: float) -> bytes:
    """What the server sends until it closes the connection (or the deadline)."""
    received = b""
    while time.monotonic() < deadline:
        connection.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = connection.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            return received
        received += chunk
    raise AssertionError(f"the stream did not end: {received[-300:]!r}")


def test_activity_shows_new_events_live_without_a_reload(env, page, browser):
    """Issue 36: the Activity view is live. With the page open (script on),
    the owner revokes the reading app's grant on the command line; the app's
    next read fails with EPERM (S13, S14); the revoke's row and the denial's
    row appear within a second of each, in the same document (no
    navigation: a marker set on window survives), with the texts
    `scopefs events` prints (S29); the app's chart counts the denial."""
    reader = env.app_session(ALPHA, READER, env.prov(ALPHA, LOCAL, REPORT), sandbox=True)
    reader.send()
    assert reader.recv() == {"ok": len(REPORT_BYTES)}, reader.stderr()

    context = browser.new_context(viewport={"width": 1100, "height": 720})
    tab = context.new_page()
    tab.goto(page.url)
    tab.goto(f"{page.base}/activity?app={ALPHA}")
    # Polled from here: wait_for_function's polling evaluates a string,
    # which the page's CSP (no 'unsafe-eval') refuses once it must repeat.
    deadline = time.monotonic() + 5
    while not (tab.text_content("#live-state") or "").startswith("Live"):
        assert time.monotonic() < deadline, "the page did not go live within 5 s"
        time.sleep(0.05)
    tab.evaluate("window.__sameDocument = 'marker'")
    navigations: list[str] = []
    tab.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == tab.main_frame else None)
    denials_before = tab.evaluate(
        "Array.from(document.querySelectorAll('table.chart .count')).filter((_, i) => i % 2 == 1)"
        ".reduce((sum, c) => sum + Number(c.textContent), 0)"
    )

    revoked_at = time.monotonic()
    env.cli("revoke", ALPHA, f"{LOCAL}:{REPORT}")
    tab.wait_for_selector("table.events tbody tr.event-revoke", timeout=5000)
    revoke_shown = time.monotonic() - revoked_at

    denied_at = time.monotonic()
    reader.send()
    assert reader.recv() == {"errno": "EPERM"}, "the app's next read after the revoke must fail with EPERM"
    tab.wait_for_selector("table.events tbody tr.event-denial", timeout=5000)
    denial_shown = time.monotonic() - denied_at
    assert revoke_shown < 1.0 and denial_shown < 1.0, (revoke_shown, denial_shown)

    assert tab.evaluate("window.__sameDocument") == "marker", "the page was reloaded"
    assert navigations == [], navigations
    shoot(tab, "activity-live")
    # The live row says what `scopefs events` says about the same event.
    denial = tab.locator("table.events tbody tr.event-denial").first
    cells = denial.locator("td").all_inner_texts()
    printed = env.cli("events", "--app", ALPHA, "--kind", "denial", "--limit", "1").stdout.strip().split("\t")
    assert cells[1:5] == ["denial", ALPHA, printed[3], printed[4]], (cells, printed)
    assert "errno=EPERM" in cells[5] and "errno=EPERM" in printed, (cells, printed)
    denials_after = tab.evaluate(
        "Array.from(document.querySelectorAll('table.chart .count')).filter((_, i) => i % 2 == 1)"
        ".reduce((sum, c) => sum + Number(c.textContent), 0)"
    )
    assert denials_after == denials_before + 1, (denials_before, denials_after)
    # A reload shows the same rows the stream added.
    live_ids = set(tab.locator("table.events tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)"))
    tab.reload()
    assert set(tab.locator("table.events tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)")) == live_ids
    reader.kill()


@pytest.mark.parametrize(
    "how",
    [pytest.param(("--share-net",), id="sandbox-share-net"), pytest.param((), id="no-sandbox")],
)
def test_an_app_process_gets_no_live_stream_even_with_the_token(env, page, how):
    """SPEC S46: the live stream is guarded as every route: an app run with
    --share-net or --no-sandbox reaches the port with this start's token
    (as cookie) and is refused by the peer check, no stream opened."""
    code = snippet(
        """
import http.client
port, token = int(sys.argv[1]), sys.argv[2]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
c.request("GET", "/activity/events", headers={"Cookie": "scopefs_settings=" + token})
r = c.getresponse()
emit({"status": r.status, "type": r.getheader("Content-Type"), "body": r.read(2000).decode(errors="replace")})
"""
    )
    args = ["python3", "-c", code, str(page.port), page.token]
    argv = env.run_argv(ALPHA, args, sandbox=how != (), extra=how)
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60, env=env.base_env)
    assert p.returncode == 0, describe(p)
    got = last_json_line(p)
    assert got["status"] == 403, got
    assert got["type"].startswith("text/html") and "event: activity" not in got["body"], got
    assert "app process" in got["body"] or "another user" in got["body"], got


def test_sigterm_ends_open_streams_and_the_page_exits_0_at_once(env, page):
    """Clean shutdown (decision 54): with two live streams open,
    `scopefs settings` gets SIGTERM, ends both streams and exits 0 within
    2 s; the token file is gone."""
    streams = [open_stream(page), open_stream(page, f"/activity/events?app={ALPHA}&after=0")]
    began = time.monotonic()
    page.proc.send_signal(signal.SIGTERM)
    for stream in streams:
        tail = read_to_end(stream, began + 2.0)
        assert tail.endswith(b"0\r\n\r\n"), f"the stream did not end cleanly (chunked end): {tail[-200:]!r}"
        stream.close()
    code = page.proc.wait(timeout=max(0.1, began + 2.0 - time.monotonic()))
    took = time.monotonic() - began
    assert code == 0 and took < 2.0, (code, took, page.proc.stderr.read1(4000))
    assert not page.token_file.exists()


def test_streams_beyond_the_cap_get_503_and_a_closed_one_frees_its_place(env, page):
    """The bound on streams (docs/CLI.md: at most 8 live views): the ninth
    gets 503 with a body that says why. A stream whose reader went away is
    noticed at its next write (an event, or the heartbeat) and frees its
    place."""
    streams = [open_stream(page) for _ in range(8)]
    cookie = {"Cookie": f"scopefs_settings={page.token}"}
    status, _, body = page.request("GET", "/activity/events", headers=cookie)
    assert status == 503 and "8 live views are open already" in body, (status, body[:500])
    streams.pop().close()
    deadline = time.monotonic() + 10
    while True:
        env.grant(BETA, f"{LOCAL}:{REPORT}")  # an event: a write to every stream
        time.sleep(0.6)
        try:
            streams.append(open_stream(page))
            break
        except AssertionError:
            assert time.monotonic() < deadline, "a closed stream's place was not freed"
    for stream in streams:
        stream.close()
