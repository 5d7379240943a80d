"""Attacks by a hostile app process, one test per row of issue 14 and of SPEC S33's matrix."""

import json
import re
import time

from doc_scope_helpers import poll
from scopefs_harness import ALPHA, LOCAL, describe

# --- Finding 7: the audit trail ---
# SPEC S29 (amended): no app can flush the trail — repeated identical events
# are coalesced and rotation drops starts and stops before grants, revokes,
# restores, denials and leaks. S29/S33a: text output escapes control
# characters in names, JSON keeps them exact.

AUDIT_ITEM = "docs/report.txt"
FLOOD_STOPS = 100_001        # one more than the event log's capacity
IMPORTANT_KINDS = "grant,revoke,restore,denial"

# Issues FLOOD_STOPS unbalanced stops on argv[1] in one process, as fast as
# setxattr goes; reports how long it took.
FLOOD_SNIPPET = """
p, n = sys.argv[1], int(sys.argv[2])
started = time.monotonic()
for _ in range(n):
    os.setxattr(p, "user.scopefs.stop", b"")
emit({"seconds": time.monotonic() - started})
"""


def events_json(env, *args) -> list[dict]:
    """`scopefs events --json ARGS...`, one object per line."""
    p = env.cli("events", "--json", *args)
    try:
        return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise AssertionError(f"events --json printed a non-JSON line ({exc})\n" + describe(p))


def occurrences(event: dict) -> int:
    """How many identical events one row stands for (1 where not coalesced)."""
    return event.get("occurrences", 1)


def test_unbalanced_stop_flood_neither_evicts_nor_floods_the_trail(env):
    """SPEC S29 (amended), issue 14 finding 7: after a grant, a revoke, a
    denial (EPERM while revoked) and a restore, one app process issues
    100,001 unbalanced stops — one more than the log's capacity. The grant,
    revoke, restore and denial events are all still in `scopefs events
    --json`, and the stops are there too, coalesced into a few rows whose
    `occurrences` add up to 100,001 (text output shows them as ×N)."""
    grant = env.grant(ALPHA, f"{LOCAL}:{AUDIT_ITEM}")
    env.mount()
    target = env.prov(ALPHA, LOCAL, AUDIT_ITEM)
    env.revoke(ALPHA, grant)
    denied = env.app_json(ALPHA, "emit({'pid': os.getpid(), 'read': attempt(read_bytes, sys.argv[1])})", target)
    assert denied["read"] == "EPERM", denied
    env.restore(ALPHA, grant)

    flood = env.app_json(ALPHA, "import time\n" + FLOOD_SNIPPET, target, FLOOD_STOPS)

    # The recorder writes in batches every 100 ms: wait until the newest
    # stop row stops changing. (Only the newest: printing 100,000 rows as
    # JSON takes the old binary longer than the CLI timeout.)
    last = [None]

    def settled(newest: list[dict]) -> bool:
        done = bool(newest) and newest == last[0]
        last[0] = newest
        return done
    poll(lambda: events_json(env, "--kind", "unbalanced-stop", "--limit", "1"), settled,
         timeout=15, what="the newest unbalanced stop")

    important = events_json(env, "--kind", IMPORTANT_KINDS, "--app", ALPHA)
    kinds = [e["kind"] for e in important if e.get("grant") == int(grant) or e["kind"] == "denial"]
    assert kinds == ["grant", "revoke", "denial", "restore"], (
        f"after {FLOOD_STOPS} unbalanced stops ({flood['seconds']:.1f} s) the log holds only "
        f"{kinds} of grant, revoke, denial, restore")
    denial = next(e for e in important if e["kind"] == "denial")
    assert denial["pid"] == denied["pid"] and denial["errnoName"] == "EPERM", denial

    rows = events_json(env, "--kind", "unbalanced-stop", "--limit", "1000")
    assert len(rows) <= 100, f"{FLOOD_STOPS} identical unbalanced stops took {len(rows)}+ rows: not coalesced"
    recorded = sum(occurrences(e) for e in rows)
    assert recorded == FLOOD_STOPS, f"{recorded} of {FLOOD_STOPS} unbalanced stops recorded in {len(rows)} rows"
    assert all(e["path"].endswith(AUDIT_ITEM) and e["app"] == ALPHA for e in rows), rows[:3]

    text = env.cli("events", "--kind", "unbalanced-stop").stdout
    assert re.search(r"×\d{4,}", text), f"no ×N on coalesced stops in events text:\n{text[:2000]}"


