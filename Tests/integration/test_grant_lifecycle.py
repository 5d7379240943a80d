"""Grants behave as people who know Apple's APIs expect (issue 16, findings
3-6), through a real mount: a started folder scope covers a file opened
later (SPEC S9), one grant and one reference per item per app (S17, S16a),
`forget`, session grants, messages when nothing or something changed
(S16), the provider's root asks for --whole-provider, and imported copies
stay in the inbox until the app has had them (S18)."""

import json
import os
import time

from doc_scope_helpers import container_host, events, mount, wait_events
from scopefs_harness import ALPHA, LOCAL, REPORT_BYTES, describe, wait_for

REPORT = "docs/report.txt"

# Starts a scope on the folder argv[1], reads argv[2] after each line the
# test sends, and reports; the folder scope stays started throughout.
READ_UNDER_FOLDER_SCOPE = """
folder, item = sys.argv[1], sys.argv[2]
r = {"start": outcome(lambda: os.getxattr(folder, "user.scopefs.start").decode())}
r["read"] = outcome(lambda: read_bytes(item)[:6].hex())
while True:
    if step(r) == "quit":
        break
    r = {"read": outcome(lambda: read_bytes(item)[:6].hex())}
emit({})
"""


def privacy(env) -> list[dict]:
    return json.loads(env.cli("privacy", ALPHA, "--json").stdout)


def references(env) -> list[str]:
    documents = container_host(env, ALPHA, "Documents")
    return sorted(os.listdir(documents)) if os.path.isdir(documents) else []


def test_a_started_folder_scope_covers_a_file_opened_later(env):
    """Finding 3, SPEC S9: an app reads docs/report.txt under its started
    scope on the docs/ folder grant; after the user opens report.txt (a
    second, file grant) the same read still works — Apple's rule: a started
    folder scope covers everything below it. Revoking the file grant denies
    nothing the folder's started scope covers; revoking the folder then
    denies (the file's scope was never started).
    Seen failing on the old main: EPERM after the open."""
    folder = env.grant(ALPHA, f"{LOCAL}:docs")
    mount(env)
    app = env.app_session(ALPHA, READ_UNDER_FOLDER_SCOPE, env.prov(ALPHA, rel="docs"), env.prov(ALPHA, rel=REPORT))
    first = app.recv()
    expected = {"ok": REPORT_BYTES[:6].hex()}
    assert first["start"] == {"ok": "1"} and first["read"] == expected, first
    p = env.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    file_grant = p.stdout.split()[1]
    app.send()
    assert app.recv()["read"] == expected, "the folder's started scope no longer covers the file opened later"
    env.revoke(ALPHA, file_grant)
    app.send()
    assert app.recv()["read"] == expected, "revoking the file grant took away what the folder's scope covers"
    # Another process starts accessing the file itself: its own grant is
    # revoked, so the folder's active grant is the one started (SPEC S6).
    fresh = env.app_json(
        ALPHA,
        """
p = sys.argv[1]
r = {"start": outcome(lambda: os.getxattr(p, "user.scopefs.start").decode())}
r["read"] = outcome(lambda: read_bytes(p)[:6].hex())
r["stop"] = outcome(lambda: os.getxattr(p, "user.scopefs.stop").decode())
emit(r)
""",
        env.prov(ALPHA, rel=REPORT),
    )
    assert fresh == {"start": {"ok": "1"}, "read": expected, "stop": {"ok": "0"}}, fresh
    env.restore(ALPHA, file_grant)
    env.revoke(ALPHA, folder)
    app.send()
    assert app.recv()["read"] == {"errno": "EPERM"}, "no active, started grant covers the file any more"
    app.send("quit")
    assert app.finish() == 0, app.stderr()


def test_opening_an_item_again_reuses_its_grant_and_reference(env):
    """Finding 4, SPEC S17: `open` of a file the app already has reuses its
    grant and its reference document (no `report 2.txt`) and says so; a
    read-only grant becomes read-write only when read-write is asked, and
    `open --read-only` never narrows. Seen failing on the old main: a second
    reference `report 2.txt` for the same item."""
    first = env.cli("open", ALPHA, f"{LOCAL}:{REPORT}", "--read-only")
    again = env.cli("open", ALPHA, f"{LOCAL}:{REPORT}", "--read-only")
    assert again.stdout == first.stdout, describe(again)
    assert "reused" in again.stderr, describe(again)
    assert references(env) == ["report.txt"]
    upgraded = env.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    assert upgraded.stdout == first.stdout, describe(upgraded)
    assert "read-only -> read-write" in upgraded.stderr, describe(upgraded)
    narrowed = env.cli("open", ALPHA, f"{LOCAL}:{REPORT}", "--read-only")
    assert "->" not in narrowed.stderr, describe(narrowed)
    [grant] = privacy(env)
    assert grant["access"] == "read-write", grant
    assert references(env) == ["report.txt"]


