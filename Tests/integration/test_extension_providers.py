"""Provider extensions in the mount (issue 32; SPEC S41, S42, S43).

A provider whose items an extension supplies: here the folder example
with switches (Tests/integration/extensions/controlled_folder.py) over a
folder of the test's, the "remote", which tests also change behind
ScopeFS's back. Default mount (strict scopes), apps in the default
sandbox; the extension in its own sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

import pytest
from doc_scope_helpers import bookmark, mount, open_document, resolve_ok, status, wait_events
from extension_cloud import (  # noqa: F401  (cloud: the fixture)
    APP,
    BIG,
    CLOUD,
    HERE,
    REPORT,
    Cloud,
    ask,
    cloud,
    in_scope,
    session,
    sha,
    start_slow_read,
)
from scopefs_harness import ALPHA, BETA, EXTENSIONS, describe, mount_count, run_bounded, scopefs_bin, wait_for

pytestmark = pytest.mark.sqlite_store(EXTENSIONS)


def test_placeholders_show_size_one_block_and_state_and_listing_downloads_nothing(env, cloud):
    """S42: a file not on disk shows its real size and mode, st_blocks 1
    and user.scopefs.state "dataless"; listing and stat fetch nothing."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, started = session(env, cloud)
    assert started["start"] == {"ok": "1"}, started
    before = [c for c in cloud.calls() if c.startswith("fetch")]
    assert ask(s, op="list", path=cloud.path(ALPHA, "docs")) == {"ok": ["big.bin", "report.txt"]}
    big = ask(s, op="stat", path=cloud.path(ALPHA, "docs/big.bin"))
    assert big["ok"]["size"] == BIG and big["ok"]["blocks"] == 1, big
    assert ask(s, op="attr", path=cloud.path(ALPHA, "docs/big.bin"), name="user.scopefs.state") == {"ok": "dataless"}
    assert ask(s, op="attr", path=cloud.path(ALPHA, "docs/big.bin"), name="user.scopefs.progress") == {"ok": f"0/{BIG}"}
    assert [c for c in cloud.calls() if c.startswith("fetch")] == before, "a listing or a stat downloaded"


def test_a_read_downloads_by_range_after_the_scope_check_only(env, cloud):
    """S42: an app without the grant (ENOENT) or without a started scope
    (EPERM) causes no fetch;
    with one, reading 4 KiB of a 20 MiB file fetches a block, not the file
    (state partial), and reading it all materializes it, byte for byte."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    unscoped = env.app_json(
        BETA, "emit(outcome(lambda: open(sys.argv[1], 'rb').read(10)))", cloud.path(BETA, "docs/big.bin"), sandbox=True
    )
    assert unscoped == {"errno": "ENOENT"}, unscoped
    no_scope = env.app_json(
        ALPHA,
        "emit(outcome(lambda: open(sys.argv[1], 'rb').read(10)))",
        cloud.path(ALPHA, "docs/big.bin"),
        sandbox=True,
    )
    assert no_scope == {"errno": "EPERM"}, no_scope
    s, _ = session(env, cloud)
    assert not [c for c in cloud.calls() if c.startswith("fetch")], "an app without a grant caused a download"
    remote = (cloud.remote / "docs" / "big.bin").read_bytes()
    head = ask(s, op="read", path=cloud.path(ALPHA, "docs/big.bin"), offset=0, length=4096)
    assert head == {"ok": sha(remote[:4096])}, head
    assert ask(s, op="attr", path=cloud.path(ALPHA, "docs/big.bin"), name="user.scopefs.state") == {"ok": "partial"}
    progress = ask(s, op="attr", path=cloud.path(ALPHA, "docs/big.bin"), name="user.scopefs.progress")["ok"]
    done, total = map(int, progress.split("/"))
    assert total == BIG and 4096 <= done <= 4 << 20, f"reading 4 KiB downloaded {done} of {total} bytes"
    whole = ask(s, op="read", path=cloud.path(ALPHA, "docs/big.bin"))
    assert whole == {"ok": sha(remote)}
    assert ask(s, op="attr", path=cloud.path(ALPHA, "docs/big.bin"), name="user.scopefs.state") == {
        "ok": "materialized"
    }
    info = ask(s, op="stat", path=cloud.path(ALPHA, "docs/big.bin"))["ok"]
    assert info["blocks"] * 512 >= BIG, f"materialized but st_blocks is {info['blocks']}"


def test_an_edit_is_saved_to_the_remote_and_a_new_file_too(env, cloud):
    """S43: what an app writes is uploaded after the close; a file it makes,
    renames or deletes is made, renamed or deleted remotely."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    assert ask(s, op="write", path=cloud.path(ALPHA, "docs/report.txt"), data="edited here\n") == {"ok": "written"}
    assert ask(s, op="write", path=cloud.path(ALPHA, "docs/new.txt"), data="brand new\n") == {"ok": "written"}
    wait_for(
        "the edit and the new file on the remote",
        lambda: [
            (cloud.remote / "docs" / name).read_bytes() if (cloud.remote / "docs" / name).exists() else None
            for name in ("report.txt", "new.txt")
        ],
        lambda seen: seen == [b"edited here\n", b"brand new\n"],
        timeout=10,
    )
    assert ask(s, op="rename", path=cloud.path(ALPHA, "docs/new.txt"), to=cloud.path(ALPHA, "docs/renamed.txt")) == {
        "ok": None
    }
    assert ask(s, op="unlink", path=cloud.path(ALPHA, "docs/report.txt")) == {"ok": None}
    wait_for(
        "the rename and the delete on the remote",
        lambda: sorted(os.listdir(cloud.remote / "docs")),
        lambda names: names == ["big.bin", "renamed.txt"],
        timeout=10,
    )
    assert (cloud.remote / "docs" / "renamed.txt").read_bytes() == b"brand new\n"