# A name that, printed raw, forges a second event line (a newline, a fake
# timestamp, tabs between fake fields) and turns the terminal red.
FORGED_NAME = "x\n2030-01-01T00:00:00Z\tgrant\tcom.other.app\t-\tforged\x1b[31m"
FORGED_ESCAPED = r"x\n2030-01-01T00:00:00Z\tgrant\tcom.other.app\t-\tforged\x1b[31m"


def raw_controls(text: str) -> list[str]:
    """Control characters in text other than the newlines and tabs that
    separate lines and fields: C0, DEL, C1."""
    return sorted({repr(c) for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0})


def assert_escaped(what: str, text: str) -> None:
    assert FORGED_ESCAPED in text, f"{what}: the name is not shown escaped (as `ls -b` would):\n{text!r}"
    assert not raw_controls(text), f"{what}: raw control characters {raw_controls(text)} in:\n{text!r}"
    forged = [line for line in text.splitlines() if line.startswith("2030-01-01")]
    assert not forged, f"{what}: the name forged a line: {forged!r}\nwhole output: {text!r}"


def test_control_characters_in_names_are_escaped_in_text_and_exact_in_json(env):
    """SPEC S29 (amended), S33a, issue 14 finding 7: a provider file whose
    name holds a newline, tabs, a fake timestamp and an ESC sequence is
    opened for an app (grant + reference), the app starts accessing it and
    exits without stopping (a leak), and the grant is revoked. The text
    output of `events`, `status`, `privacy`, `query` and `revoke` shows the
    name escaped (`\\n`, `\\t`, `\\x1b`): no raw control character, no
    forged line. `--json` keeps the exact name."""
    (env.backing(LOCAL) / FORGED_NAME).write_bytes(b"forged\n")
    opened = env.cli("open", ALPHA, f"{LOCAL}:{FORGED_NAME}").stdout
    grant = re.search(r"grant (\d+)", opened).group(1)
    env.mount()
    leaked = env.app_json(ALPHA, "emit(outcome(lambda: os.getxattr(sys.argv[1], 'user.scopefs.start').decode()))",
                          env.prov(ALPHA, LOCAL, FORGED_NAME))
    assert leaked == {"ok": "1"}, leaked
    leaks = poll(lambda: events_json(env, "--kind", "leak"), bool, what="the leak event")
    assert leaks, "no leak event after the app exited in scope"

    outputs = {
        "events": env.cli("events").stdout,
        "status": env.cli("status").stdout,
        "privacy": env.cli("privacy", ALPHA).stdout,
        "query": env.cli("query", "--app", ALPHA).stdout,
        "revoke": env.cli("revoke", ALPHA, grant).stdout,
    }
    for what, text in outputs.items():
        assert_escaped(what, text)

    exact_path = f"/{ALPHA}/Providers/{LOCAL}/{FORGED_NAME}"
    logged = events_json(env, "--app", ALPHA)
    assert {e["kind"] for e in logged if e.get("path") == exact_path} >= {"grant", "leak", "revoke"}, logged
    privacy = json.loads(env.cli("privacy", ALPHA, "--json").stdout)
    assert [row["path"] for row in privacy] == [FORGED_NAME], privacy
    query = json.loads(env.cli("query", "--app", ALPHA, "--json").stdout)
    assert any(result["url"].endswith("/" + FORGED_NAME) for result in query), query
