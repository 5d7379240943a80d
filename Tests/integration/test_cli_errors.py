"""Bad input at the CLI boundary: documented exit codes (docs/CLI.md), a
message on stderr, never a crash, a hang or lost data. SPEC S34."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from scopefs_harness import (
    ALPHA,
    LOCAL,
    MOUNT_TIMEOUT,
    ON_THE_FILE,
    Env,
    crash_markers,
    describe,
    mount_count,
    scopefs_bin,
    sleeping,
    wait_for,
)


def assert_clean_error(p: subprocess.CompletedProcess, codes: set[int], mentions: tuple[str, ...] = ()):
    """SPEC S34: exit code in `codes`, a message on stderr (naming one of
    `mentions` if given), no Swift crash output."""
    assert p.returncode in codes, f"want exit {sorted(codes)}\n" + describe(p)
    assert p.stderr.strip(), "error without a message on stderr\n" + describe(p)
    assert not crash_markers(p.stdout + p.stderr), "crash output\n" + describe(p)
    if mentions:
        assert any(m.lower() in p.stderr.lower() for m in mentions), (
            f"stderr should name the problem (one of {mentions})\n" + describe(p)
        )


@dataclass
class BadInput:
    name: str
    argv: Callable[[Env], list]
    codes: set[int]
    mentions: tuple[str, ...] = ()
    mounted: bool = False
    state: Callable[[Env], object] | None = None  # a different --state dir
    prepare: Callable[[Env], None] = field(default=lambda env: None)


def _mount_on_file(env):
    (env.root / "plainfile").write_text("not a directory")


def _mistyped_agent_script(env):
    # Issue 31, point 6: `chose` for `choose` was a silent cancel.
    (env.root / "agent.json").write_text('{"steps": [{"chose": ["local:docs/report.txt"]}]}')


def _empty_state_dir(env):
    path = env.root / "empty-state"
    path.mkdir()
    return path


BAD_INPUTS = [
    BadInput(
        "unknown-app-grant", lambda e: ["grant", "com.example.nosuch", f"{LOCAL}:docs"], {67}, ("com.example.nosuch",)
    ),
    BadInput(
        "unknown-app-run",
        lambda e: ["run", "--app", "com.example.nosuch", "--", "true"],
        {67},
        ("com.example.nosuch",),
        mounted=True,
    ),
    BadInput("unknown-provider", lambda e: ["grant", ALPHA, "nosuchprovider:docs"], {67}, ("nosuchprovider",)),
    BadInput("unknown-grant-revoke", lambda e: ["revoke", ALPHA, "999999"], {65, 67}),
    BadInput(
        "provider-dir-missing", lambda e: ["provider", "add", "ghost", e.root / "no-such-dir"], {66}, ("no-such-dir",)
    ),
    BadInput(
        "grant-missing-path", lambda e: ["grant", ALPHA, f"{LOCAL}:docs/no-such-file.txt"], {66}, ("no-such-file.txt",)
    ),
    BadInput("grant-dotdot-escape", lambda e: ["grant", ALPHA, f"{LOCAL}:../escape"], {65}),
    BadInput("grant-nested-escape", lambda e: ["grant", ALPHA, f"{LOCAL}:docs/../../escape"], {65}),
    BadInput("grant-malformed-nocolon", lambda e: ["grant", ALPHA, "nocolon"], {64, 65}, ("nocolon", "provider", ":")),
    BadInput("unknown-option", lambda e: ["app", "list", "--no-such-option"], {64}, ("--no-such-option",)),
    BadInput("mount-missing-mountpoint", lambda e: ["mount", e.root / "nowhere"], {73}, ("nowhere",)),
    BadInput("mount-on-file", lambda e: ["mount", e.root / "plainfile"], {73}, ("plainfile",), prepare=_mount_on_file),
    BadInput("run-without-daemon", lambda e: ["run", "--app", ALPHA, "--", "true"], {69}),
    BadInput(
        "agent-script-unknown-key",
        lambda e: ["agent", "--script", e.root / "agent.json", "--count", "1"],
        {65},
        ("chose", "choose"),
        mounted=True,
        prepare=_mistyped_agent_script,
    ),
    BadInput(
        "before-init-missing-state-dir", lambda e: ["app", "list"], {78}, state=lambda e: e.root / "never-initialised"
    ),
    BadInput("before-init-empty-state-dir", lambda e: ["provider", "list"], {78}, state=_empty_state_dir),
    BadInput(
        "before-init-grant",
        lambda e: ["grant", ALPHA, f"{LOCAL}:docs"],
        {78},
        state=lambda e: e.root / "never-initialised",
    ),
    # Issue 19: codes that disagreed with docs/CLI.md.
    BadInput(
        "scope-exec-outside-mount",
        lambda e: ["scope", "exec", e.root, "--", "true"],
        {69},
        ("not inside a ScopeFS mount",),
    ),
    BadInput(
        "scope-exec-from-owner-shell",
        lambda e: ["scope", "exec", e.prov(ALPHA, LOCAL, "docs/report.txt"), "--", "true"],
        {77},
        ("scopefs run --app",),
        mounted=True,
        prepare=lambda e: e.grant(ALPHA, f"{LOCAL}:docs/report.txt"),
    ),
    BadInput("unmount-not-mounted", lambda e: ["unmount", e.root], {69}, ("not mounted",)),
    BadInput("status-without-daemon", lambda e: ["status"], {69}, ("no daemon",)),
    BadInput("app-add-existing", lambda e: ["app", "add", ALPHA], {73}, ("already exists",)),
    BadInput("provider-add-existing", lambda e: ["provider", "add", LOCAL, e.root], {73}, ("already exists",)),
    BadInput("events-unknown-app", lambda e: ["events", "--app", "com.example.nosuch"], {67}, ("com.example.nosuch",)),
    BadInput("events-bad-since", lambda e: ["events", "--since", "yesterday"], {64}, ("--since",)),
    BadInput("events-negative-limit", lambda e: ["events", "--limit", "-1"], {64}, ("--limit",)),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=lambda c: c.name)
def test_bad_input_exit_codes(env, case):
    """SPEC S34, CLI.md exit codes: each bad input gets its documented exit
    code and a clear message on stderr, without a crash."""
    case.prepare(env)
    if case.mounted:
        env.mount()
    state = case.state(env) if case.state else None
    p = env.cli(*case.argv(env), expect=None, state=state)
    assert_clean_error(p, case.codes, case.mentions)


def test_failed_commands_change_nothing(env):
    """SPEC S34: rejected grants leave the isolation layer unchanged."""
    before = env.cli("privacy", "--json").stdout
    for spec in (f"{LOCAL}:../escape", f"{LOCAL}:docs/no-such-file.txt", "nosuchprovider:docs"):
        assert env.cli("grant", ALPHA, spec, expect=None).returncode != 0
    assert env.cli("privacy", "--json").stdout == before


def test_mount_on_already_mounted_mountpoint(env):
    """SPEC S34, CLI.md 73: mounting again on a live mountpoint fails with 73
    and leaves the existing mount serving."""
    env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    env.mount()
    p = env.cli(*env.mount_args(), expect=None, timeout=MOUNT_TIMEOUT)
    assert_clean_error(p, {73})
    assert mount_count(env.mnt) == 1, "a second mount was stacked on the live one"
    got = env.app_json(
        ALPHA,
        "start_accessing(sys.argv[1])\nemit(read_text(sys.argv[1])[:11])",
        env.prov(ALPHA, LOCAL, "docs/report.txt"),
    )
    assert got == "report line"


@pytest.mark.sqlite_store(ON_THE_FILE)
def test_corrupt_database_is_refused_and_kept(env):
    """SPEC S34, CLI.md 78: a corrupt database gets exit 78 with a message,
    and the file is neither replaced nor modified (no lost data)."""
    db = env.state / "scopefs.sqlite"
    assert db.is_file(), f"expected the database at {db}; state dir has {sorted(os.listdir(env.state))}"
    for suffix in ("-wal", "-shm"):
        side = db.with_name(db.name + suffix)
        if side.exists():
            side.unlink()
    garbage = b"this is not an SQLite database\n" * 200
    db.write_bytes(garbage)
    inode = db.stat().st_ino
    for args in (["app", "list"], ["grant", ALPHA, f"{LOCAL}:docs"], ["init"]):
        p = env.cli(*args, expect=None)
        assert_clean_error(p, {78})
    assert db.read_bytes() == garbage
    assert db.stat().st_ino == inode, "database file was replaced"


def test_events_since_takes_ages_and_times(env):
    """Issue 19, SPEC S29: `--since` takes -N, Ns, Nm, Nh, Nd and ISO 8601
    (with a fraction): each recent form shows the grant just made; a time in
    the future shows nothing."""
    env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    for since in ("-60", "60s", "5m", "2h", "1d", "2000-01-01T00:00:00Z", "2000-01-01T00:00:00.250Z"):
        p = env.cli("events", "--kind", "grant", "--since", since, expect=None)
        assert p.returncode == 0, f"--since {since}\n" + describe(p)
        assert "docs/report.txt" in p.stdout, f"--since {since} hid the grant\n" + describe(p)
    future = env.cli("events", "--since", "2100-01-01T00:00:00Z")
    assert future.stdout.strip() == "", describe(future)


def test_events_follow_with_limit_zero_prints_only_new_events(env):
    """Issue 19, SPEC S29: `events --follow --limit 0` prints what happens
    from now on, not the history."""
    env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    follower = subprocess.Popen(
        env.cli_argv("events", "--follow", "--limit", "0", "--json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env.base_env,
    )
    try:
        # It sleeps between looks at the log once it has taken "now" as its start.
        wait_for("`events --follow` to start following", lambda: sleeping(follower.pid), timeout=10, interval=0.02)
        env.grant(ALPHA, f"{LOCAL}:docs/secret.txt")
        deadline = time.monotonic() + 10
        out = b""
        while time.monotonic() < deadline and b"secret.txt" not in out:
            ready, _, _ = select.select([follower.stdout], [], [], 0.2)
            if ready:
                out += os.read(follower.stdout.fileno(), 65536)
        text = out.decode()
    finally:
        follower.terminate()
        follower.wait(timeout=10)
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert lines, "nothing printed after a new grant"
    assert all("report.txt" not in (e.get("path") or "") for e in lines), f"history was printed: {lines}"
    assert any((e.get("path") or "").endswith("secret.txt") for e in lines), lines


def test_help_speaks_to_users_not_to_the_spec():
    """Issue 31, point 6: `--help` of every command says what it does, not
    which SPEC statement it implements (it said "SPEC S5" and the like)."""
    top = subprocess.run([str(scopefs_bin()), "--help"], capture_output=True, text=True, timeout=30)
    commands = re.findall(r"^  ([a-z]+)\s", top.stdout, re.M)
    assert len(commands) > 10, top.stdout
    for command in ["", *commands]:
        p = subprocess.run(
            [str(scopefs_bin()), *([command] if command else []), "--help"], capture_output=True, text=True
        )
        assert "SPEC S" not in p.stdout, (command, p.stdout)