def test_forget_removes_the_grant_and_its_reference_for_good(env):
    """Finding 4: `scopefs forget APP GRANT` removes the grant and the
    app's reference to its item, records a `forget` event, and the app no
    longer sees the item (ENOENT, not EPERM: nothing is granted). `forget
    APP --all` with nothing left says so and exits 0. Seen failing on the
    old main: there was no forget command (exit 64)."""
    env.grant(ALPHA, f"{LOCAL}:photos")
    p = env.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    gid = p.stdout.split()[1]
    mount(env)
    reference = env.container(ALPHA, "Documents/report.txt")
    assert env.app_json(ALPHA, "emit(outcome(os.readlink, sys.argv[1]))", reference).get("ok"), "no reference"
    forgot = env.cli("forget", ALPHA, gid)
    assert forgot.stdout.splitlines()[0].split("\t")[:2] == [gid, "forgotten"], describe(forgot)
    assert references(env) == []
    assert [g["path"] for g in privacy(env)] == ["photos"]
    got = env.app_json(
        ALPHA, "emit([attempt(os.lstat, p) for p in sys.argv[1:]])", reference, env.prov(ALPHA, rel=REPORT)
    )
    assert got == ["ENOENT", "ENOENT"], got
    wait_events(env, lambda e: e.get("kind") == "forget" and str(e.get("grant")) == gid)
    env.cli("forget", ALPHA, "--all")
    again = env.cli("forget", ALPHA, "--all")
    assert again.stdout.strip().startswith("nothing changed"), describe(again)
    assert len(again.stdout.strip().splitlines()) == 1, describe(again)
    missing = env.cli("forget", ALPHA, "999", expect=67)
    assert "no grant 999" in missing.stderr, describe(missing)


def test_changes_are_reported_and_no_change_says_so(env):
    """Finding 5, SPEC S16: `grant --read-only` on a read-write grant says
    `read-write -> read-only`; revoking a revoked grant or restoring an
    active one prints one line saying nothing changed (exit 0); granting a
    provider's root without --whole-provider exits 64 with the reason, and
    with it is granted. Seen failing on the old main: silence, and the root
    granted."""
    gid = env.grant(ALPHA, f"{LOCAL}:docs")
    narrowed = env.cli("grant", ALPHA, f"{LOCAL}:docs", "--read-only")
    assert narrowed.stdout.strip() == gid, describe(narrowed)
    assert "read-write -> read-only" in narrowed.stderr, describe(narrowed)
    same = env.cli("grant", ALPHA, f"{LOCAL}:docs", "--read-only")
    assert "->" not in same.stderr, describe(same)
    restored = env.cli("restore", ALPHA, gid)
    assert restored.stdout.strip().startswith("nothing changed") and len(restored.stdout.splitlines()) == 1, describe(
        restored
    )
    env.revoke(ALPHA, gid)
    revoked = env.cli("revoke", ALPHA, gid)
    assert revoked.stdout.strip().startswith("nothing changed") and len(revoked.stdout.splitlines()) == 1, describe(
        revoked
    )
    for root in (f"{LOCAL}:.", f"{LOCAL}:"):
        p = env.cli("grant", ALPHA, root, expect=64)
        assert "--whole-provider" in p.stderr and "every file" in p.stderr, describe(p)
    assert [g["path"] for g in privacy(env)] == ["docs"]
    p = env.cli("grant", ALPHA, f"{LOCAL}:.", "--whole-provider")
    assert sorted(g["path"] for g in privacy(env)) == ["", "docs"], describe(p)


