"""A remote that changes under a reader, and an extension whose answers
fall short (issue 47, findings 3 and 5; SPEC S42, S49: one open file reads one
version, never a mixture; docs/PROVIDERS.md).

A read that reaches the daemon past the end of an item that shrank
remotely killed the daemon on the old main ("Range requires lowerBound <=
upperBound"); Tests/ProviderExtensionsTests/RemoteChangeTests.swift hits
that read deterministically, and the first test here drives a shrink
under a waiting reader through the mount. Seen failing on the old main: a
fetch whose staged file lacked the range's last 4 KiB (its length honest)
made the app's read hang while the daemon fetched again and again.
Default mount (strict scopes), the app in the default sandbox, the folder
example with switches as the extension.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from doc_scope_helpers import status
from extension_cloud import BIG, CLOUD, ask, cloud, session, sha  # noqa: F401  (cloud: the fixture)
from scopefs_harness import ALPHA, EXTENSIONS, wait_for

pytestmark = pytest.mark.sqlite_store(EXTENSIONS)

SHRUNK = 9 << 20  # larger than a whole-file fetch (8 MiB), smaller than the reader's offset
READER_OFFSET = 12 << 20


def fetches(cloud) -> int:
    return sum(1 for call in cloud.calls() if call.startswith("fetch"))


def test_a_remote_shrink_below_a_waiting_readers_offset_keeps_the_daemon_up(env, cloud):
    """Finding 3: the read ends (end of file: the item is shorter now), the
    daemon stays up, and the next read serves the new version."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    big = cloud.path(ALPHA, "docs/big.bin")
    cloud.switch("slow-fetch", "2")
    answers: list = []
    reader = threading.Thread(
        target=lambda: answers.append(ask(s, op="read", path=big, offset=READER_OFFSET, length=4096)), daemon=True
    )
    reader.start()
    wait_for("the reader's fetch to start", cloud.calls, lambda calls: any(c.startswith("fetch") for c in calls))
    with open(cloud.remote / "docs/big.bin", "r+b") as remote:
        remote.truncate(SHRUNK)
    cloud.sync()
    reader.join(timeout=30)
    assert answers, "the app's read never ended"
    cloud.switch("slow-fetch", None)
    # The daemon answers, and the file is the remote's new version.
    assert status(env)["daemon"], "the daemon is gone"
    got = ask(s, op="stat", path=big)
    assert got.get("ok", {}).get("size") == SHRUNK, got
    assert "errno" not in ask(s, op="read", path=big, offset=SHRUNK - 4096, length=4096)


def test_a_short_fetch_answer_is_an_error_not_a_loop(env, cloud):
    """Finding 5: an extension that stages half of each range gets the
    reader EIO within the stall limit and a bounded number of fetches, and
    fetches stop once the app's read has ended."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    cloud.switch("short-fetch", "")
    before = fetches(cloud)
    started = time.monotonic()
    result = ask(s, op="read", path=cloud.path(ALPHA, "docs/big.bin"), offset=BIG - (1 << 20), length=1 << 20)
    assert result == {"errno": "EIO"}, result
    assert time.monotonic() - started < 20
    made = fetches(cloud) - before
    assert 1 <= made <= 8, f"{made} fetches for one read"
    time.sleep(2)
    assert fetches(cloud) - before == made, "fetches went on after the read ended"
    assert os.path.exists(cloud.remote / "docs/big.bin")


def cancels_a_window_and_its_read_ahead(env, cloud, s, path: str, cut) -> None:
    """A sequential reader of `path` waits on a window while the next ones
    are fetched ahead (slow fetches); `cut()` must cancel every one of
    those fetches, not leave them to finish."""
    assert "ok" in ask(s, op="read", path=path, offset=0, length=4096)
    cloud.switch("slow-fetch", "20")
    before = len(cloud.calls())
    # Where the last read ended: the window grows and the next ones are fetched ahead.
    reader = threading.Thread(target=lambda: ask(s, op="read", path=path, offset=1 << 20, length=1 << 20), daemon=True)
    reader.start()
    wait_for(
        "the window and its read-ahead to be fetched",
        lambda: [c for c in cloud.calls()[before:] if c.startswith("fetch")],
        lambda started: len(started) >= 2,
    )
    started = [c for c in cloud.calls()[before:] if c.startswith("fetch")]
    cut()
    wait_for(
        f"all {len(started)} fetches cancelled",
        lambda: [c for c in cloud.calls()[before:] if c.startswith("cancelled")],
        lambda cancelled: len(cancelled) >= len(started),
        timeout=10,
    )
    reader.join(timeout=10)
    cloud.switch("slow-fetch", None)


def test_a_revoke_cancels_the_read_ahead_its_reads_started(env, cloud):
    """Finding 6 (S42: a revoked app causes no traffic): the read-ahead
    window a sequential reader started is cancelled with the read it
    waited on, not left to finish after the revoke."""
    grant = env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    cancels_a_window_and_its_read_ahead(
        env, cloud, s, cloud.path(ALPHA, "docs/big.bin"), lambda: env.revoke(ALPHA, grant)
    )


def test_downloads_never_cancels_what_the_app_started(env, cloud):
    """S42 (an app that never downloads causes no traffic), issue 47's
    "cancellation that reaches everything": `scopefs app set APP
    --downloads never` while the app waits on a window and its read-ahead
    cancels them all, as a revoke does, and its next read of a placeholder
    is EDEADLK with no fetch. Seen failing on the old main: the fetches ran
    on, none was cancelled."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    big = cloud.path(ALPHA, "docs/big.bin")
    cancels_a_window_and_its_read_ahead(
        env, cloud, s, big, lambda: env.cli("app", "set", ALPHA, "--downloads", "never")
    )
    fetched = len([c for c in cloud.calls() if c.startswith("fetch")])
    assert ask(s, op="read", path=big, offset=BIG - 4096, length=4096) == {"errno": "EDEADLOCK"}
    assert len([c for c in cloud.calls() if c.startswith("fetch")]) == fetched


