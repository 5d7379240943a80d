"""Bad input at the CLI boundary: documented exit codes (docs/CLI.md), a
message on stderr, never a crash, a hang or lost data. SPEC S34."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from typing import Callable

import pytest

from scopefs_harness import ALPHA, LOCAL, MOUNT_TIMEOUT, Env, crash_markers, describe, mount_count


def assert_clean_error(p: subprocess.CompletedProcess, codes: set[int], mentions: tuple[str, ...] = ()):
    """SPEC S34: exit code in `codes`, a message on stderr (naming one of
    `mentions` if given), no Swift crash output."""
    assert p.returncode in codes, f"want exit {sorted(codes)}\n" + describe(p)
    assert p.stderr.strip(), "error without a message on stderr\n" + describe(p)
    assert not crash_markers(p.stdout + p.stderr), "crash output\n" + describe(p)
    if mentions:
        assert any(m.lower() in p.stderr.lower() for m in mentions), \
            f"stderr should name the problem (one of {mentions})\n" + describe(p)


@dataclass
class BadInput:
    name: str
    argv: Callable[[Env], list]
    codes: set[int]
    mentions: tuple[str, ...] = ()
    mounted: bool = False
    state: Callable[[Env], object] | None = None   # a different --state dir
    prepare: Callable[[Env], None] = field(default=lambda env: None)


def _mount_on_file(env):
    (env.root / "plainfile").write_text("not a directory")


def _empty_state_dir(env):
    path = env.root / "empty-state"
    path.mkdir()
    return path


BAD_INPUTS = [
    BadInput("unknown-app-grant", lambda e: ["grant", "com.example.nosuch", f"{LOCAL}:docs"], {67},
             ("com.example.nosuch",)),
    BadInput("unknown-app-run", lambda e: ["run", "--app", "com.example.nosuch", "--", "true"], {67},
             ("com.example.nosuch",), mounted=True),
    BadInput("unknown-provider", lambda e: ["grant", ALPHA, "nosuchprovider:docs"], {67},
             ("nosuchprovider",)),
    BadInput("unknown-grant-revoke", lambda e: ["revoke", ALPHA, "999999"], {65, 67}),
    BadInput("provider-dir-missing", lambda e: ["provider", "add", "ghost", e.root / "no-such-dir"], {66},
             ("no-such-dir",)),
    BadInput("grant-missing-path", lambda e: ["grant", ALPHA, f"{LOCAL}:docs/no-such-file.txt"], {66},
             ("no-such-file.txt",)),
    BadInput("grant-dotdot-escape", lambda e: ["grant", ALPHA, f"{LOCAL}:../escape"], {65}),
    BadInput("grant-nested-escape", lambda e: ["grant", ALPHA, f"{LOCAL}:docs/../../escape"], {65}),
    BadInput("grant-malformed-nocolon", lambda e: ["grant", ALPHA, "nocolon"], {64, 65},
             ("nocolon", "provider", ":")),
    BadInput("unknown-option", lambda e: ["app", "list", "--no-such-option"], {64},
             ("--no-such-option",)),
    BadInput("mount-missing-mountpoint", lambda e: ["mount", e.root / "nowhere"], {73}, ("nowhere",)),
    BadInput("mount-on-file", lambda e: ["mount", e.root / "plainfile"], {73}, ("plainfile",),
             prepare=_mount_on_file),
    BadInput("run-without-daemon", lambda e: ["run", "--app", ALPHA, "--", "true"], {69}),
    BadInput("before-init-missing-state-dir", lambda e: ["app", "list"], {78},
             state=lambda e: e.root / "never-initialised"),
    BadInput("before-init-empty-state-dir", lambda e: ["provider", "list"], {78},
             state=_empty_state_dir),
    BadInput("before-init-grant", lambda e: ["grant", ALPHA, f"{LOCAL}:docs"], {78},
             state=lambda e: e.root / "never-initialised"),
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
    got = env.app_json(ALPHA, "emit(read_text(sys.argv[1])[:11])", env.prov(ALPHA, LOCAL, "docs/report.txt"))
    assert got == "report line"


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
