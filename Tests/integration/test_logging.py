"""Where the daemon logs (docs/CLI.md, "Logs"): the journal with structured
fields where journald runs, else `<state>/daemon.log`, rotated by size.
Both carry the event stream (SPEC S29) besides the daemon's messages."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import struct
from pathlib import Path

from scopefs_harness import ALPHA, LOCAL, describe, run_bounded, wait_for

MANY = 300
FORGED = "2026-01-01T00:00:00.000Z critical scopefs: forged"


def _many_files(env) -> str:
    folder = env.backing(LOCAL) / "docs" / "many"
    folder.mkdir()
    for i in range(MANY):
        (folder / f"f{i:03d}.txt").write_bytes(b"x\n")
    (folder / f"evil\n{FORGED}").write_bytes(b"x\n")
    return env.prov(ALPHA, LOCAL, "docs/many")


DENY_ALL = """
base = sys.argv[1]
results = [attempt(open_close, f"{base}/f{i:03d}.txt", os.O_RDONLY) for i in range(int(sys.argv[2]))]
results.append(attempt(open_close, f"{base}/evil\\n{sys.argv[3]}", os.O_RDONLY))
emit(results)
"""


def test_daemon_log_file_is_rotated_by_size(env):
    """Without a journal (`--log file`), the daemon's messages and events go
    to STATE/daemon.log; past SCOPEFS_LOG_MAX_BYTES it becomes daemon.log.1
    (older ones shift up to .3, the oldest is dropped), so the log stays
    bounded however many denials an app causes. A name with a newline
    cannot forge a line: names are escaped as in every text output (S29)."""
    limit = 4096
    env.grant(ALPHA, f"{LOCAL}:docs")
    folder = _many_files(env)
    env.base_env["SCOPEFS_LOG_MAX_BYTES"] = str(limit)
    env.cli("mount", env.mnt, "--log", "file")
    env.mounted = True
    env._record_daemon()
    denied = env.app_json(ALPHA, DENY_ALL, folder, MANY, FORGED)
    assert denied == ["EPERM"] * (MANY + 1), denied[:5]  # strict scopes: no scope started

    log = env.state / "daemon.log"
    last = f"/Providers/{LOCAL}/docs/many/f{MANY - 1:03d}.txt"
    wait_for(
        "the last denial in daemon.log or daemon.log.1",
        lambda: "".join(_text_if_present(p) for p in (log, log.with_name("daemon.log.1"))),
        lambda newest: last in newest,
        timeout=10,
    )
    files = sorted(p.name for p in env.state.iterdir() if p.name.startswith("daemon.log"))
    assert files == ["daemon.log", "daemon.log.1", "daemon.log.2", "daemon.log.3"], files
    longest_line = max(len(line) + 1 for p in env.state.glob("daemon.log*") for line in p.read_bytes().split(b"\n"))
    for p in env.state.glob("daemon.log*"):
        assert p.stat().st_size <= limit + longest_line, (p.name, p.stat().st_size)
        assert oct(p.stat().st_mode & 0o777) == "0o600", p.name
    everything = "".join(p.read_text(errors="replace") for p in env.state.glob("daemon.log*"))
    assert "evil\\n" + FORGED in everything, "the denial of the name with a newline is not logged, escaped"
    assert not any(line.startswith(FORGED) for line in everything.splitlines()), "a file name forged a log line"
    line = next(line for line in log.read_text().splitlines() if "denial" in line)
    assert f"app={ALPHA}" in line and "errno=1" in line and "event=denial" in line, line


def _text_if_present(path: Path) -> str:
    """A log file's text, or nothing while a rotation has moved it away and
    not yet opened the next one (the daemon renames, then creates)."""
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _journal_entries(data: bytes) -> dict[str, str]:
    """One entry of journald's native protocol: `KEY=value\\n`, or `KEY\\n`,
    a 64-bit little-endian length, the value and `\\n`."""
    fields: dict[str, str] = {}
    at = 0
    while at < len(data):
        end = data.index(b"\n", at)
        line = data[at:end]
        if b"=" in line:
            key, value = line.split(b"=", 1)
            at = end + 1
        else:
            key = line
            (size,) = struct.unpack("<Q", data[end + 1 : end + 9])
            value = data[end + 9 : end + 9 + size]
            at = end + 9 + size + 1
        fields[key.decode()] = value.decode(errors="replace")
    return fields


def test_journal_gets_events_with_structured_fields(env, tmp_path):
    """Where journald runs, a background daemon (`--log auto`) writes to the
    journal: every message with MESSAGE, PRIORITY and SYSLOG_IDENTIFIER
    scopefs, and each event with its own fields, so `journalctl
    SCOPEFS_APP=APP` finds an app's denials: SCOPEFS_EVENT, SCOPEFS_APP,
    SCOPEFS_GRANT (scope starts), ERRNO (denials). journald does not run on
    every test machine: the test gives the daemon a private mount namespace
    whose /run/systemd/journal/socket is the test's own datagram socket,
    and reads what arrives there."""
    grant = env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    target = env.prov(ALPHA, LOCAL, "docs/report.txt")
    journal_dir = tmp_path / "journal"
    journal_dir.mkdir()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(journal_dir / "socket"))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    cli = [str(env.bin), "--state", str(env.state)]
    steps = [
        "mount -t tmpfs tmpfs /run/systemd",
        "mkdir /run/systemd/journal",
        f"mount --bind {shlex.quote(str(journal_dir))} /run/systemd/journal",
        shlex.join(cli + ["mount", str(env.mnt)]),
        # a denial (no scope started, SPEC S9), then a read in scope (a start event with the grant)
        shlex.join(env.run_argv(ALPHA, ["cat", target])) + " >/dev/null 2>&1 || true",
        shlex.join(env.run_argv(ALPHA, [str(env.bin), "scope", "exec", target, "--", "cat", target])) + " >/dev/null",
        "sleep 0.5",
        shlex.join(cli + ["unmount", str(env.mnt)]),
    ]
    script = "set -e\n" + "\n".join(steps)
    environment = dict(env.base_env, SCOPEFS_LOG_LEVEL="debug")
    try:
        p = run_bounded(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            90,
            environment,
            out_dir=tmp_path,
            what="daemon in a namespace with a journal socket",
        )
        assert p.returncode == 0, describe(p)
        entries = []
        sock.setblocking(False)
        while True:
            try:
                entries.append(_journal_entries(sock.recv(1 << 20)))
            except BlockingIOError:
                break
    finally:
        sock.close()
        info = env.state / "daemon.json"
        if info.exists():  # a daemon left behind by a failed step
            try:
                os.kill(json.loads(info.read_text())["pid"], signal.SIGKILL)
            except (OSError, ValueError, KeyError):
                pass
    assert entries, "nothing reached the journal socket"
    assert all(e.get("SYSLOG_IDENTIFIER") == "scopefs" and e.get("PRIORITY", "").isdigit() for e in entries), entries[
        :3
    ]
    assert any(e.get("MESSAGE", "").startswith(f"mounted {env.mnt}") for e in entries), [
        e.get("MESSAGE") for e in entries
    ]
    denials = [e for e in entries if e.get("SCOPEFS_EVENT") == "denial"]
    assert denials, [e.get("MESSAGE") for e in entries]
    d = denials[0]
    assert d["SCOPEFS_APP"] == ALPHA and d["ERRNO"] == "1", d
    assert d["SCOPEFS_PATH"].endswith("/docs/report.txt") and d["SCOPEFS_OPERATION"] == "open", d
    assert d["PRIORITY"] == "5" and d["SCOPEFS_STATE"] == str(env.state), d
    starts = [e for e in entries if e.get("SCOPEFS_EVENT") == "start"]
    assert starts and starts[0]["SCOPEFS_GRANT"] == grant and starts[0]["SCOPEFS_APP"] == ALPHA, starts
    assert not (env.state / "daemon.log").exists(), "the daemon wrote daemon.log although the journal was there"
