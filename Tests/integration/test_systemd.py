"""systemd: the units pass `systemd-analyze verify`, and the daemon tells
the service manager when the mount serves and when it stops (sd_notify,
what `Type=notify` waits for). docs/CLI.md, "systemd"."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from scopefs_harness import (
    ALPHA,
    DAEMON_EXIT_TIMEOUT,
    REPO_ROOT,
    describe,
    mount_count,
    mountinfo_entries,
    run_bounded,
    scopefs_bin,
)

UNITS = REPO_ROOT / "mount-scripts" / "systemd"


def _installed_units(tmp_path: Path) -> Path:
    """The units as `make install` writes them, naming the binary under test."""
    out = tmp_path / "units"
    out.mkdir()
    for unit in UNITS.iterdir():
        text = unit.read_text().replace("@BINDIR@", str(scopefs_bin().parent))
        text = text.replace("@DOCDIR@", str(REPO_ROOT / "docs"))
        (out / unit.name).write_text(text)
    return out


def _directives(unit: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in unit.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def _verify(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    return run_bounded(["systemd-analyze", *argv], 60, env, what="systemd-analyze verify")


def test_units_pass_systemd_analyze_verify(tmp_path):
    """The system template scopefs@NAME and the user unit load without a
    warning in `systemd-analyze verify` (an instance of the template, as
    `systemctl enable scopefs@main` would load it), and they are what the
    docs promise: Type=notify, per-instance state via StateDirectory=,
    init on every start, the mountpoint made first."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd, in the Makefile's APT_PACKAGES)")
    units = _installed_units(tmp_path)
    shutil.copy(units / "scopefs@.service", units / "scopefs@main.service")
    env = dict(os.environ)
    system = _verify(["--man=no", "verify", str(units / "scopefs@main.service")], env)
    assert system.returncode == 0 and not system.stderr.strip(), describe(system)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    user = _verify(
        ["--user", "--man=no", "verify", str(units / "scopefs.service")], dict(env, XDG_RUNTIME_DIR=str(runtime))
    )
    assert user.returncode == 0 and not user.stderr.strip(), describe(user)
    portal = _verify(
        ["--user", "--man=no", "verify", str(units / "scopefs-portal.service")],
        dict(env, XDG_RUNTIME_DIR=str(runtime)),
    )
    assert portal.returncode == 0 and not portal.stderr.strip(), describe(portal)
    settings = _verify(
        ["--user", "--man=no", "verify", str(units / "scopefs-settings.service")],
        dict(env, XDG_RUNTIME_DIR=str(runtime)),
    )
    assert settings.returncode == 0 and not settings.stderr.strip(), describe(settings)

    template = _directives(units / "scopefs@.service")
    assert template["Type"] == ["notify"]
    assert template["StateDirectory"] == ["scopefs/%i"]
    assert "SCOPEFS_STATE=/var/lib/scopefs/%i" in template["Environment"]
    assert template["ExecStartPre"][0].endswith("/scopefs init")
    assert "mkdir -p ${SCOPEFS_MOUNTPOINT}" in template["ExecStartPre"][1]
    assert template["ExecStart"][0].endswith("/scopefs mount ${SCOPEFS_MOUNTPOINT} --foreground")
    user_unit = _directives(units / "scopefs.service")
    assert user_unit["Type"] == ["notify"] and user_unit["WantedBy"] == ["default.target"]
    assert user_unit["ExecStart"][0].endswith("/scopefs mount %h/scopefs --foreground")
    # The document portal (SPEC S45): ready once it owns the name.
    portal_unit = _directives(units / "scopefs-portal.service")
    assert (portal_unit["Type"], portal_unit["BusName"]) == (["dbus"], ["org.freedesktop.portal.Documents"])
    assert portal_unit["ExecStart"][0].endswith("/scopefs portal")
    # The settings page (SPEC S46): the owner's, never opening a browser.
    settings_unit = _directives(units / "scopefs-settings.service")
    assert settings_unit["ExecStart"][0].endswith("/scopefs settings --no-open")
    assert settings_unit["WantedBy"] == ["default.target"]


def _datagrams(sock: socket.socket, until, timeout: float) -> list[str]:
    """Notifications received until `until(messages)` holds or the deadline."""
    messages: list[str] = []
    deadline = time.monotonic() + timeout
    while not until(messages) and time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            messages.append(sock.recv(4096).decode())
        except TimeoutError:
            break
    return messages


def test_notify_ready_once_the_mount_serves_and_stopping_on_sigterm(env, tmp_path):
    """Type=notify: `scopefs mount --foreground` under a service manager
    (NOTIFY_SOCKET) sends READY=1 only once the mount is in the mount
    table and answers, and on SIGTERM sends STOPPING=1, unmounts and exits 0
    (a clean `systemctl stop`)."""
    notify_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify_path))
    environment = dict(env.base_env, NOTIFY_SOCKET=str(notify_path))
    log = open(tmp_path / "daemon.err", "w")
    daemon = subprocess.Popen(
        [str(env.bin), "--state", str(env.state), "mount", str(env.mnt), "--foreground", "--scopes", "lenient"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        env=environment,
        start_new_session=True,
    )
    try:
        ready = _datagrams(sock, lambda m: any("READY=1" in x for x in m), 20)
        mounted_at_ready = any(mp == str(env.mnt) for mp, _ in mountinfo_entries())
        assert any("READY=1" in m for m in ready), (
            f"no READY=1 within 20 s; got {ready}; daemon output: {(tmp_path / 'daemon.err').read_text()[-2000:]}"
        )
        assert mounted_at_ready, "READY=1 arrived before the mount was in the mount table"
        assert any(f"STATUS=serving {env.mnt}" in m for m in ready), ready
        answer = env.host_json("emit(listing(sys.argv[1]))", env.mnt)
        assert ALPHA in answer, f"the mount does not answer after READY=1: {answer}"

        daemon.send_signal(signal.SIGTERM)
        stopping = _datagrams(sock, lambda m: any("STOPPING=1" in x for x in m), DAEMON_EXIT_TIMEOUT)
        assert any("STOPPING=1" in m for m in stopping), f"no STOPPING=1 after SIGTERM; got {stopping}"
        assert daemon.wait(timeout=DAEMON_EXIT_TIMEOUT) == 0, (tmp_path / "daemon.err").read_text()[-2000:]
        assert mount_count(env.mnt) == 0, "SIGTERM left the mount behind"
    finally:
        sock.close()
        log.close()
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=5)
        env.mounted = bool(mount_count(env.mnt))
