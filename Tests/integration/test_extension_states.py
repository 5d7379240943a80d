"""States that tell the truth, and a way back (issue 47, finding 8; SPEC S41, S42, S43).

What an app, `stat`, `user.scopefs.state` and `scopefs status` say of an
extension provider's items must be what is so: right after an evict, for
a file waiting to upload, for a conflict, for a failed or stalled
extension. Default mount (strict scopes), apps in the default sandbox,
the folder example with switches (controlled_folder.py) as the extension.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from doc_scope_helpers import mount, status, wait_events
from extension_cloud import (  # noqa: F401  (cloud: the fixture)
    CLOUD,
    CONTROLLED,
    REPORT,
    Cloud,
    ask,
    cloud,
    session,
    sha,
    start_slow_read,
)
from scopefs_harness import ALPHA, EXTENSIONS, describe, wait_for

pytestmark = pytest.mark.sqlite_store(EXTENSIONS)


def fetches(cloud) -> list[str]:
    return [c for c in cloud.calls() if c.startswith("fetch")]


def test_an_evicted_file_shows_its_state_at_once_and_reads_download_again(env, cloud):
    """S42: right after `scopefs evict` returns, an app that had read the
    file sees it as a placeholder: `st_blocks` 1, state `dataless`, and its
    next read downloads again instead of being served the evicted bytes
    from the kernel's page cache. Seen failing on the old main: st_blocks
    kept the downloaded count and the read caused no fetch."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    path = cloud.path(ALPHA, "docs/report.txt")
    assert ask(s, op="read", path=path) == {"ok": sha(REPORT)}
    before = ask(s, op="stat", path=path)["ok"]
    assert before["blocks"] > 1, before
    p = env.cli("evict", f"{CLOUD}:docs/report.txt")
    assert "1 files evicted" in p.stdout, describe(p)
    assert ask(s, op="stat", path=path)["ok"]["blocks"] == 1
    assert ask(s, op="attr", path=path, name="user.scopefs.state") == {"ok": "dataless"}
    seen = len(fetches(cloud))
    assert ask(s, op="read", path=path) == {"ok": sha(REPORT)}
    assert len(fetches(cloud)) == seen + 1, "the read after the evict was served from the page cache"


def test_a_file_an_app_made_and_holds_open_is_never_evicted(env, cloud):
    """S42 ("never evicted while open"), S43: an app creates a file, writes
    and fsyncs it (it goes up), and keeps the descriptor. `scopefs evict`
    refuses it (exit 77, "is open"), and a later write through that
    descriptor reaches the remote with the rest of the file's bytes. Seen
    failing on the old main (found by the replica model's seed 169): a
    create did not count as an open, the evict said "1 files evicted", and
    the remote got "EDIT" and zeros for all the write did not cover."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    path = cloud.path(ALPHA, "docs/kept-open.txt")
    first = "".join(f"line {n:05d}\n" for n in range(4000))
    assert ask(s, op="create-hold", path=path, data=first) == {"ok": "held"}
    remote = cloud.remote / "docs/kept-open.txt"
    wait_for("the upload", lambda: remote.exists() and remote.read_text(), lambda text: text == first, timeout=15)
    p = env.cli("evict", f"{CLOUD}:docs/kept-open.txt", expect=77)
    assert "is open" in p.stderr, describe(p)
    assert ask(s, op="held-pwrite", path=path, data="EDIT", offset=0) == {"ok": 4}
    assert ask(s, op="held-close", path=path) == {"ok": None}
    wanted = "EDIT" + first[4:]
    wait_for("the edit's upload", lambda: remote.read_text(), lambda text: text == wanted, timeout=15)


def test_a_new_file_waiting_to_upload_is_dirty_and_counted_in_the_queue(env, cloud):
    """S43: a file made here while the store is offline is `dirty`, and
    the queue counts it in `scopefs status` (text and JSON) and in
    `privacy`'s provider row; once the store is back it is uploaded and
    the queue is empty. Seen failing on the old main: the queue said 0."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    cloud.switch("offline", "")
    path = cloud.path(ALPHA, "docs/waiting.txt")
    assert ask(s, op="write", path=path, data="made offline\n") == {"ok": "written"}
    assert ask(s, op="attr", path=path, name="user.scopefs.state") == {"ok": "dirty"}
    wait_for("the new file in the queue", cloud.extension_status, lambda st: st["queued"] == 1, timeout=10)
    text = env.cli("status").stdout
    assert "queue: 1" in text, text
    rows = [r for r in json.loads(env.cli("privacy", ALPHA, "--json").stdout) if r["provider"] == CLOUD]
    assert rows and rows[0]["providerExtension"]["queued"] == 1, rows
    cloud.switch("offline", None)
    wait_for(
        "the upload",
        lambda: ((cloud.remote / "docs/waiting.txt").exists(), cloud.extension_status()["queued"]),
        lambda seen: seen == (True, 0),
        timeout=15,
    )
    assert (cloud.remote / "docs/waiting.txt").read_bytes() == b"made offline\n"
    assert status(env)["daemon"]["extensions"][0]["queued"] == 0


