"""One JSON style for every `--json` (issue 19, docs/CLI.md "JSON output"):
every command that has `--json` (all that read or change state) prints
valid JSON with sorted camelCase keys, times as ISO 8601 UTC with a
fraction and `Z`, and no escaped slashes. One table row per command; each
runs in a fresh world and its output goes through the same checks."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from doc_scope_helpers import mount as mount_strict
from doc_scope_helpers import wait_events
from scopefs_harness import (
    ALPHA,
    BETA,
    DRIVE,
    LOCAL,
    MOUNT_TIMEOUT,
    RUNNERS,
    Env,
    describe,
    mount_count,
    wait_for_agent,
)

REPORT = "docs/report.txt"
CAMEL = re.compile(r"^[a-z][A-Za-z0-9]*$")
ISO_UTC_FRACTION = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$")


def is_time_key(key: str) -> bool:
    return key in ("time", "lastTime") or key.endswith("At") or key.endswith("Time")


def check_value(value, path: str, times: list[str], problems: list[str]) -> None:
    """camelCase keys in sorted order, and every time an ISO 8601 UTC string
    with a fraction; `times` collects the paths of the times seen."""
    if isinstance(value, dict):
        keys = list(value)
        if keys != sorted(keys):
            problems.append(f"{path}: keys not sorted: {keys}")
        for key, item in value.items():
            if not CAMEL.match(key):
                problems.append(f"{path}.{key}: not camelCase")
            if is_time_key(key) and item is not None:
                times.append(f"{path}.{key}")
                if not (isinstance(item, str) and ISO_UTC_FRACTION.match(item)):
                    problems.append(f"{path}.{key}: {item!r} is not ISO 8601 UTC with a fraction")
            check_value(item, f"{path}.{key}", times, problems)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_value(item, f"{path}[{index}]", times, problems)


@dataclass
class JSONCase:
    name: str
    # argv after `scopefs --state STATE`, given what prepare returned
    argv: Callable[[Env, dict], list]
    prepare: Callable[[Env], dict] = field(default=lambda env: {})
    # one JSON value per line (events, streams) instead of one document
    lines: bool = False
    # times that must be present (so the time check bites)
    times: tuple[str, ...] = ()
    # runs the command some other way (as an app, in the background) -> stdout
    run: Callable[[Env, list], str] | None = None


def _mounted(env: Env, ctx: dict | None = None) -> dict:
    env.mount()
    return ctx or {}


def _granted(env: Env) -> dict:
    return {"grant": env.grant(ALPHA, f"{LOCAL}:{REPORT}")}


def _revoked(env: Env) -> dict:
    ctx = _granted(env)
    env.revoke(ALPHA, ctx["grant"])
    return ctx


def _container_file(env: Env) -> dict:
    documents = env.state / "containers" / ALPHA / "Documents"
    documents.mkdir(parents=True, exist_ok=True)
    (documents / "draft.txt").write_text("a draft\n")
    return {}


def _extra_provider_dir(env: Env) -> dict:
    (env.root / "extra").mkdir()
    return {}


def _leak(env: Env) -> dict:
    """An app process that started a scope and exited: a leak (SPEC S11),
    listed in `status --json` recentLeaks (S30) and `events --json` (S29)."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    mount_strict(env)
    got = env.app_json(
        ALPHA,
        'os.getxattr(sys.argv[1], "user.scopefs.start"); emit({"pid": os.getpid()})',
        env.prov(ALPHA, LOCAL, REPORT),
    )
    assert wait_events(env, lambda e: e.get("pid") == got["pid"], kind="leak", app=ALPHA)
    return {}


def _fault_rule(env: Env) -> dict:
    env.mount()
    env.cli("fault", "add", "--op", "read", "--errno", "EIO", "--path", "Providers/local/docs/*")
    return {}


def _scenario(env: Env) -> dict:
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    env.mount()
    scenario = env.root / "scenario.yaml"
    scenario.write_text("name: json\napp: com.example.alpha\nexpect:\n  exit: 0\n")
    return {"scenario": scenario}


def _as_app(env: Env, argv: list) -> str:
    p = subprocess.run(
        env.run_argv(ALPHA, [env.bin, *map(str, argv)]), capture_output=True, text=True, env=env.base_env, timeout=60
    )
    assert p.returncode == 0, describe(p)
    return p.stdout


def _bookmark(env: Env) -> dict:
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    env.mount()
    token = _as_app(env, ["bookmark", "create", env.prov(ALPHA, LOCAL, REPORT)]).strip()
    return {"token": token}