def test_a_session_grant_ends_when_the_apps_last_process_exits(env):
    """`grant --session` / `open --session`: the grants work while the app
    runs, and end (with the reference) when its last process exits, while
    a persistent grant stays; a new run sees nothing of them (ENOENT). The
    owner's revoke works on a session grant at once, even while an app
    process stays alive to keep the session going."""
    kept = env.grant(ALPHA, f"{LOCAL}:photos")
    env.cli("grant", ALPHA, f"{LOCAL}:work", "--session")
    env.cli("open", ALPHA, f"{LOCAL}:{REPORT}", "--session")
    lifetimes = {g["path"]: g["lifetime"] for g in privacy(env)}
    assert lifetimes == {"photos": "persistent", "work": "session", REPORT: "session"}, lifetimes
    mount(env, scopes="lenient")
    alive = env.app_session(
        ALPHA,
        "step({}); step(outcome(lambda: read_bytes(sys.argv[1])[:6].hex())); emit({})",
        env.prov(ALPHA, rel=REPORT),
    )
    alive.recv()
    session_grant = next(g["grant"] for g in privacy(env) if g["path"] == REPORT)
    env.revoke(ALPHA, str(session_grant))
    alive.send()
    assert alive.recv() == {"errno": "EPERM"}, "an app process kept a revoked session grant alive"
    env.restore(ALPHA, str(session_grant))
    got = env.app_json(ALPHA, "emit(outcome(lambda: read_bytes(sys.argv[1])[:6].hex()))", env.prov(ALPHA, rel=REPORT))
    assert got == {"ok": REPORT_BYTES[:6].hex()}, got
    assert alive.finish() == 0, alive.stderr()
    wait_for("the session grants to end", lambda: [g["path"] for g in privacy(env)], lambda paths: paths == ["photos"])
    assert references(env) == []
    got = env.app_json(
        ALPHA,
        "emit([attempt(os.lstat, p) for p in sys.argv[1:]])",
        env.prov(ALPHA, rel=REPORT),
        env.prov(ALPHA, rel="work"),
        env.prov(ALPHA, rel="photos"),
    )
    assert got == ["ENOENT", "ENOENT", "OK"], got
    assert [g["grant"] for g in privacy(env)] == [int(kept)]
    ended = events(env, kind="forget")
    assert {e.get("operation") for e in ended} == {"session-ended"}, ended


def test_imported_copies_stay_until_the_app_has_had_them(env):
    """Finding 6, SPEC S18: a copy imported while the app is not running
    survives any number of short unrelated runs (they never looked); a
    process that lists the inbox has it, and once that process exits the
    copy goes. A copy imported while a process of the app runs goes when
    that process exits, not when an unrelated later run does.
    Seen failing on the old main: the first short run emptied the inbox."""
    mount(env, scopes="lenient")
    p = env.cli("import", ALPHA, f"{LOCAL}:docs/secret.txt")
    copy = container_host(env, ALPHA, p.stdout.strip().removeprefix("Container/"))
    for _ in range(2):
        env.run_app(ALPHA, ["true"])
        time.sleep(1.0)  # not a wait: nothing may happen (the old daemon emptied the inbox at once on exit)
        assert os.path.exists(copy), "a short unrelated run emptied the inbox before the app saw it"
    inbox = env.container(ALPHA, f"tmp/{ALPHA}-Inbox")
    looker = env.app_session(ALPHA, "step(listing(sys.argv[1])); emit({})", inbox)
    assert looker.recv() == ["secret.txt"]
    time.sleep(0.5)  # not a wait: nothing may happen while the process that has the copy runs
    assert os.path.exists(copy), "the copy went while the process that has it still runs"
    looker.send()
    assert looker.finish() == 0, looker.stderr()
    wait_for(
        "the copy to go after the process that listed the inbox exited",
        lambda: os.path.exists(copy),
        lambda there: not there,
    )

    running = env.app_session(ALPHA, "step({}); emit({})")
    running.recv()
    p = env.cli("import", ALPHA, f"{LOCAL}:{REPORT}")
    second = container_host(env, ALPHA, p.stdout.strip().removeprefix("Container/"))
    env.run_app(ALPHA, ["true"])
    time.sleep(1.0)  # not a wait: nothing may happen after an unrelated run
    assert os.path.exists(second), "an unrelated run started after the import emptied the inbox"
    running.send()
    assert running.finish() == 0, running.stderr()
    wait_for(
        "the copy to go after the process that was running at the import exited",
        lambda: os.path.exists(second),
        lambda there: not there,
    )


def test_inbox_copies_nobody_had_go_after_the_inbox_days(env):
    """SPEC S18: a copy that no process of the app had is removed once it is
    older than `mount --inbox-days N`: with 0, at the mount."""
    env.cli("import", ALPHA, f"{LOCAL}:docs/secret.txt")
    copy = container_host(env, ALPHA, f"tmp/{ALPHA}-Inbox/secret.txt")
    assert os.path.exists(copy)
    env.mount_args = lambda *a, **k: ["mount", env.mnt, "--inbox-days", "0"]
    env.mount()
    assert not os.path.exists(copy), "a copy older than --inbox-days stayed"