def test_status_reads_as_sentences_and_an_error_clears_once_the_store_answers(env, cloud):
    """S30, S41: while the store is down, `status` says so in words (the
    error's name and message, no program structures); once it answers
    again, the offline line and the last error go. Seen failing on the old
    main: "last error: changes failed: ExtensionFailure(code: ...)" stayed."""
    cloud.switch("offline", "")
    p = env.cli("provider", "sync", CLOUD, expect=None)
    assert p.returncode == 74 and "offline" in p.stderr, describe(p)
    text = env.cli("status").stdout
    assert "last error: changes failed: unreachable: the test took the store offline" in text, text
    assert "ExtensionFailure" not in text and "code:" not in text, text
    cloud.switch("offline", None)
    cloud.sync()
    entry = cloud.extension_status()
    assert entry.get("offline") is None and entry.get("lastError") is None, entry
    text = env.cli("status").stdout
    assert "last error" not in text and "offline:" not in text, text


def test_a_failed_provider_refuses_a_sync_at_once_and_restarts_without_a_remount(env):
    """S34, S41: an extension that keeps crashing ends `failed`; `provider
    sync` then says so at once with exit 69 (not after a two-minute wait),
    and `scopefs provider restart` starts it again, in the same mount, once
    its cause is gone. Seen failing on the old main: the sync waited 120 s
    and there was no restart command."""
    remote = env.root / "restart-remote"
    (remote / "docs").mkdir(parents=True)
    (remote / "docs" / "a.txt").write_text("a\n")
    control = env.root / "restart-control"
    control.mkdir()
    (control / "crash").write_text("")
    env.base_env.update(SCOPEFS_EXTENSION_RESTART_SECONDS="0.05")
    env.cli(
        "provider",
        "add",
        "flaky",
        "--extension",
        f"/usr/bin/python3 {CONTROLLED} {remote} {control}",
        "--writable",
        remote,
        "--writable",
        control,
    )
    mount(env)
    wait_for(
        "the crash loop to end in failed",
        lambda: {e["provider"]: e["state"] for e in status(env)["daemon"].get("extensions") or []},
        lambda states: states.get("flaky", "").startswith("failed"),
        timeout=30,
    )
    started = time.monotonic()
    p = env.cli("provider", "sync", "flaky", expect=None)
    assert p.returncode == 69 and "failed" in p.stderr and "provider restart" in p.stderr, describe(p)
    assert time.monotonic() - started < 5
    (control / "crash").unlink()
    p = env.cli("provider", "restart", "flaky")
    assert "running" in p.stdout, describe(p)
    env.cli("provider", "sync", "flaky")
    env._record_daemon()  # the extension's descriptors are the daemon's from here on
    env.grant(ALPHA, "flaky:docs")
    read = env.app_json(
        ALPHA,
        "os.getxattr(sys.argv[1], 'user.scopefs.start'); emit(outcome(lambda: open(sys.argv[1] + '/a.txt').read()))",
        env.prov(ALPHA, "flaky", "docs"),
        sandbox=True,
    )
    assert read == {"ok": "a\n"}, read