def _first_line(env: Env, argv: list) -> str:
    """A stream (`--follow`): its first line, then the process is stopped."""
    popen = subprocess.Popen(
        env.cli_argv(*argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env.base_env,
        start_new_session=True,
    )
    try:
        line = popen.stdout.readline()
    finally:
        popen.kill()
        popen.wait(timeout=10)
    assert line.strip(), f"{argv}: no line\n{popen.stderr.read()}"
    return line


def _agent(env: Env, argv: list) -> str:
    """`agent --json` answering one pick request of an app."""
    script = env.root / "agent.json"
    script.write_text(json.dumps({"steps": [{"choose": [f"{LOCAL}:{REPORT}"]}]}))
    agent = subprocess.Popen(
        env.cli_argv(*argv, "--script", script, "--count", "1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env.base_env,
        start_new_session=True,
    )
    try:
        wait_for_agent(agent.pid)
        _as_app(env, ["pick", "--request"])
        out, err = agent.communicate(timeout=30)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert agent.returncode == 0, err
    return out


def _mount_json(env: Env, argv: list) -> str:
    p = env.cli(*argv, timeout=MOUNT_TIMEOUT)
    env.mounted = True
    env._record_daemon()
    return p.stdout


def _unmount_json(env: Env, argv: list) -> str:
    p = env.cli(*argv)
    assert not mount_count(env.mnt), describe(p)
    env.mounted = False
    env._check_daemon_exit(problems := [])
    assert not problems, problems
    return p.stdout


CASES = [
    JSONCase("init", lambda e, c: ["init", "--json"]),
    JSONCase(
        "provider-add",
        lambda e, c: ["provider", "add", "extra", e.root / "extra", "--name", "Extra", "--json"],
        prepare=_extra_provider_dir,
    ),
    JSONCase("provider-list", lambda e, c: ["provider", "list", "--json"]),
    JSONCase("provider-remove", lambda e, c: ["provider", "remove", DRIVE, "--json"]),
    JSONCase("app-add", lambda e, c: ["app", "add", "com.example.gamma", "--name", "Gamma", "--json"]),
    JSONCase("app-list", lambda e, c: ["app", "list", "--json"]),
    JSONCase("app-remove", lambda e, c: ["app", "remove", BETA, "--json"]),
    JSONCase("grant", lambda e, c: ["grant", ALPHA, f"{LOCAL}:{REPORT}", "--json"], times=("grantedAt",)),
    JSONCase("revoke", lambda e, c: ["revoke", ALPHA, c["grant"], "--json"], prepare=_granted, times=("grantedAt",)),
    JSONCase("restore", lambda e, c: ["restore", ALPHA, c["grant"], "--json"], prepare=_revoked, times=("grantedAt",)),
    JSONCase("forget", lambda e, c: ["forget", ALPHA, c["grant"], "--json"], prepare=_granted, times=("grantedAt",)),
    JSONCase("privacy", lambda e, c: ["privacy", "--json"], prepare=_granted, times=("grantedAt",)),
    JSONCase("open", lambda e, c: ["open", ALPHA, f"{LOCAL}:{REPORT}", "--json"], times=("grantedAt",)),
    JSONCase("import", lambda e, c: ["import", ALPHA, f"{LOCAL}:{REPORT}", "--json"]),
    JSONCase(
        "export",
        lambda e, c: ["export", ALPHA, "Documents/draft.txt", f"{LOCAL}:work", "--json"],
        prepare=_container_file,
    ),
    JSONCase(
        "move",
        lambda e, c: ["move", ALPHA, "Documents/draft.txt", f"{LOCAL}:work", "--json"],
        prepare=_container_file,
        times=("grantedAt",),
    ),
    JSONCase(
        "query",
        lambda e, c: ["query", "--app", ALPHA, "--json"],
        prepare=lambda e: (e.cli("open", ALPHA, f"{LOCAL}:{REPORT}"), _container_file(e))[1],
    ),
    JSONCase(
        "query-follow",
        lambda e, c: ["query", "--app", ALPHA, "--follow", "--json"],
        prepare=lambda e: (e.cli("open", ALPHA, f"{LOCAL}:{REPORT}"), {})[1],
        lines=True,
        run=_first_line,
    ),
    JSONCase("events", lambda e, c: ["events", "--json"], prepare=_leak, lines=True, times=("time",)),
    JSONCase(
        "events-follow",
        lambda e, c: ["events", "--follow", "--json"],
        prepare=_granted,
        lines=True,
        times=("time",),
        run=_first_line,
    ),
    JSONCase("status", lambda e, c: ["status", "--json"], prepare=_leak, times=("time",)),
    JSONCase("mount", lambda e, c: [*e.mount_args(), "--json"], run=_mount_json),
    JSONCase("unmount", lambda e, c: ["unmount", e.mnt, "--json"], prepare=_mounted, run=_unmount_json),
    JSONCase(
        "fault-add",
        lambda e, c: ["fault", "add", "--op", "read", "--errno", "EIO", "--path", "Providers/local/docs/*", "--json"],
        prepare=_mounted,
    ),
    JSONCase("fault-list", lambda e, c: ["fault", "list", "--json"], prepare=_fault_rule),
    JSONCase("fault-clear", lambda e, c: ["fault", "clear", "--all", "--json"], prepare=_fault_rule),
    JSONCase(
        "bookmark-create",
        lambda e, c: ["bookmark", "create", e.prov(ALPHA, LOCAL, REPORT), "--json"],
        prepare=lambda e: (e.grant(ALPHA, f"{LOCAL}:{REPORT}"), _mounted(e))[1],
        run=_as_app,
    ),
    JSONCase(
        "bookmark-resolve", lambda e, c: ["bookmark", "resolve", c["token"], "--json"], prepare=_bookmark, run=_as_app
    ),
    JSONCase("agent", lambda e, c: ["agent", "--json"], prepare=_mounted, lines=True, run=_agent),
    JSONCase("test", lambda e, c: ["test", c["scenario"], "--no-sandbox", "--json", "--", "true"], prepare=_scenario),
]


@pytest.mark.parametrize(
    "case",
    # `scopefs test` is the SQLite store's alone (docs/CLI.md "A fleet").
    [pytest.param(c, marks=pytest.mark.sqlite_store(RUNNERS)) if c.name == "test" else c for c in CASES],
    ids=lambda c: c.name,
)
def test_every_json_output_has_one_style(env, case):
    """Issue 19: valid JSON, sorted camelCase keys only, times ISO 8601 UTC
    with a fraction and Z, no `\\/`, for each command's `--json`."""
    ctx = case.prepare(env)
    argv = case.argv(env, ctx)
    if case.run:
        out = case.run(env, argv)
    else:
        p = env.cli(*argv, expect=None)
        assert p.returncode == 0, describe(p)
        out = p.stdout
    assert out.strip(), f"{case.name}: no output"
    assert "\\/" not in out, f"{case.name}: escaped slash in {out!r}"
    try:
        values = [json.loads(line) for line in out.splitlines() if line.strip()] if case.lines else [json.loads(out)]
    except json.JSONDecodeError as exc:
        raise AssertionError(f"{case.name}: not JSON ({exc}): {out!r}")
    problems: list[str] = []
    times: list[str] = []
    for value in values:
        check_value(value, "$", times, problems)
    assert not problems, f"{case.name}:\n" + "\n".join(problems) + f"\n{out}"
    for key in case.times:
        assert any(path.endswith("." + key) for path in times), f"{case.name}: no {key} in {out}"


def test_query_keys_are_the_documented_aliases(env):
    """SPEC S28 (amended), docs/CLI.md: `query --json` uses camelCase
    names, one per NSMetadataItem attribute it stands for."""
    env.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    rows = json.loads(env.cli("query", "--app", ALPHA, "--json").stdout)
    assert rows and set(rows[0]) == {"url", "urlInLocalContainer", "isExternalDocument", "containerDisplayName"}, rows


def test_display_names_in_privacy_status_and_events(env):
    """Issue 19: `privacy`, `status` and `events` show an app with its
    display name (`app add --name`): `com.example.alpha (Alpha)` in text,
    `appName` in JSON; an app added without a name shows its id alone."""
    env.cli("app", "add", "com.example.plain")
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    env.grant("com.example.plain", f"{LOCAL}:docs/secret.txt")
    labelled = f"{ALPHA} (Alpha)"
    privacy = env.cli("privacy").stdout
    assert labelled in privacy and "com.example.plain\t" in privacy and "com.example.plain (" not in privacy, privacy
    rows = {row["app"]: row for row in json.loads(env.cli("privacy", "--json").stdout)}
    assert rows[ALPHA]["appName"] == "Alpha" and "appName" not in rows["com.example.plain"], rows
    events = env.cli("events", "--kind", "grant").stdout
    assert f"\t{labelled}\t" in events and "\tcom.example.plain\t" in events, events
    assert any(
        json.loads(line).get("appName") == "Alpha"
        for line in env.cli("events", "--kind", "grant", "--json").stdout.splitlines()
    ), events

    env.mount()
    holder = env.app_session(ALPHA, 'step({"pid": os.getpid()})')
    pid = holder.recv()["pid"]
    status = env.cli("status").stdout
    assert any(str(pid) in line and labelled in line for line in status.splitlines()), status
    processes = json.loads(env.cli("status", "--json").stdout)["daemon"]["processes"]
    assert [p.get("appName") for p in processes if p["pid"] == pid] == ["Alpha"], processes
    holder.send()
    assert holder.finish() == 0, holder.stderr()