# The app lists its inbox (so it has the copy), then moves the inbox away
# and puts a link to argv[3] (a folder of the owner) in its place.
SWAP_INBOX_FOR_LINK = """
inbox, aside, victim = sys.argv[1], sys.argv[2], sys.argv[3]
seen = listing(inbox)
os.rename(inbox, aside)
os.symlink(victim, inbox)
emit({"seen": seen, "link": os.readlink(inbox)})
"""


def test_an_app_cannot_turn_inbox_cleanup_against_the_owners_files(env):
    """Attack, SPEC S18/S33: the daemon removes inbox copies with the
    owner's rights, and the app controls its container. An app that lists
    its inbox, then replaces the inbox with a link to a folder of the owner
    holding a file of the same name, exits: the daemon removes nothing
    through the link, neither as the copy it had nor by age
    (`--inbox-days 0` sweeps at every exit)."""
    victim = env.root / "victim"
    victim.mkdir()
    (victim / "secret.txt").write_bytes(b"the owner's file\n")
    env.mount_args = lambda *a, **k: ["mount", env.mnt, "--inbox-days", "0"]
    env.mount()
    env.cli("import", ALPHA, f"{LOCAL}:docs/secret.txt")
    got = env.app_json(
        ALPHA,
        SWAP_INBOX_FOR_LINK,
        env.container(ALPHA, f"tmp/{ALPHA}-Inbox"),
        env.container(ALPHA, "tmp/aside"),
        victim,
    )
    assert got == {"seen": ["secret.txt"], "link": str(victim)}, got
    env.run_app(ALPHA, ["true"])
    time.sleep(1.0)  # not a wait: the daemon gets time to do the harm it must not do
    assert (victim / "secret.txt").read_bytes() == b"the owner's file\n", (
        "the daemon removed a file through the app's link"
    )
    assert os.path.islink(container_host(env, ALPHA, f"tmp/{ALPHA}-Inbox"))


def test_revoke_restore_and_forget_take_the_item_as_well_as_the_id(env):
    """Issue 31, point 6: revoke, restore and forget name a grant by its
    item (PROVIDER:RELPATH), as grant and open do; an item the app holds
    no grant on is 67, naming it. Seen failing on the old main: only
    numeric ids were taken (64)."""
    gid = env.grant(ALPHA, f"{LOCAL}:docs")

    def state():
        rows = json.loads(env.cli("privacy", ALPHA, "--json").stdout)
        return {row["grant"]: row["state"] for row in rows}

    env.cli("revoke", ALPHA, f"{LOCAL}:docs")
    assert state() == {int(gid): "revoked"}
    env.cli("restore", ALPHA, f"{LOCAL}:docs")
    assert state() == {int(gid): "active"}
    p = env.cli("revoke", ALPHA, f"{LOCAL}:photos", expect=67)
    assert f"{LOCAL}:photos" in p.stderr
    env.cli("forget", ALPHA, f"{LOCAL}:docs")
    assert state() == {}


# Starts a scope on argv[1] and reads it: [start, read].
START_AND_READ = """
p = sys.argv[1]
emit([outcome(lambda: os.getxattr(p, "user.scopefs.start").decode()), outcome(lambda: read_bytes(p).decode())])
"""


def test_a_granted_file_saved_over_on_the_host_stays_granted(env):
    """SPEC S14, S44: the owner saves a granted file the way editors do (a
    new file written next to it, renamed over its name). The app reads the
    new content at the same path, on either store. On SQLite the item is
    found missing and its path decides; on a fleet the path always decides
    (decision 62). Seen failing on the fleet's store before: the file the
    owner's host recorded was compared, and the saved file hid (ENOENT)."""
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    mount(env)
    target = env.prov(ALPHA, LOCAL, REPORT)
    assert env.app_json(ALPHA, START_AND_READ, target) == [{"ok": "1"}, {"ok": REPORT_BYTES.decode()}]
    host = env.backing(LOCAL) / REPORT
    saved = host.with_name(".report.txt.swp")
    saved.write_bytes(b"saved by an editor\n")
    os.rename(saved, host)
    got = wait_for(
        "the saved file to read through the mount",
        lambda: env.app_json(ALPHA, START_AND_READ, target),
        lambda r: r[1] == {"ok": "saved by an editor\n"},
    )
    assert got == [{"ok": "1"}, {"ok": "saved by an editor\n"}]