def test_a_remote_edit_during_a_read_never_mixes_versions(env, cloud):
    """Finding 4 (S42): a same-size remote edit while a descriptor reads:
    its later reads get ESTALE, never the new version's bytes after the
    old one's; a new open reads the new version whole."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    big = cloud.path(ALPHA, "docs/big.bin")
    old = (cloud.remote / "docs/big.bin").read_bytes()
    new = bytes(b ^ 0xFF for b in old[: 1 << 20]) * (BIG >> 20)
    assert ask(s, op="hold", path=big) == {"ok": "held"}
    first = ask(s, op="held-read", offset=0, length=4096)
    assert first == {"ok": sha(old[:4096])}, first
    (cloud.remote / "docs/big.bin").write_bytes(new)
    cloud.sync()
    later = ask(s, op="held-read", offset=10 << 20, length=4096)
    assert later in ({"errno": "ESTALE"}, {"ok": sha(old[10 << 20 : (10 << 20) + 4096])}), (
        f"a read of the held descriptor mixed versions: {later}"
    )
    fresh = ask(s, op="read", path=big, offset=10 << 20, length=4096)
    assert fresh == {"ok": sha(new[10 << 20 : (10 << 20) + 4096])}, fresh


def test_a_create_whose_answer_was_lost_is_not_a_duplicate(env, cloud):
    """Finding 7 (docs/PROVIDERS.md: a resend is recognised by its
    content): the store made the file and the answer was lost; the daemon
    meets it again (a pull lists it, or the create sent again finds the
    name taken) and, the content being the same, adopts it: one file, no
    conflict copy."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    cloud.switch("lose-create-answer", "")
    assert ask(s, op="write", path=cloud.path(ALPHA, "docs/new.txt"), data="made once\n") == {"ok": "written"}
    # The daemon meets its first copy again, by the next pull or by the
    # create it sends again: either way the item is adopted.
    wait_for(
        "a pull after the lost answer",
        cloud.calls,
        lambda calls: "create new.txt" in calls and calls[calls.index("create new.txt") :].count("changes ") >= 2,
        timeout=20,
    )
    time.sleep(2)
    names = sorted(os.listdir(cloud.remote / "docs"))
    assert names == ["big.bin", "new.txt", "report.txt"], names
    assert (cloud.remote / "docs/new.txt").read_text() == "made once\n"
    assert sorted(ask(s, op="list", path=cloud.path(ALPHA, "docs"))["ok"]) == names


def test_a_writers_open_takes_a_remote_edit_the_daemon_has_not_pulled(env, cloud):
    """S43, S49 (docs/PROVIDERS.md: "a writer's open whose download meets a
    version not pulled yet takes that version"): the store's change feed
    lags (`frozen-changes`), the file is edited remotely, and an app opens
    it for writing without truncating and patches its first bytes. The
    open takes the remote's new version (no ESTALE, no EIO), the app's
    edit lands on it, and it goes up as one file with no conflict copy.
    Seen failing with the catch-up taken out (one attempt): the app's
    open failed with ESTALE."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    path = cloud.path(ALPHA, "docs/report.txt")
    cloud.switch("frozen-changes", "")
    edited = b"edited remotely, longer than the version the replica knows\n" * 40
    (cloud.remote / "docs/report.txt").write_bytes(edited)
    assert ask(s, op="patch", path=path, data="EDIT", offset=0) == {"ok": 4}
    wanted = b"EDIT" + edited[4:]
    assert ask(s, op="read", path=path) == {"ok": sha(wanted)}
    cloud.switch("frozen-changes", None)
    remote = cloud.remote / "docs/report.txt"
    wait_for("the upload", remote.read_bytes, lambda data: data == wanted, timeout=15)
    listing = ask(s, op="list", path=cloud.path(ALPHA, "docs"))["ok"]
    assert not [name for name in listing if "conflict" in name], listing