def test_a_concurrent_remote_change_keeps_both_as_a_conflict_copy(env, cloud):
    """S43: the remote changed after the app's copy was downloaded; the
    app's save is not a silent overwrite: the remote version stays under
    the name, the local edit becomes 'report (conflict DATE).txt' next to
    it (uploaded too), and a conflict event is recorded."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    assert ask(s, op="read", path=cloud.path(ALPHA, "docs/report.txt")) == {"ok": sha(REPORT)}
    cloud.switch("offline", "")  # the remote change lands before the upload can
    time.sleep(0.2)
    (cloud.remote / "docs" / "report.txt").write_bytes(b"changed remotely\n")
    assert ask(s, op="write", path=cloud.path(ALPHA, "docs/report.txt"), data="changed locally\n") == {"ok": "written"}
    cloud.switch("offline", None)
    conflicts = wait_events(env, lambda e: "conflict" in (e.get("path") or ""), kind="conflict", timeout=15)
    listing = wait_for(
        "the conflict copy in the app's folder",
        lambda: ask(s, op="list", path=cloud.path(ALPHA, "docs"))["ok"],
        lambda names: any("(conflict " in n for n in names),
        timeout=10,
    )
    copy = next(n for n in listing if "(conflict " in n)
    assert copy.startswith("report (conflict ") and copy.endswith(").txt"), copy
    assert ask(s, op="read", path=cloud.path(ALPHA, "docs/report.txt")) == {"ok": sha(b"changed remotely\n")}
    assert ask(s, op="read", path=cloud.path(ALPHA, f"docs/{copy}")) == {"ok": sha(b"changed locally\n")}
    wait_for(
        "the conflict copy uploaded",
        lambda: (cloud.remote / "docs" / copy).read_bytes() if (cloud.remote / "docs" / copy).exists() else None,
        lambda data: data == b"changed locally\n",
        timeout=10,
    )
    assert (cloud.remote / "docs" / "report.txt").read_bytes() == b"changed remotely\n"
    assert conflicts


def test_remote_changes_reach_a_running_app(env, cloud):
    """Remote changes come through `changes` (a poll here) and reach an app
    that already read the file: its kernel caches are dropped (S37)."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    assert ask(s, op="read", path=cloud.path(ALPHA, "docs/report.txt")) == {"ok": sha(REPORT)}
    (cloud.remote / "docs" / "report.txt").write_bytes(b"new remote version\n")
    (cloud.remote / "docs" / "appeared.txt").write_bytes(b"hello\n")
    wait_for(
        "the remote's changes in the app's view",
        lambda: (
            ask(s, op="read", path=cloud.path(ALPHA, "docs/report.txt")),
            ask(s, op="list", path=cloud.path(ALPHA, "docs")),
        ),
        lambda seen: seen[0] == {"ok": sha(b"new remote version\n")} and "appeared.txt" in seen[1].get("ok", []),
        timeout=10,
    )


