"""`scopefs grant APP --from FILE` (issue 34): many grants in one
transaction, through a real mount in strict mode. Every item of the list is
granted and served at once (SPEC S13), each with its grant event (S29); a
bad line anywhere grants nothing, naming the line, with the exit code a
grant of that item alone gets (S34); an app process cannot run it (S5)."""

import json
import os
import subprocess

from doc_scope_helpers import events, mount
from scopefs_harness import ALPHA, LOCAL, REPORT_BYTES, describe

# Starts a scope on argv[1] and reads it, in the app's default sandbox.
READ_IN_SCOPE = """
path = sys.argv[1]
r = {"start": outcome(lambda: os.getxattr(path, "user.scopefs.start").decode())}
r["read"] = outcome(lambda: read_bytes(path)[:6].hex())
emit(r)
"""

# Runs `scopefs grant --from` from inside an app process.
GRANT_INSIDE = """
import subprocess
binary, state, app, listed = sys.argv[1:5]
p = subprocess.run([binary, "--state", state, "grant", app, "--from", listed], capture_output=True, text=True, timeout=30)
emit([p.returncode, p.stderr.strip()[-300:]])
"""


def privacy(env) -> list[dict]:
    return json.loads(env.cli("privacy", ALPHA, "--json").stdout)


def test_a_list_is_granted_in_one_change_and_served_at_once(env):
    """Every listed item is granted, read-only as asked; blank lines and
    comments are skipped; an item listed twice is one grant; the daemon
    serves the grants when the command returns (SPEC S13); an item already
    granted is replaced, keeping its id; each grant is an event (S29)."""
    earlier = env.grant(ALPHA, f"{LOCAL}:docs/secret.txt")
    mount(env)
    listed = env.root / "items.txt"
    listed.write_text(
        "# the reports\n"
        f"{LOCAL}:docs/report.txt\n"
        "\n"
        f"{LOCAL}:deep/a/b\n"
        f"{LOCAL}:docs/secret.txt\n"
        f"{LOCAL}:docs/./report.txt\n"
    )
    p = env.cli("grant", ALPHA, "--from", listed, "--read-only")
    assert "3 grants" in p.stdout and "2 new, 1 replaced" in p.stdout, describe(p)
    grants = {g["path"]: g for g in privacy(env)}
    assert set(grants) == {"docs/report.txt", "deep/a/b", "docs/secret.txt"}, grants
    assert all(g["access"] == "read" and g["state"] == "active" for g in grants.values()), grants
    assert str(grants["docs/secret.txt"]["grant"]) == earlier, "a replaced grant keeps its id"
    result = env.app_json(ALPHA, READ_IN_SCOPE, env.prov(ALPHA, rel="docs/report.txt"), sandbox=True)
    assert result == {"start": {"ok": "1"}, "read": {"ok": REPORT_BYTES[:6].hex()}}, result
    granted = {e["grant"] for e in events(env, kind="grant", app=ALPHA)}
    assert {g["grant"] for g in grants.values()} <= granted, granted
    # Standard input, as JSON.
    p = subprocess.run(
        env.cli_argv("grant", ALPHA, "--from", "-", "--json"), input=f"{LOCAL}:photos/p.jpg\n",
        capture_output=True, text=True, env=env.base_env, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, describe(p)
    assert [g["path"] for g in json.loads(p.stdout)] == ["photos/p.jpg"], p.stdout


def test_a_bad_line_grants_nothing_and_names_the_line(env):
    """All or nothing (SPEC S34): a missing item on line 3 is exit 66, a
    line without a provider 65, an escape 65, an unknown provider 67, the
    provider's root without --whole-provider 64, a missing list 66; the
    error names the line, and no item of the list is granted."""
    mount(env)
    listed = env.root / "items.txt"
    cases = [
        ("docs/missing.txt", 66, "does not exist"),
        ("../outside.txt", 65, "leaves provider"),
        (".", 64, "--whole-provider"),
    ]
    for bad, code, why in cases:
        listed.write_text(f"{LOCAL}:docs/report.txt\n{LOCAL}:deep/a/b\n{LOCAL}:{bad}\n{LOCAL}:photos/p.jpg\n")
        p = env.cli("grant", ALPHA, "--from", listed, expect=code)
        assert "items.txt line 3: " in p.stderr and why in p.stderr and "nothing was granted" in p.stderr, describe(p)
    listed.write_text(f"{LOCAL}:docs/report.txt\nno provider here\n")
    p = env.cli("grant", ALPHA, "--from", listed, expect=65)
    assert "line 2: expected PROVIDER:RELPATH" in p.stderr, describe(p)
    listed.write_text(f"{LOCAL}:docs/report.txt\nnope:docs\n")
    env.cli("grant", ALPHA, "--from", listed, expect=67)
    env.cli("grant", ALPHA, "--from", env.root / "no-such-list", expect=66)
    env.cli("grant", ALPHA, f"{LOCAL}:docs", "--from", listed, expect=64)
    assert privacy(env) == [], "a refused list granted something"
    assert events(env, kind="grant", app=ALPHA) == []


def test_an_app_process_cannot_grant_from_a_list(env):
    """SPEC S5: inside an app process `grant --from` exits 77 and grants nothing."""
    env.grant(ALPHA, f"{LOCAL}:docs/secret.txt")
    mount(env)
    listed = env.root / "items.txt"
    listed.write_text(f"{LOCAL}:docs/report.txt\n")
    listed.chmod(0o644)
    code, message = env.app_json(ALPHA, GRANT_INSIDE, env.bin, env.state, ALPHA, listed)
    assert code == 77 and "app process" in message, (code, message)
    assert [g["path"] for g in privacy(env)] == ["docs/secret.txt"]


def test_a_line_of_the_list_is_bytes(env):
    """SPEC S33a: a line names its item as bytes: a name that is not UTF-8
    is granted as it is, and the app reads it."""
    name = b"caf\xe9.txt"
    (env.backing(LOCAL) / "docs" / os.fsdecode(name)).write_bytes(b"bytes!\n")
    mount(env)
    listed = env.root / "items.txt"
    listed.write_bytes(b"local:docs/" + name + b"\n")
    p = env.cli("grant", ALPHA, "--from", listed)
    assert "1 grants" in p.stdout, describe(p)
    path = os.fsdecode(os.fsencode(env.prov(ALPHA, rel="docs")) + b"/" + name)
    result = env.app_json(ALPHA, READ_IN_SCOPE, path, sandbox=True)
    assert result == {"start": {"ok": "1"}, "read": {"ok": b"bytes!".hex()}}, result
