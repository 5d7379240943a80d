"""An unmodified program run in scope: `scopefs run --hold-scopes` (issue
50, finding 3; SPEC S5, S9, S11, S14).

Strict scopes are the default (S9): a web server, a backup tool or an
editor that knows nothing of scopes gets EPERM on every granted item
(`python3 -m http.server` answers 404). `--hold-scopes` starts a scope on
each active grant for the run's command, which becomes the program (as
`scope exec` does), so it and its children are in scope while it runs;
the starts are events like any, the scopes end with it without leak
events, and a revoke still cuts it.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import tarfile
import urllib.error
import urllib.request

from doc_scope_helpers import events, mount
from scopefs_harness import ALPHA, LOCAL, REPORT_BYTES, kill_group, wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, name: str) -> tuple[int, bytes]:
    """HTTP status and body of GET /NAME (0: nothing answered)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/{name}", timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, b""
    except OSError:
        return 0, b""


class Server:
    """`python3 -m http.server` as ALPHA, in the default sandbox with the
    host's network, serving the granted folder."""

    def __init__(self, env, *options: str):
        self.port = free_port()
        serve = f'exec python3 -m http.server --bind 127.0.0.1 {self.port} --directory "$SCOPEFS_MOUNT/Providers/{LOCAL}/docs"'
        argv = env.run_argv(ALPHA, ["sh", "-c", serve], sandbox=True, extra=("--share-net", *options))
        self.log = open(env.root / f"server-{self.port}.log", "w+")
        self.popen = subprocess.Popen(argv, stdout=self.log, stderr=self.log, env=env.base_env, start_new_session=True)
        wait_for("the server to answer", lambda: get(self.port, "")[0] or self.popen.poll() is not None, timeout=20)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        kill_group(self.popen.pid)
        self.popen.wait(timeout=10)
        self.log.close()


def test_a_web_server_serves_granted_files_with_held_scopes_until_a_revoke(env):
    """Issue 50.3: without a scope the server answers 404 (EPERM, strict
    scopes by default); with --hold-scopes it serves the file; after a
    revoke it answers 404 again, the server still running; stopped, it
    leaves no leak event."""
    grant = env.grant(ALPHA, f"{LOCAL}:docs", read_only=True)
    mount(env)
    plain = Server(env)
    try:
        assert get(plain.port, "report.txt")[0] == 404, plain.output()
    finally:
        plain.stop()
    held = Server(env, "--hold-scopes")
    try:
        assert get(held.port, "report.txt") == (200, REPORT_BYTES), held.output()
        starts = [e for e in events(env, kind="start", app=ALPHA) if e.get("path", "").endswith("/docs")]
        assert starts, "the held scope was not recorded as a start"
        env.revoke(ALPHA, grant)
        assert get(held.port, "report.txt")[0] == 404, held.output()
        assert held.popen.poll() is None, "the server ended at the revoke\n" + held.output()
    finally:
        held.stop()
    env.restore(ALPHA, grant)
    leaks = events(env, kind="leak", app=ALPHA)
    assert leaks == [], f"a held scope ended as a leak: {leaks}"


def backup(env, tool: str, *options: str) -> subprocess.CompletedProcess:
    """tar or rsync of the granted folder as ALPHA (default sandbox): a
    shell runs it, so the tool is a child of the process holding scopes."""
    commands = {
        "tar": f'tar -C "$SCOPEFS_MOUNT/Providers/{LOCAL}" -cf - docs',
        "rsync": f'rsync -a "$SCOPEFS_MOUNT/Providers/{LOCAL}/docs/" /tmp/copy/ && tar -C /tmp/copy -cf - .',
    }
    argv = env.run_argv(ALPHA, ["sh", "-c", commands[tool]], sandbox=True, extra=options)
    return subprocess.run(argv, capture_output=True, env=env.base_env, timeout=60)


def names_in(archive: bytes) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {os.path.basename(member.name) for member in tar.getmembers() if member.isfile()}


def test_tar_and_rsync_back_up_a_granted_folder_with_held_scopes(env):
    """Issue 50.3: tar and rsync, unmodified, fail with EPERM without a
    scope; with --hold-scopes (or --hold-scope on the one item) they copy
    every file; revoked, tar fails again (EPERM), and a named item whose
    grant is revoked stops the run before CMD with 77, as `scope exec`."""
    grant = env.grant(ALPHA, f"{LOCAL}:docs", read_only=True)
    mount(env)
    for tool in ("tar", "rsync"):
        denied = backup(env, tool)
        assert denied.returncode != 0 and b"Operation not permitted" in denied.stderr, (tool, denied.stderr)
        for options in (("--hold-scopes",), ("--hold-scope", f"{LOCAL}:docs")):
            copied = backup(env, tool, *options)
            assert copied.returncode == 0, (tool, options, copied.stderr)
            assert names_in(copied.stdout) == {"report.txt", "secret.txt"}, (tool, options)
    env.revoke(ALPHA, grant)
    after = backup(env, "tar", "--hold-scopes")
    assert after.returncode != 0 and b"Operation not permitted" in after.stderr, after.stderr
    assert b"has no active grant to hold" in after.stderr, after.stderr
    named = backup(env, "tar", "--hold-scope", f"{LOCAL}:docs")
    assert named.returncode == 77 and b"cannot start accessing" in named.stderr, named.stderr


def test_a_grant_that_cannot_be_started_is_skipped_with_a_warning(env):
    """Issue 50.3: --hold-scopes reads the grants before the run; one whose
    item is gone by then (deleted on the host, or a session grant the last
    run ended) is skipped with a warning, and CMD runs in scope on the rest."""
    env.grant(ALPHA, f"{LOCAL}:photos", read_only=True)
    env.grant(ALPHA, f"{LOCAL}:docs", read_only=True)
    shutil.rmtree(env.backing(LOCAL) / "photos")
    mount(env)
    copied = backup(env, "tar", "--hold-scopes")
    assert copied.returncode == 0, copied.stderr
    assert names_in(copied.stdout) == {"report.txt", "secret.txt"}
    assert b"--hold-scopes: no scope on this grant" in copied.stderr and b"photos" in copied.stderr, copied.stderr