def test_offline_edits_wait_and_survive_a_daemon_killed_before_the_upload(env, cloud):
    """S43: nothing written and acknowledged is lost: an edit made while the
    store is offline waits; the daemon is killed (SIGKILL) before it could
    upload; after a new mount the edit is uploaded, once, with no conflict."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    cloud.switch("offline", "")
    assert ask(s, op="write", path=cloud.path(ALPHA, "docs/report.txt"), data="written offline\n") == {"ok": "written"}
    wait_for(
        "the queued edit in status",
        lambda: cloud.extension_status(),
        lambda st: st["queued"] >= 1 and st.get("offline"),
        timeout=10,
    )
    s.kill()
    env.kill_daemon()
    env.cli("unmount", env.mnt, expect=None)
    env.mounted = False
    cloud.switch("offline", None)
    mount(env)
    wait_for(
        "the edit uploaded after the restart",
        lambda: (cloud.remote / "docs" / "report.txt").read_bytes(),
        lambda data: data == b"written offline\n",
        timeout=15,
    )
    cloud.sync()
    assert not [n for n in os.listdir(cloud.remote / "docs") if "conflict" in n], os.listdir(cloud.remote / "docs")
    assert sum(1 for c in cloud.calls() if c.startswith("modify")) >= 1


def test_a_revoke_ends_a_download_in_flight_with_eperm(env, cloud):
    """S42: a revoke cancels the app's download: its read fails with EPERM
    at once, and the extension is told ($/cancel)."""
    grant = env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    cloud.switch("slow-fetch", "30")
    start_slow_read(s, cloud.path(ALPHA, "docs/report.txt"))
    wait_for("the fetch to start", cloud.calls, lambda calls: any(c.startswith("fetch") for c in calls))
    started = time.monotonic()
    env.revoke(ALPHA, grant)
    result = s.recv(timeout=10)
    assert result == {"errno": "EPERM"}, result
    assert time.monotonic() - started < 5
    wait_for("the extension told to cancel", cloud.calls, lambda calls: any(c.startswith("cancelled") for c in calls))


def test_a_signal_interrupts_a_slow_download_with_eintr(env, cloud):
    """S42: a signal to the app ends its wait for a download (EINTR)."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    cloud.switch("slow-fetch", "30")
    start_slow_read(s, cloud.path(ALPHA, "docs/report.txt"))
    wait_for("the fetch to start", cloud.calls, lambda calls: any(c.startswith("fetch") for c in calls))
    app_pids = [
        p["pid"] for p in status(env)["daemon"]["processes"] if p["app"] == ALPHA and p.get("parent") is not None
    ] or [p["pid"] for p in status(env)["daemon"]["processes"] if p["app"] == ALPHA]
    for pid in app_pids:
        try:
            os.kill(pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass
    result = s.recv(timeout=10)
    assert result == {"errno": "EINTR"}, result


def test_a_stalled_extension_gives_etimedout_and_the_mount_keeps_serving(env, cloud):
    """Limits: an extension that never answers a fetch: the app's read ends
    with ETIMEDOUT after the stall limit (3 s here), and other providers
    and the rest of the mount are served meanwhile."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    env.grant(ALPHA, "local:docs")
    s, _ = session(env, cloud)
    cloud.switch("stall-fetch", "")
    started = time.monotonic()
    start_slow_read(s, cloud.path(ALPHA, "docs/report.txt"))
    other = in_scope(env, ALPHA, env.prov(ALPHA, "local", "docs"), "os.listdir(path)")
    assert "ok" in other, other
    result = s.recv(timeout=30)
    assert result == {"errno": "ETIMEDOUT"}, result
    assert 2.5 <= time.monotonic() - started < 25


def test_pin_evict_and_status(env, cloud):
    """`scopefs pin` downloads and keeps; `evict` drops the content (the file
    stays, dataless, and reads the same again); status shows the cache."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    env.cli("pin", f"{CLOUD}:docs/report.txt")
    assert ask(s, op="attr", path=cloud.path(ALPHA, "docs/report.txt"), name="user.scopefs.state") == {"ok": "pinned"}
    assert cloud.extension_status()["pinned"] == 1
    env.cli("unpin", f"{CLOUD}:docs/report.txt")
    p = env.cli("evict", f"{CLOUD}:docs/report.txt")
    assert "1 files evicted" in p.stdout, describe(p)
    assert ask(s, op="attr", path=cloud.path(ALPHA, "docs/report.txt"), name="user.scopefs.state") == {"ok": "dataless"}
    assert ask(s, op="read", path=cloud.path(ALPHA, "docs/report.txt")) == {"ok": sha(REPORT)}
    text = env.cli("status").stdout
    assert "extension providers: 1" in text and CLOUD in text, text
    # privacy shows the grant's provider's extension too (its state and queue).
    rows = json.loads(env.cli("privacy", ALPHA, "--json").stdout)
    extension = next(r for r in rows if r["provider"] == CLOUD)["providerExtension"]
    assert extension["state"].startswith("running") and extension["queued"] == 0, extension
    assert "extension providers: 1" in env.cli("privacy", ALPHA).stdout


# The same with a non-root owner (uid 65534), whose daemon and extension
# run as that user: the session runs in a private mount namespace whose
# /dev/fuse is 0666, as in test_attacks_host_root.py.
NOBODY = 65534
NOBODY_SESSION = r"""
set -e
root=$1 binary=$2 app=$3
mount -t tmpfs -o mode=755 tmpfs "$root/dev"
mknod -m 666 "$root/dev/fuse" c 10 229
mount --bind "$root/dev/fuse" /dev/fuse
as_owner() { setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$root" XDG_RUNTIME_DIR= "$@"; }
s() { as_owner "$binary" --state "$root/state" "$@"; }
s init >/dev/null
s provider add cloud --extension folder --option root="$root/remote" >/dev/null
s app add com.example.alpha >/dev/null
s mount "$root/mnt" >/dev/null
trap 's unmount "$root/mnt" >/dev/null 2>&1 || fusermount3 -u "$root/mnt"' EXIT
s provider sync cloud
s grant com.example.alpha cloud:docs >/dev/null
s run --app com.example.alpha -- python3 -c "$app" "$root/mnt/com.example.alpha/Providers/cloud/docs"
for i in $(seq 100); do
  [ "$(cat "$root/remote/docs/report.txt")" = "edited by a non-root owner's app" ] && break
  sleep 0.1
done
s status
"""

NOBODY_APP = r"""
import json, os, sys
folder = sys.argv[1]
os.getxattr(folder, "user.scopefs.start")
path = os.path.join(folder, "report.txt")
out = {"uid": os.getuid(), "before": os.getxattr(path, "user.scopefs.state").decode()}
out["read"] = open(path).read()
out["after"] = os.getxattr(path, "user.scopefs.state").decode()
with open(path, "w") as f:
    f.write("edited by a non-root owner's app")
print(json.dumps(out))
"""


def test_a_non_root_owners_extension_provider_downloads_and_uploads(tmp_path):
    """S41-S43 with a non-root owner: its daemon runs the extension in the
    sandbox as that user; the app (default sandbox, the owner's uid) reads
    a placeholder, which downloads it, and its edit reaches the store."""
    root = Path(tempfile.mkdtemp(prefix="scopefs-owner-", dir="/tmp"))
    try:
        os.chmod(root, 0o755)
        for folder in ("remote/docs", "mnt", "dev"):
            (root / folder).mkdir(parents=True)
        (root / "remote/docs/report.txt").write_text("the remote report\n")
        for path in [root, *root.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", NOBODY_SESSION, "session"]
        p = run_bounded(
            argv + [str(root), str(scopefs_bin().resolve()), NOBODY_APP], 120, dict(os.environ), what="owner"
        )
        assert p.returncode == 0, describe(p)
        got = json.loads(next(line for line in p.stdout.splitlines() if line.startswith("{")))
        assert got == {
            "uid": NOBODY,
            "before": "dataless",
            "read": "the remote report\n",
            "after": "materialized",
        }, got
        assert (root / "remote/docs/report.txt").read_text() == "edited by a non-root owner's app", describe(p)
        assert "extension providers: 1" in p.stdout and "running (folder 1.0)" in p.stdout, describe(p)
    finally:
        if not mount_count(root / "mnt"):
            shutil.rmtree(root, ignore_errors=True)


HOSTILE = HERE.parent / "ProviderExtensionsTests" / "hostile"


def test_hostile_extensions_cost_themselves_not_the_daemon_or_other_providers(env):
    """S41: three hostile extensions at once, one crashing in a loop, one
    flooding notifications, one answering names that would leave the
    provider (`..`, `a/b`, NUL): the crash loop ends in `failed` (status
    says so), the flood costs a pull at a time, no bad name reaches the
    replica, and an app reads its local provider's file all along."""
    env.base_env.update(SCOPEFS_EXTENSION_RESTART_SECONDS="0.05", SCOPEFS_EXTENSION_POLL_SECONDS="1")
    env.cli("provider", "add", "broken", "--extension", f"/usr/bin/python3 {HOSTILE / 'crash.py'}")
    env.cli("provider", "add", "names", "--extension", f"/usr/bin/python3 {HERE / 'extensions' / 'hostile_names.py'}")
    flooded = env.root / "flooded"
    flooded.mkdir()
    (flooded / "a.txt").write_text("a\n")
    env.cli(
        "provider",
        "add",
        "flood",
        "--extension",
        f"/usr/bin/python3 {HERE / 'extensions' / 'flooding_folder.py'} {flooded}",
        "--writable",
        flooded,
    )
    env.grant(ALPHA, "local:docs")
    mount(env)
    states = wait_for(
        "the crash loop to end in failed",
        lambda: {e["provider"]: e["state"] for e in status(env)["daemon"].get("extensions") or []},
        lambda s: s.get("broken", "").startswith("failed"),
        timeout=30,
    )
    assert states["flood"].startswith("running"), states
    env._record_daemon()  # the extensions' descriptors are the daemon's from here on
    replica = env.state / "extensions" / "names" / "files"
    wait_for("the good names in the replica", lambda: sorted(os.listdir(replica)), lambda n: "folder" in n)
    env.cli("provider", "sync", "names")
    found = sorted(str(path.relative_to(replica)) for path in replica.rglob("*"))
    assert found == ["folder", "folder/child", "good1", "link", "twin"], found
    assert os.readlink(replica / "link") == "/etc" and not (env.root / "escape").exists()
    read = in_scope(env, ALPHA, env.prov(ALPHA, "local", "docs"), "read_text(path + '/report.txt')")
    assert "ok" in read, read
    # The flood: 10,000 `changed` a second cost at most ten pulls a second.
    daemon = status(env)["daemon"]["pid"]
    before, started = _cpu_seconds(daemon), time.monotonic()
    time.sleep(3)
    share = (_cpu_seconds(daemon) - before) / (time.monotonic() - started)
    assert share < 0.6, f"the flood kept the daemon {share:.0%} busy"
    assert (env.state / "extensions" / "flood" / "files" / "a.txt").exists()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PYTHON_CLIENT = HERE.parent.parent / "clients" / "python"
WATCH_STATES = """
import scopefs
notices = scopefs.watch_documents(timeout=4)
emit({"ready": True})
for notice in notices:
    if notice["kind"] == "state":
        emit({"path": notice["path"], "state": os.getxattr(os.path.join(sys.argv[1], notice["path"]), "user.scopefs.state").decode()})
emit({"done": True})
"""


def test_presenters_hear_each_state_change(env, cloud):
    """S42: a presenter of the folder hears `state` (Apple's
    presentedItemDidChangeUbiquityAttributes) when its file is downloaded
    (pin) and evicted, in the default sandbox through the Python client."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    extra = ("--expose", str(PYTHON_CLIENT), "--env", f"PYTHONPATH={PYTHON_CLIENT}")
    watcher = env.app_session(ALPHA, WATCH_STATES, env.app_dir(ALPHA), sandbox=True, extra=extra)
    assert watcher.recv() == {"ready": True}
    env.cli("pin", f"{CLOUD}:docs/report.txt")
    env.cli("unpin", f"{CLOUD}:docs/report.txt")
    env.cli("evict", f"{CLOUD}:docs/report.txt")
    heard = []
    while (notice := watcher.recv(timeout=30)) != {"done": True}:
        heard.append(notice)
    path = f"Providers/{CLOUD}/docs/report.txt"
    assert [n["path"] for n in heard] and all(n["path"].endswith(path) for n in heard), heard
    assert heard[-1]["state"] == "dataless", heard
    assert len(heard) >= 2, f"pin and evict told once between them: {heard}"


def test_an_app_that_never_downloads_gets_edeadlk_and_causes_no_traffic(env, cloud):
    """S42: `scopefs app set APP --downloads never` (Apple's iopolicy for
    indexers and backups): the app lists and stats, reads what is already
    downloaded, and gets EDEADLK for the rest, without a fetch."""
    env.grant(BETA, f"{CLOUD}:docs")
    env.cli("app", "set", BETA, "--downloads", "never")
    indexer, _ = session(env, cloud, app=BETA)
    fetches = [c for c in cloud.calls() if c.startswith("fetch")]
    assert ask(indexer, op="stat", path=cloud.path(BETA, "docs/report.txt"))["ok"]["size"] == len(REPORT)
    # EDEADLK, which Python's errno table names by its alias EDEADLOCK (35).
    assert ask(indexer, op="read", path=cloud.path(BETA, "docs/report.txt")) == {"errno": "EDEADLOCK"}
    assert [c for c in cloud.calls() if c.startswith("fetch")] == fetches, "a never-download app caused a fetch"
    env.cli("pin", f"{CLOUD}:docs/report.txt")
    assert ask(indexer, op="read", path=cloud.path(BETA, "docs/report.txt")) == {"ok": sha(REPORT)}
    env.cli("app", "set", BETA, "--downloads", "on-demand")
    big = (cloud.remote / "docs" / "big.bin").read_bytes()
    assert ask(indexer, op="read", path=cloud.path(BETA, "docs/big.bin"), length=4096) == {"ok": sha(big[:4096])}


def test_the_cache_quota_evicts_least_recently_used_never_pinned(env):
    """`--cache-quota`: past the quota the least recently used content goes
    (the file stays, dataless), never a pinned one."""
    remote = env.root / "quota-remote"
    (remote / "docs").mkdir(parents=True)
    for name in ("one", "two", "three"):
        (remote / "docs" / f"{name}.bin").write_bytes(os.urandom(3 << 20))
    env.cli(
        "provider", "add", CLOUD, "--extension", "folder", "--option", f"root={remote}", "--cache-quota", str(7 << 20)
    )
    mount(env)
    env.cli("provider", "sync", CLOUD)
    env._record_daemon()
    env.grant(ALPHA, f"{CLOUD}:docs")
    env.cli("pin", f"{CLOUD}:docs/one.bin")
    s = env.app_session(ALPHA, APP, env.prov(ALPHA, CLOUD, "docs"), sandbox=True)
    assert s.recv() == {"start": {"ok": "1"}}
    for name in ("two", "three"):
        data = (remote / "docs" / f"{name}.bin").read_bytes()
        assert ask(s, op="read", path=env.prov(ALPHA, CLOUD, f"docs/{name}.bin")) == {"ok": sha(data)}
    # The quota is enforced after a download completes, beside the reader.
    wait_for(
        "the quota's eviction",
        lambda: {
            name: ask(s, op="attr", path=env.prov(ALPHA, CLOUD, f"docs/{name}.bin"), name="user.scopefs.state")["ok"]
            for name in ("one", "two", "three")
        },
        lambda states: states == {"one": "pinned", "two": "dataless", "three": "materialized"},
    )
    status_line = next(e for e in status(env)["daemon"]["extensions"] if e["provider"] == CLOUD)
    assert status_line["cachedBytes"] <= 7 << 20 and status_line["quotaBytes"] == 7 << 20, status_line


def test_a_reference_and_a_bookmark_follow_a_remote_rename_through_the_extensions_id(env, cloud):
    """S23, S26 on an extension provider: an item renamed in the store keeps
    its id (the folder extension's ids are inodes); the replica moves the
    file rather than making a new one, so the reference follows, the file
    grant still covers it, and a bookmark resolves to the new path (stale)."""
    grant, reference = open_document(env, ALPHA, f"{CLOUD}:docs/report.txt")
    ref = env.container(ALPHA, reference.removeprefix("Container/"))
    token = bookmark(env, ALPHA, ref)
    (cloud.remote / "docs" / "report.txt").rename(cloud.remote / "docs" / "renamed.txt")
    cloud.sync()
    target = f"../../Providers/{CLOUD}/docs/renamed.txt"
    wait_for(
        "the reference to follow the remote rename",
        lambda: env.app_json(ALPHA, "emit(outcome(os.readlink, sys.argv[1]))", ref),
        lambda got: got == {"ok": target},
        timeout=10,
    )
    got = resolve_ok(env, ALPHA, token)
    assert got["isStale"] is True and got["pathInApp"] == f"Providers/{CLOUD}/docs/renamed.txt", got
    read = in_scope(env, ALPHA, ref, "read_bytes(path).decode()")
    assert read == {"ok": REPORT.decode()}, read
    assert grant


def extension_pids(marker: Path) -> list[int]:
    """The extension processes this test's daemon started: their command
    line names the test's own remote folder."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"python3") and str(marker).encode() in argv:
                pids.append(int(entry.name))
    return pids


def test_an_extension_killed_mid_upload_loses_nothing_and_uploads_once(env, cloud):
    """S43: the extension is killed (SIGKILL) while it uploads an edit; the
    daemon restarts it and sends the edit again: the store has it, with no
    conflict copy (the second send met the first by content, or the first
    never landed)."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    cloud.switch("slow-modify", "3")
    assert ask(s, op="write", path=cloud.path(ALPHA, "docs/report.txt"), data="edited, then killed\n") == {
        "ok": "written"
    }
    wait_for("the upload to start", cloud.calls, lambda calls: any(c.startswith("modify") for c in calls))
    killed = extension_pids(cloud.remote)
    assert killed, "no extension process found"
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    cloud.switch("slow-modify", None)
    wait_for(
        "the edit in the store after the restart",
        lambda: (cloud.remote / "docs" / "report.txt").read_bytes(),
        lambda data: data == b"edited, then killed\n",
        timeout=20,
    )
    cloud.sync()
    assert sorted(os.listdir(cloud.remote / "docs")) == ["big.bin", "report.txt"]
    assert ask(s, op="attr", path=cloud.path(ALPHA, "docs/report.txt"), name="user.scopefs.state") == {
        "ok": "materialized"
    }
    restarted = wait_events(env, lambda e: "extension.exited" in (e.get("operation") or ""), kind="extension")
    assert restarted


def test_a_daemon_killed_after_the_store_took_an_edit_does_not_upload_it_twice(env, cloud):
    """S43: the store has taken the edit, but the daemon is killed (SIGKILL)
    before it hears so. The next daemon finds the edit still marked and
    sends it again with the old base: the store answers `conflict`, the
    daemon compares the content, finds its own edit, and keeps no conflict
    copy: one edit, in the store once."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    cloud.switch("linger-modify", "30")
    assert ask(s, op="write", path=cloud.path(ALPHA, "docs/report.txt"), data="saved once\n") == {"ok": "written"}
    wait_for("the store to take the edit", cloud.calls, lambda calls: any(c.startswith("modified") for c in calls))
    s.kill()
    env.kill_daemon()
    env.cli("unmount", env.mnt, expect=None)
    env.mounted = False
    cloud.switch("linger-modify", None)
    mount(env)
    cloud.sync()
    wait_for(
        "the edit to be settled",
        cloud.extension_status,
        lambda st: st["queued"] == 0 and st["conflicts"] == 0,
        timeout=20,
    )
    assert (cloud.remote / "docs" / "report.txt").read_bytes() == b"saved once\n"
    assert sorted(os.listdir(cloud.remote / "docs")) == ["big.bin", "report.txt"], "a conflict copy of our own edit"
    calls = cloud.calls()
    # Sent again after the restart, met by content (item, then fetch to compare).
    again = calls[calls.index(next(c for c in calls if c.startswith("modified"))) + 1 :]
    assert any(c.startswith("modify") for c in again) and any(c.startswith("fetch") for c in again), again


RAW_CONTENT_OPS = """
import socket
answers = {}
for label, path in (("owner", sys.argv[1]), ("app", sys.argv[2])):
    for action in ("sync", "pin", "unpin", "evict"):
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        request = {"op": "providerContent", "contentProvider": "cloud", "contentAction": action, "path": "docs"}
        s.sendall(json.dumps(request).encode() + b"\\n")
        answers[label + ":" + action] = json.loads(s.makefile().readline())
        s.close()
emit(answers)
"""


def test_an_app_process_cannot_sync_pin_or_evict(env, cloud):
    """SPEC S5, S41: `providerContent` (sync, pin, unpin, evict) is the
    owner's: an app that writes it to the owner's socket or to the app
    socket gets code 77, and nothing it asked for happens (the pinned file
    stays pinned)."""
    env.grant(ALPHA, f"{CLOUD}:docs")
    env.cli("pin", f"{CLOUD}:docs/report.txt")
    got = env.app_json(ALPHA, RAW_CONTENT_OPS, env.state / "control.sock", env.state / "app.sock")
    for key, answer in got.items():
        assert answer.get("ok") is False and answer.get("code") == 77, (key, answer)
    assert cloud.extension_status()["pinned"] == 1


READ_AT_ONCE = r"""
import threading
folder = sys.argv[1]
os.getxattr(folder, "user.scopefs.start")
results = {}

def read(name):
    # os.read, not a buffered file's read, which answers EAGAIN with None.
    fd = os.open(os.path.join(folder, name), os.O_RDONLY)
    try:
        results[name] = len(os.read(fd, 1 << 20))
    except OSError as exc:
        results[name] = ename(exc)
    finally:
        os.close(fd)

threads = [threading.Thread(target=read, args=(f"wait{i}.txt",)) for i in range(int(sys.argv[2]))]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
emit(sorted(map(str, results.values())))
"""


def test_an_app_waits_for_at_most_four_downloads_and_others_are_not_refused(env, cloud):
    """S40: a read waiting for a download holds one of the mount's 16 FUSE
    workers, so one app may have four waiting at once (across providers);
    a fifth gets EAGAIN at once and a `download-budget-exhausted` event.
    Another app's read meanwhile waits for its own download, unrefused.
    On the old code all six of the app's reads waited (and 16 took every
    worker)."""
    for i in range(6):
        (cloud.remote / "docs" / f"wait{i}.txt").write_bytes(b"%d\n" % i * 100)
    cloud.sync()
    env.grant(ALPHA, f"{CLOUD}:docs")
    env.grant(BETA, f"{CLOUD}:docs")
    cloud.switch("slow-fetch", "4")
    outcome: dict = {}
    reader = threading.Thread(
        target=lambda: outcome.update(
            alpha=env.app_json(ALPHA, READ_AT_ONCE, cloud.path(ALPHA, "docs"), 6, sandbox=True)
        )
    )
    reader.start()
    try:
        wait_for(
            "four fetches for the app's waits",
            cloud.calls,
            lambda calls: sum(c.startswith("fetch") for c in calls) >= 4,
        )
        other = in_scope(env, BETA, cloud.path(BETA, "docs/report.txt"), "len(open(path, 'rb').read())")
    finally:
        reader.join(timeout=60)
    assert other == {"ok": len(REPORT)}, other
    assert outcome.get("alpha") == ["200", "200", "200", "200", "EAGAIN", "EAGAIN"], outcome
    refused = wait_events(env, lambda e: e.get("errno") == 11, kind="download-budget-exhausted", app=ALPHA)
    assert refused[0].get("count") == 4 and refused[0].get("path") == f"/Providers/{CLOUD}", refused
    # Its waits given back, the app reads the rest.
    cloud.switch("slow-fetch", None)
    again = env.app_json(ALPHA, READ_AT_ONCE, cloud.path(ALPHA, "docs"), 6, sandbox=True)
    assert again == ["200"] * 6, again


def test_a_streamed_fetch_serves_readers_before_it_ends(env):
    """S42, docs/PROVIDERS.md `streamsFetch`: an extension that names its
    staged file in `$/progress` has its bytes served as they come. A reader
    that goes on past the first block gets the rest of the file in one
    fetch, and reads its first half while the extension still holds the
    second; the rest comes when it is released. Two fetches for the file."""
    cloud = Cloud(env)
    cloud.switch("streams", "1")
    mount(env)
    cloud.sync()
    env._record_daemon()
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    path = cloud.path(ALPHA, "docs/big.bin")
    big = (cloud.remote / "docs" / "big.bin").read_bytes()
    mib = 1 << 20
    assert ask(s, op="read", path=path, offset=0, length=4096) == {"ok": sha(big[:4096])}
    started = time.monotonic()
    assert ask(s, op="read", path=path, offset=mib, length=4096) == {"ok": sha(big[mib : mib + 4096])}
    streamed = [c for c in cloud.calls() if c.startswith("streamed")]
    assert [c.split()[2:] for c in streamed] == [[str(mib), str((BIG - mib) // 2)]], cloud.calls()
    assert not (cloud.control / "release-fetch").exists() and time.monotonic() - started < 20
    assert ask(s, op="read", path=path, offset=5 * mib, length=mib) == {"ok": sha(big[5 * mib : 6 * mib])}
    cloud.switch("release-fetch", "1")
    assert ask(s, op="read", path=path, offset=BIG - mib, length=mib) == {"ok": sha(big[-mib:])}
    assert ask(s, op="read", path=path) == {"ok": sha(big)}
    fetches = [c for c in cloud.calls() if c.startswith("fetch")]
    assert len(fetches) == 2, cloud.calls()
    assert ask(s, op="attr", path=path, name="user.scopefs.state") == {"ok": "materialized"}


def test_streams_their_readers_left_are_bounded(env):
    """S40: a stream whose reader got its bytes and left runs on (the
    reader comes back for the next ones), but an app that starts streams
    and moves on cannot hold every call the extension takes: past four
    such streams, a new one cancels the oldest."""
    cloud = Cloud(env)
    names = [f"stream{i}.bin" for i in range(6)]
    for name in names:
        (cloud.remote / "docs" / name).write_bytes(os.urandom(10 << 20))
    cloud.switch("streams", "1")
    mount(env)
    cloud.sync()
    env._record_daemon()
    env.grant(ALPHA, f"{CLOUD}:docs")
    s, _ = session(env, cloud)
    mib = 1 << 20
    streamed_ids = []
    for name in names:
        path = cloud.path(ALPHA, f"docs/{name}")
        data = (cloud.remote / "docs" / name).read_bytes()
        assert ask(s, op="read", path=path, offset=0, length=4096) == {"ok": sha(data[:4096])}
        assert ask(s, op="read", path=path, offset=mib, length=4096) == {"ok": sha(data[mib : mib + 4096])}
        streamed_ids.append([c for c in cloud.calls() if c.startswith("streamed")][-1].split()[1])
    assert len(set(streamed_ids)) == 6, cloud.calls()
    cancelled = wait_for(
        "the two oldest streams cancelled",
        lambda: {c.split()[1] for c in cloud.calls() if c.startswith("cancelled")},
        lambda ids: len(ids) >= 2,
    )
    assert cancelled == set(streamed_ids[:2]), (cancelled, streamed_ids)
    cloud.switch("release-fetch", "1")
    for name in names:
        data = (cloud.remote / "docs" / name).read_bytes()
        assert ask(s, op="read", path=cloud.path(ALPHA, f"docs/{name}")) == {"ok": sha(data)}
