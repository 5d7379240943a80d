"""Helpers for test_scopes.py and test_documents.py (SPEC S6-S12, S17-S30).

They only build on the shared harness (scopefs_harness.Env and friends):
mounting with explicit scope options, polling the event log and status,
bookmarks and their resolution from app processes, and the inspect view.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable

from scopefs_harness import (
    APP_TIMEOUT,
    DAEMON_EXIT_TIMEOUT,
    Env,
    describe,
    mount_count,
    run_bounded,
    wait_for,
    wait_for_exit,
)

POLL_TIMEOUT = 5.0  # events are flushed every ~100 ms; host renames are seen within 1-2 s

XATTR_START = "user.scopefs.start"
XATTR_STOP = "user.scopefs.stop"
XATTR_SCOPE = "user.scopefs.scope"

# An app snippet that reads an extended attribute and reports it (or the errno name).
GETXATTR = "emit(outcome(lambda: os.getxattr(sys.argv[1], sys.argv[2]).decode()))"


# ---------------------------------------------------------------------------
# mounting


def mount(env: Env, scopes: str = "strict", budget: int | None = None, open_files: str | None = None) -> None:
    """`scopefs mount MNT --scopes SCOPES [--scope-budget N] [--open-files X]`
    through env.mount() (readiness, mountinfo and daemon bookkeeping stay the
    harness's). The harness mounts lenient by default, so the scope mode is
    always given explicitly here."""
    args: list = ["mount", env.mnt, "--scopes", scopes]
    if budget is not None:
        args += ["--scope-budget", str(budget)]
    if open_files:
        args += ["--open-files", open_files]
    env.mount_args = lambda *a, **k: list(args)  # instance attribute: this Env only
    env.mount()
    daemon = status(env).get("daemon", {})
    assert daemon.get("scopes") == scopes, f"mounted with --scopes {scopes} but status says {daemon}"
    if budget is not None:
        assert daemon.get("scopeBudget") == budget, f"mounted with --scope-budget {budget} but status says {daemon}"


def unmount(env: Env) -> None:
    """`scopefs unmount MNT`: the mount is gone when it returns and the daemon
    exits with status 0 (CLI.md). env.mount() mounts again with the same options."""
    old = env.daemon.pid if env.daemon else None
    p = env.cli("unmount", env.mnt)
    assert mount_count(env.mnt) == 0, "`scopefs unmount` returned 0 but the mount is still there\n" + describe(p)
    env.mounted = False
    if old is not None:
        how, wstatus = wait_for_exit(old, DAEMON_EXIT_TIMEOUT)
        assert how != "alive", f"daemon {old} still running after `scopefs unmount`"
        if how == "exited":
            assert os.WIFEXITED(wstatus) and os.WEXITSTATUS(wstatus) == 0, (
                f"daemon {old} exited with {os.waitstatus_to_exitcode(wstatus)} on unmount"
            )
        env.daemon = None


def remount(env: Env) -> None:
    """Unmount, then mount again with the same options: a daemon restart (SPEC S26)."""
    unmount(env)
    env.mount()


# ---------------------------------------------------------------------------
# polling, events, status


def events(env: Env, kind: str | None = None, app: str | None = None) -> list[dict]:
    """`scopefs events [--kind K] [--app A] --json`: one JSON object per line (SPEC S29)."""
    args = ["events", "--json"]
    if kind:
        args += ["--kind", kind]
    if app:
        args += ["--app", app]
    p = env.cli(*args)
    out = []
    for line in p.stdout.splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise AssertionError(f"events --json printed a non-JSON line ({exc}): {line!r}\n" + describe(p))
    return out


def wait_events(
    env: Env,
    match: Callable[[dict], bool],
    kind: str | None = None,
    app: str | None = None,
    count: int = 1,
    timeout: float = POLL_TIMEOUT,
) -> list[dict]:
    """Events (filtered by kind/app) that satisfy match, polled until at
    least `count` of them are there; fails after `timeout`."""
    return wait_for(
        f"{count} matching {kind or 'any'} event(s) of {app or 'any app'}",
        lambda: [e for e in events(env, kind, app) if match(e)],
        lambda got: len(got) >= count,
        timeout,
    )


def status(env: Env) -> dict:
    """`scopefs status --json` (SPEC S30)."""
    p = env.cli("status", "--json")
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"status --json is not JSON ({exc})\n" + describe(p))


def status_process(env: Env, pid: int) -> dict | None:
    """The entry of daemon.processes for pid, or None."""
    for proc in status(env).get("daemon", {}).get("processes", []):
        if proc.get("pid") == pid:
            return proc
    return None


# ---------------------------------------------------------------------------
# documents and bookmarks


def open_document(env: Env, app: str, spec: str, read_only: bool = False) -> tuple[str, str]:
    """`scopefs open APP PROVIDER:REL`; returns (grant id, container-relative
    reference path) from its `grant N<TAB>reference Container/Documents/NAME`."""
    p = env.cli("open", app, spec, *(["--read-only"] if read_only else []))
    fields = p.stdout.strip().split("\t")
    assert len(fields) == 2 and fields[0].startswith("grant ") and fields[1].startswith("reference "), (
        "open did not print `grant N<TAB>reference PATH`\n" + describe(p)
    )
    return fields[0].split()[1], fields[1].split(" ", 1)[1]


def bookmark(env: Env, app: str, path: str, read_only: bool = False, sandbox: bool = False) -> str:
    """A bookmark of path, asked for by an app process of app (SPEC S25)."""
    name = "user.scopefs.bookmark" + ("-read-only" if read_only else "")
    got = env.app_json(app, GETXATTR, path, name, sandbox=sandbox)
    assert "ok" in got, f"bookmark of {path} for {app}: {got}"
    token = got["ok"]
    assert token and token.isascii() and token.isprintable() and " " not in token, repr(token)
    return token


def resolve(env: Env, app: str, token: str, sandbox: bool = False) -> subprocess.CompletedProcess:
    """`scopefs bookmark resolve TOKEN --json` run as an app process of app
    (SPEC S26): in the sandbox, the `scopefs` on its PATH, which asks the
    app endpoint (docs/CLI.md "scopefs run")."""
    if sandbox:
        return env.run_app(app, ["scopefs", "bookmark", "resolve", token, "--json"], sandbox=True)
    return env.run_app(app, [env.bin, "--state", env.state, "bookmark", "resolve", token, "--json"])


def resolve_ok(env: Env, app: str, token: str, sandbox: bool = False) -> dict:
    p = resolve(env, app, token, sandbox)
    assert p.returncode == 0, "bookmark resolve failed\n" + describe(p)
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"bookmark resolve --json is not JSON ({exc})\n" + describe(p))


def tamper(token: str, where: float = 0.5) -> str:
    """Flip one bit of one character: swap the case of the first letter at or
    after the relative position `where` (ASCII case differs by bit 0x20)."""
    i = int(len(token) * where)
    while i < len(token) and not token[i].isalpha():
        i += 1
    assert i < len(token), f"no letter to flip in {token!r}"
    return token[:i] + token[i].swapcase() + token[i + 1 :]


def inspect_json(env: Env, code: str, *args):
    """A snippet run by the mount owner's plain process (inspect view, SPEC S4)."""
    return env.host_json(code, *map(str, args))


def inspect_readlink(env: Env, path: str):
    return inspect_json(env, "emit(outcome(os.readlink, sys.argv[1]))", path)


def ls_l(env: Env, directory: str) -> subprocess.CompletedProcess:
    """`ls -l DIR` from the test's own user, not an app process (SPEC S4)."""
    p = run_bounded(["ls", "-l", directory], APP_TIMEOUT, env.base_env, what="ls -l")
    assert p.returncode == 0, "ls -l failed in the inspect view\n" + describe(p)
    return p


def container_host(env: Env, app: str, rel: str = "") -> str:
    """STATE/containers/APP/REL: the container on the host (SPEC S1, S2)."""
    p = env.state / "containers" / app
    return str(p / rel) if rel else str(p)