def test_a_stalled_fetch_gives_etimedout_at_the_stall_limit(env, cloud):
    """docs/PROVIDERS.md, "Limits": a fetch with no answer and no progress
    for the stall limit (SCOPEFS_EXTENSION_STALL_SECONDS, 3 s here; 60 s by
    default) ends the app's read with ETIMEDOUT at that limit. The kernel
    reads the page again after its readahead failed: that read gets the
    same answer at once, not a second fetch that waits another limit (or
    EIO when the stalled extension is killed 10 s after its `$/cancel`).
    Seen failing on the old main: ETIMEDOUT after 6 s, two stalled fetches."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    cloud.switch("stall-fetch", "")
    started = time.monotonic()
    start_slow_read(s, cloud.path(ALPHA, "docs/report.txt"))
    assert s.recv(timeout=30) == {"errno": "ETIMEDOUT"}
    assert 2.5 <= time.monotonic() - started < 5
    stalls = wait_events(env, lambda e: "stalled" in (e.get("operation") or ""), kind="extension")
    assert sum(e.get("occurrences", 1) for e in stalls) == 1, stalls


def test_an_id_given_to_two_items_is_an_event_not_a_silent_drop(env):
    """docs/PROVIDERS.md "Identity": an extension that lists one id at two
    places (here each folder's first file again, as `twin-of-NAME`) has a
    bug the owner must hear of: the first item is shown, the other is not,
    and an `extension` event names both. Seen failing on the old main: the
    twin was dropped with no event."""
    cloud = Cloud(env)
    cloud.switch("duplicate-id", "")
    mount(env)
    cloud.sync()
    env._record_daemon()
    told = wait_events(env, lambda e: "two items" in (e.get("operation") or ""), kind="extension")
    assert any("big.bin and twin-of-big.bin: twin-of-big.bin is not shown" in e["operation"] for e in told), told
    replica = env.state / "extensions" / CLOUD / "files" / "docs"
    assert sorted(os.listdir(replica)) == ["big.bin", "report.txt"]


def test_an_item_fetch_finds_gone_leaves_the_listing(env):
    """docs/PROVIDERS.md, `noSuchItem`: "removes the item from its tree".
    The store lost a file its listing still has (no poll comes here): the
    app's read gets ENOENT, the daemon asks the extension for the item, and
    once it agrees the file leaves the app's folder, with an event. Seen
    failing on the old main: the file stayed listed, unreadable for good."""
    cloud = Cloud(env)
    env.base_env.update(SCOPEFS_EXTENSION_POLL_SECONDS="3600")
    mount(env)
    cloud.sync()
    env._record_daemon()
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    cloud.switch("vanish", "report.txt")
    # ENOENT is the store's answer; the kernel may retry a failed readahead
    # with a read of its own, and if the item check removed the file in
    # between, that read of the descriptor is ESTALE (S49: a remote change
    # under an open file). Both say "gone"; neither is the old content.
    assert ask(s, op="read", path=cloud.path(ALPHA, "docs/report.txt")) in ({"errno": "ENOENT"}, {"errno": "ESTALE"})
    wait_for(
        "the lost file to leave the app's folder",
        lambda: ask(s, op="list", path=cloud.path(ALPHA, "docs")),
        lambda listing: listing == {"ok": ["big.bin"]},
        timeout=10,
    )
    wait_events(env, lambda e: "any more" in (e.get("operation") or ""), kind="extension")


# argv: the granted folder; lseek's answers on a placeholder, then an
# archive of it by `tar --sparse` (a child of the app: it shares the scope).
SPARSE = r"""
import subprocess
folder = sys.argv[1]
os.getxattr(folder, "user.scopefs.start")
path = os.path.join(folder, "big.bin")
out = {}
fd = os.open(path, os.O_RDONLY)
for name, whence in (("data", os.SEEK_DATA), ("hole", os.SEEK_HOLE)):
    out[name] = outcome(os.lseek, fd, 0, whence)
os.close(fd)
p = subprocess.run(["tar", "--sparse", "-cf", "/tmp/backup.tar", "-C", folder, "big.bin"], capture_output=True, text=True)
out["tar"] = [p.returncode, p.stderr.strip()]
out["archive"] = os.path.getsize("/tmp/backup.tar")
out["state"] = os.getxattr(path, "user.scopefs.state").decode()
emit(out)
"""


def test_a_placeholder_reads_as_a_hole_and_tar_sparse_archives_it_without_a_download(env, cloud):
    """S42: SEEK_DATA and SEEK_HOLE see a placeholder's missing bytes as a
    hole (ENXIO, 0), so `tar --sparse` archives the 20 MiB placeholder as
    a hole, exits 0 and downloads nothing; the file stays dataless. Seen
    failing on the old main: lseek found data at 0, tar read (downloaded)
    the whole file, wrote it in full and exited 1, "file changed as we
    read it"."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    before = fetches(cloud)
    got = env.app_json(ALPHA, SPARSE, cloud.path(ALPHA, "docs"), sandbox=True)
    assert got["data"] == {"errno": "ENXIO"} and got["hole"] == {"ok": 0}, got
    assert got["tar"] == [0, ""] and got["archive"] < 1 << 20, got
    assert got["state"] == "dataless" and fetches(cloud) == before, (got, fetches(cloud))


def test_an_app_holding_only_the_file_sees_its_conflict_copy_beside_it(env, cloud):
    """S43, docs/SPEC.md: the app's edit met a remote change; the local
    edit is kept as a conflict copy beside the file. An app that holds only
    the file (a file grant, as after Open) gets the copy granted with the
    same access, as NSFileVersion's conflict versions go with their file:
    it lists and reads the copy in its own view, hears a `conflict` event
    of its own, and status counts one conflict. Seen failing on the old
    main: the copy was not in the app's view, no event named the app, and
    status said 0 conflicts."""
    env.grant(ALPHA, f"{CLOUD}:docs/report.txt")
    s, started = session(env, cloud, rel="docs/report.txt")
    assert started["start"] == {"ok": "1"}, started
    path = cloud.path(ALPHA, "docs/report.txt")
    assert ask(s, op="read", path=path) == {"ok": sha(REPORT)}
    cloud.switch("offline", "")  # the remote change lands before the upload can
    time.sleep(0.2)
    (cloud.remote / "docs" / "report.txt").write_bytes(b"changed remotely\n")
    assert ask(s, op="write", path=path, data="changed locally\n") == {"ok": "written"}
    cloud.switch("offline", None)
    told = wait_events(env, lambda e: "(conflict " in (e.get("path") or ""), kind="conflict", app=ALPHA, timeout=15)
    copy = told[0]["path"].rsplit("/", 1)[1]
    assert copy.startswith("report (conflict ") and copy.endswith(").txt"), told
    listing = ask(s, op="list", path=cloud.path(ALPHA, "docs"))
    assert listing == {"ok": sorted([copy, "report.txt"])}, listing
    copy_path = cloud.path(ALPHA, f"docs/{copy}")
    assert ask(s, op="attr", path=copy_path, name="user.scopefs.start") == {"ok": "1"}
    assert ask(s, op="read", path=copy_path) == {"ok": sha(b"changed locally\n")}
    assert ask(s, op="read", path=path) == {"ok": sha(b"changed remotely\n")}
    assert cloud.extension_status()["conflicts"] == 1
