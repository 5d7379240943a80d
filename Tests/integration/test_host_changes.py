"""Long-lived kernel caches with exact invalidation (issue 21; SPEC S37, S14).

With a host-change channel (fanotify or inotify) the kernel may keep
entries, negative entries, attributes and pages for `--cache-timeout`
(300 s here), and every change made on the host outside the mount drops
what it makes stale at once. Each test warms the app's caches first, so a
change that is not pushed to the kernel would stay invisible for minutes.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from doc_scope_helpers import open_document
from host_change_mounts import mount_long
from scopefs_harness import ALPHA, BETA, ITEMS_MOVE, LOCAL, MOUNT_TIMEOUT, describe, mount_count, wait_for

TRIALS = 20
VISIBLE_WITHIN = 0.100  # seconds (issue 21: p99 <= 100 ms)
POLL = 0.005

# An app process that answers commands on stdin: "warm" fills the kernel's
# caches for the paths named; "wait" polls every 5 ms until the expected
# state shows and reports how long after `t0` (the test's monotonic clock,
# taken just before the host change) it did.
WATCHER = r"""
import time

def state(kind, path, other):
    if kind in ("create", "mkdir"):
        return os.path.isdir(path) if kind == "mkdir" else os.path.exists(path)
    if kind == "write":
        try:
            return read_bytes(path).decode()
        except OSError as exc:
            return ename(exc)
    if kind == "chmod":
        return oct(os.stat(path).st_mode & 0o777)
    if kind == "rename":
        return [os.path.exists(path), os.path.exists(other)]
    if kind == "unlink":
        return os.path.exists(path)
    if kind == "link":
        return [os.path.exists(other), os.stat(path).st_nlink]
    if kind == "readlink":
        return outcome(os.readlink, path)
    if kind == "grant":
        return outcome(lambda: read_bytes(path).decode("utf-8", "replace"))
    if kind == "listing":
        return outcome(lambda: sorted(os.listdir(path)))
    raise ValueError(kind)

while True:
    line = sys.stdin.readline()
    if not line:
        break
    cmd = json.loads(line)
    if cmd["op"] == "warm":
        for path in cmd["paths"]:
            for _ in range(2):
                outcome(os.stat, path)
                outcome(lambda: read_bytes(path))
                outcome(os.listdir, os.path.dirname(path))
        emit({"warm": [state(cmd["kind"], cmd["path"], cmd.get("other")) if cmd.get("kind") else None]})
    elif cmd["op"] == "wait":
        want, t0, limit = cmd["want"], cmd["t0"], cmd.get("limit", 2.0)
        while True:
            now = time.monotonic()
            try:
                seen = state(cmd["kind"], cmd["path"], cmd.get("other"))
            except OSError as exc:
                seen = ename(exc)
            if seen == want or now - t0 > limit:
                break
            time.sleep(0.005)
        emit({"seen": seen, "latency": now - t0})
"""


class Watcher:
    def __init__(self, env, app=ALPHA):
        self.session = env.app_session(app, WATCHER)

    def warm(self, *paths, kind=None, path=None, other=None):
        self.session.send(json.dumps({"op": "warm", "paths": list(paths), "kind": kind, "path": path, "other": other}))
        return self.session.recv()["warm"][0]

    def wait(self, kind, path, want, t0, other=None, limit=2.0):
        self.session.send(
            json.dumps(
                {"op": "wait", "kind": kind, "path": path, "other": other, "want": want, "t0": t0, "limit": limit}
            )
        )
        return self.session.recv()


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def host_change(kind, folder, n):
    """Prepares trial `n` of `kind` in the host folder; returns (paths to warm,
    the app-side path and other path relative to the folder, the change,
    the state the app must then see, the state before)."""
    a, b = f"{kind}-{n}", f"{kind}-{n}-b"
    pa, pb = folder / a, folder / b
    if kind in ("create", "mkdir"):
        change = (lambda: pa.write_bytes(b"new\n")) if kind == "create" else (lambda: pa.mkdir())
        return [a], a, None, change, True, False
    pa.write_bytes(b"old content\n")
    if kind == "write":
        return [a], a, None, lambda: pa.write_bytes(b"new, longer content\n"), "new, longer content\n", "old content\n"
    if kind == "chmod":
        pa.chmod(0o644)
        return [a], a, None, lambda: pa.chmod(0o600), oct(0o600), oct(0o644)
    if kind == "rename":
        return [a, b], a, b, lambda: os.rename(pa, pb), [False, True], [True, False]
    if kind == "unlink":
        return [a], a, None, lambda: pa.unlink(), False, True
    if kind == "link":
        return [a, b], a, b, lambda: os.link(pa, pb), [True, 2], [False, 1]
    raise ValueError(kind)


KINDS = ("create", "write", "chmod", "rename", "unlink", "link", "mkdir")


@pytest.mark.scopefs_timeout(240)
@pytest.mark.parametrize("channel", ["fanotify", "inotify"])
def test_host_changes_show_within_100ms_with_long_caches(env, channel):
    """Issue 21, SPEC S37: with 300 s entry/attribute timeouts, a host create,
    write, chmod, rename, unlink, hard link and mkdir in a granted folder each
    show through the mount to an app process within 100 ms, every trial (the
    app's caches were warmed first: without invalidation it would see the old
    state for minutes). Prints p50/p99 per kind."""
    env.grant(ALPHA, f"{LOCAL}:work")
    mount_long(env, channel)
    folder = env.backing(LOCAL) / "work"
    app_folder = env.prov(ALPHA, LOCAL, "work")
    watcher = Watcher(env)
    report, slow, failed = {}, [], []
    for kind in KINDS:
        latencies = []
        for n in range(TRIALS):
            # A trial slower than 100 ms is run once more (fresh names): on
            # a loaded machine one scheduling delay must not fail the test,
            # two in a row do. Without invalidation every trial would take
            # the whole cache timeout.
            for attempt in range(2):
                latency = trial(watcher, kind, folder, app_folder, f"{n}-{attempt}")
                latencies.append(latency)
                if latency <= VISIBLE_WITHIN:
                    break
                slow.append((kind, n, attempt, round(latency * 1000, 1)))
            else:
                failed.append(slow[-1])
        report[kind] = (percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000)
    print(f"\n{channel}: host change -> visible through the mount (ms, {TRIALS} trials):")
    for kind, (p50, p99) in report.items():
        print(f"  {kind:7s} p50 {p50:6.1f}  p99 {p99:6.1f}")
    if slow:
        print(f"  over 100 ms (kind, trial, attempt, ms): {slow}")
    assert not failed, f"{channel}: changes visible only after more than 100 ms, twice in a row: {failed}"


def trial(watcher, kind, folder, app_folder, n) -> float:
    """One host change of `kind` after the app warmed its caches; returns
    how long after the change the app saw it."""
    warm, a, b, change, want, before = host_change(kind, folder, n)
    pa = os.path.join(app_folder, a)
    pb = os.path.join(app_folder, b) if b else None
    seen_before = watcher.warm(*[os.path.join(app_folder, w) for w in warm], kind=kind, path=pa, other=pb)
    assert seen_before == before, (kind, n, seen_before)
    t0 = time.monotonic()
    change()
    result = watcher.wait(kind, pa, want, t0, other=pb)
    assert result["seen"] == want, f"{kind} #{n}: still {result['seen']!r} after {result['latency']:.3f} s"
    return result["latency"]


def test_revoke_denies_before_the_cli_returns_with_long_caches(env):
    """SPEC S14 with 300 s caches: once `scopefs revoke` returns, the app's
    next read of a file it just read (entry, attributes and pages cached) is
    denied — no cached answer outlives the grant."""
    gid = env.grant(ALPHA, f"{LOCAL}:docs")
    mount_long(env, "auto")
    path = env.prov(ALPHA, LOCAL, "docs/report.txt")
    watcher = Watcher(env)
    assert watcher.warm(path, kind="grant", path=path)["ok"].startswith("report line")
    env.revoke(ALPHA, gid)
    result = watcher.wait("grant", path, {"errno": "EPERM"}, time.monotonic(), limit=0)
    assert result["seen"] in ({"errno": "EPERM"}, {"errno": "ENOENT"}), result


def test_new_grant_shows_at_once_after_a_cached_miss(env):
    """Issue 21, SPEC S2/S13: a name the app looked up and missed (a miss
    the kernel may cache for 300 s) shows at once when the owner grants it:
    the new grant drops what was cached on its way. Also a file created on
    the host under an existing grant after a cached miss (negative entry)."""
    env.grant(ALPHA, f"{LOCAL}:work")
    mount_long(env, "auto")
    watcher = Watcher(env)
    # A host miss inside the grant: a negative entry the host create drops.
    late = env.prov(ALPHA, LOCAL, "work/late.txt")
    assert watcher.warm(late, kind="create", path=late) is False
    (env.backing(LOCAL) / "work" / "late.txt").write_bytes(b"late\n")
    assert watcher.wait("create", late, True, time.monotonic(), limit=VISIBLE_WITHIN)["seen"] is True
    # An item outside every grant, missed, then granted.
    photo = env.prov(ALPHA, LOCAL, "photos/p.jpg")
    assert watcher.warm(photo, kind="grant", path=photo) == {"errno": "ENOENT"}
    env.grant(ALPHA, f"{LOCAL}:photos")
    result = watcher.wait("grant", photo, {"ok": "\ufffd\ufffd not really a jpeg"}, time.monotonic(), limit=0)
    assert "ok" in result["seen"], result


def test_beta_sees_alphas_changes_through_the_mount(env):
    """Issue 21, SPEC S3: each app has its own nodes for the same host folder;
    a file ALPHA creates and removes through the mount shows to BETA (who
    warmed its caches of the folder) at once, though the daemon made the
    change itself."""
    env.grant(ALPHA, f"{LOCAL}:work")
    env.grant(BETA, f"{LOCAL}:work")
    mount_long(env, "auto")
    beta = Watcher(env, BETA)
    path_b = env.prov(BETA, LOCAL, "work/shared.txt")
    assert beta.warm(path_b, kind="create", path=path_b) is False
    env.app_py(ALPHA, "write_text(sys.argv[1], 'from alpha')", env.prov(ALPHA, LOCAL, "work/shared.txt"))
    assert beta.wait("create", path_b, True, time.monotonic(), limit=VISIBLE_WITHIN)["seen"] is True
    assert beta.warm(path_b, kind="write", path=path_b) == "from alpha"
    env.app_py(ALPHA, "write_text(sys.argv[1], 'from alpha, again')", env.prov(ALPHA, LOCAL, "work/shared.txt"))
    assert (
        beta.wait("write", path_b, "from alpha, again", time.monotonic(), limit=VISIBLE_WITHIN)["seen"]
        == "from alpha, again"
    )
    env.app_py(ALPHA, "os.unlink(sys.argv[1])", env.prov(ALPHA, LOCAL, "work/shared.txt"))
    assert beta.wait("unlink", path_b, False, time.monotonic(), limit=VISIBLE_WITHIN)["seen"] is False


def read_daemon_log(env, until: str = "overflowed", timeout: float = 15) -> str:
    """The daemon's log once it holds `until` (the thread that writes it
    may lag on a loaded machine)."""

    def text() -> str:
        try:
            return (env.state / "daemon.log").read_text(errors="replace")
        except OSError:
            return ""

    return wait_for(f"{until!r} in daemon.log", text, lambda log: until in log, timeout)


@pytest.mark.scopefs_timeout(180)
def test_inotify_queue_overflow_drops_every_cached_answer(env):
    """Issue 21: when the inotify queue overflows (events lost), the daemon
    drops every cached entry and attribute instead of serving stale answers.
    The queue is made tiny (fs.inotify.max_queued_events, restored after),
    the daemon is stopped (SIGSTOP) while the host makes more changes than
    it holds, then resumed: every change shows."""
    limit_path = "/proc/sys/fs/inotify/max_queued_events"
    old_limit = open(limit_path).read().strip()
    try:
        with open(limit_path, "w") as f:
            f.write("64")
        env.grant(ALPHA, f"{LOCAL}:work")
        mount_long(env, "inotify", "--log", "file")
    finally:
        with open(limit_path, "w") as f:
            f.write(old_limit)
    check_overflow(env)
    assert "overflowed" in read_daemon_log(env)


@pytest.mark.scopefs_timeout(180)
def test_fanotify_queue_holds_a_flood_bigger_than_the_default(env):
    """Issue 21, S27a: the same with fanotify, which sees every write of the
    file system: the stopped daemon is sent more host changes than
    fs.fanotify.max_queued_events (16384; new names, since the kernel
    merges repeated ones). Its queue is unbounded: nothing overflows, no
    change is lost, and every change shows."""
    env.grant(ALPHA, f"{LOCAL}:work")
    mount_long(env, "fanotify", "--log", "file")
    check_overflow(env, flood=int(open("/proc/sys/fs/fanotify/max_queued_events").read()) + 8000)
    assert "overflowed" not in read_daemon_log(env, until="mounted")


def check_overflow(env, flood=200):
    folder = env.backing(LOCAL) / "work"
    app_folder = env.prov(ALPHA, LOCAL, "work")
    for n in range(5):
        (folder / f"kept-{n}").write_bytes(b"old\n")
    (folder / "churn").mkdir()
    watcher = Watcher(env)
    files = [os.path.join(app_folder, f"kept-{n}") for n in range(5)]
    missing = os.path.join(app_folder, "appears")
    for path in files:
        assert watcher.warm(path, kind="write", path=path) == "old\n"
    assert watcher.warm(missing, kind="create", path=missing) is False
    churn_app = os.path.join(app_folder, "churn")
    assert watcher.warm(churn_app, kind="listing", path=churn_app) == {"ok": []}
    pid = env.daemon.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        # Distinct names: the kernel merges a repeated event into the one
        # queued, so only new names fill the queue.
        for n in range(flood):
            (folder / "churn" / f"f{n}").write_bytes(b"x")
        for n in range(5):
            (folder / f"kept-{n}").write_bytes(b"changed while stopped\n")
        (folder / "appears").write_bytes(b"here\n")
        for n in range(flood):
            (folder / "churn" / f"f{n}").chmod(0o600)
    finally:
        os.kill(pid, signal.SIGCONT)
    t0 = time.monotonic()
    for path in files:
        assert watcher.wait("write", path, "changed while stopped\n", t0, limit=5)["seen"] == "changed while stopped\n"
    assert watcher.wait("create", missing, True, t0, limit=5)["seen"] is True
    # The folders' cached listings went too (FOPEN_CACHE_DIR).
    listed = {"ok": sorted(os.listdir(folder))}
    assert watcher.wait("listing", app_folder, listed, t0, limit=5)["seen"] == listed
    churn = {"ok": sorted(os.listdir(folder / "churn"))}
    assert watcher.wait("listing", os.path.join(app_folder, "churn"), churn, t0, limit=5)["seen"] == churn


@pytest.mark.scopefs_timeout(180)
def test_app_flooding_changes_cannot_crash_the_daemon_or_make_it_stale(env):
    """Issue 21, attack: an app floods its granted folder with creates,
    renames and removals (tens of thousands of events on the channel). The
    daemon keeps serving, its memory stays bounded, and a host change made
    after the flood still shows within 100 ms."""
    env.grant(ALPHA, f"{LOCAL}:work")
    mount_long(env, "auto")
    pid = env.daemon.pid

    def rss_kib():
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    flood = r"""
base = sys.argv[1]
os.makedirs(os.path.join(base, "flood"), exist_ok=True)
for n in range(int(sys.argv[2])):
    p = os.path.join(base, "flood", "f%d" % (n % 500))
    with open(p, "w") as f:
        f.write("x")
    os.rename(p, p + ".r")
    os.unlink(p + ".r")
emit({"done": True})
"""
    app_folder = env.prov(ALPHA, LOCAL, "work")
    env.app_json(ALPHA, flood, app_folder, 500)
    before = rss_kib()
    env.app_json(ALPHA, flood, app_folder, 4000)
    after = rss_kib()
    assert after - before < 64 * 1024, f"daemon RSS grew from {before} to {after} KiB during the flood"
    watcher = Watcher(env)
    path = os.path.join(app_folder, "after-flood")
    assert watcher.warm(path, kind="create", path=path) is False
    t0 = time.monotonic()
    (env.backing(LOCAL) / "work" / "after-flood").write_bytes(b"x")
    assert watcher.wait("create", path, True, t0, limit=VISIBLE_WITHIN)["seen"] is True
    assert os.path.exists(f"/proc/{pid}"), "the daemon died during the flood"


def test_no_channel_keeps_short_timeouts(env):
    """`--host-changes none`: no channel, `status` says so, and the kernel's
    caches expire after 1 s (the default without a channel): a host create
    shows within about a second."""
    env.grant(ALPHA, f"{LOCAL}:work")
    env.cli(*env.mount_args(), "--host-changes", "none", timeout=MOUNT_TIMEOUT)
    env.mounted = True
    env._record_daemon()
    daemon = json.loads(env.cli("status", "--json").stdout)["daemon"]
    assert (daemon["hostChanges"], daemon["cacheTimeout"]) == ("none", 1.0)
    text = env.cli("status").stdout
    assert "host changes: none; cache timeout: 1 s" in text, text
    watcher = Watcher(env)
    path = env.prov(ALPHA, LOCAL, "work/new")
    assert watcher.warm(path, kind="create", path=path) is False
    t0 = time.monotonic()
    (env.backing(LOCAL) / "work" / "new").write_bytes(b"x")
    result = watcher.wait("create", path, True, t0, limit=3)
    assert result["seen"] is True and result["latency"] < 2.5, result


def test_bad_cache_timeout_and_channel_are_usage_errors(env):
    """docs/CLI.md: a negative --cache-timeout or an unknown channel is a
    usage error (exit 64) before anything is mounted."""
    for extra in (["--cache-timeout", "-1"], ["--host-changes", "dnotify"]):
        p = env.cli(*env.mount_args(), *extra, expect=None, timeout=MOUNT_TIMEOUT)
        assert p.returncode == 64, describe(p)
        assert not mount_count(env.mnt)


@pytest.mark.sqlite_store(ITEMS_MOVE)
def test_host_rename_reaches_references_at_once(env):
    """Issue 21 with issue 17 (SPEC S23): a host rename in a folder the
    kernel holds wakes the item locator through the host-change channel, so
    the app's reference follows within 300 ms each time (the locator's own
    pass comes once a second: five trials all that fast would be luck)."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    _, reference = open_document(env, ALPHA, f"{LOCAL}:docs/report.txt")
    mount_long(env, "auto")
    ref = env.container(ALPHA, reference.split("/", 1)[1])
    watcher = Watcher(env)
    folder = env.backing(LOCAL) / "docs"
    name, latencies = "report.txt", []
    for n in range(5):
        watcher.warm(env.prov(ALPHA, LOCAL, f"docs/{name}"))
        target = f"../../Providers/{LOCAL}/docs/{name}"
        assert watcher.wait("readlink", ref, {"ok": target}, time.monotonic(), limit=5)["seen"] == {"ok": target}
        new = f"renamed-{n}.txt"
        t0 = time.monotonic()
        os.rename(folder / name, folder / new)
        want = {"ok": f"../../Providers/{LOCAL}/docs/{new}"}
        result = watcher.wait("readlink", ref, want, t0, limit=3)
        assert result["seen"] == want, result
        latencies.append(result["latency"])
        name = new
    print(f"\nhost rename -> reference follows (ms): {[round(x * 1000, 1) for x in latencies]}")
    assert max(latencies) <= 0.300, latencies


def listing_trial(watcher, kind, folder, app_folder, n) -> float:
    """One host create, unlink or rename in a folder the app listed twice
    (its listing cached by the kernel); returns how long after the change
    the app's listing matched the host's."""
    a, b = f"{kind}-{n}", f"{kind}-{n}-b"
    if kind != "create":
        (folder / a).write_bytes(b"x")
    change = {
        "create": lambda: (folder / a).write_bytes(b"x"),
        "unlink": lambda: (folder / a).unlink(),
        "rename": lambda: os.rename(folder / a, folder / b),
    }[kind]
    before = {"ok": sorted(os.listdir(folder))}
    assert watcher.warm(app_folder, kind="listing", path=app_folder) == before
    t0 = time.monotonic()
    change()
    want = {"ok": sorted(os.listdir(folder))}
    result = watcher.wait("listing", app_folder, want, t0)
    assert result["seen"] == want, f"{kind} #{n}: listing still {result['seen']!r} after {result['latency']:.3f} s"
    return result["latency"]


@pytest.mark.scopefs_timeout(180)
@pytest.mark.parametrize("channel", ["fanotify", "inotify"])
def test_cached_listing_follows_host_changes_within_100ms(env, channel):
    """Issue 21, SPEC S2/S37: the kernel keeps a watched folder's listing
    (FOPEN_CACHE_DIR); a host create, unlink or rename in it drops the
    listing, so the app's next listing shows the change within 100 ms (a
    trial over 100 ms is run once more, as above)."""
    env.grant(ALPHA, f"{LOCAL}:work")
    mount_long(env, channel)
    folder = env.backing(LOCAL) / "work"
    app_folder = env.prov(ALPHA, LOCAL, "work")
    watcher = Watcher(env)
    failed = []
    for kind in ("create", "unlink", "rename"):
        for n in range(10):
            for attempt in range(2):
                if listing_trial(watcher, kind, folder, app_folder, f"{n}-{attempt}") <= VISIBLE_WITHIN:
                    break
            else:
                failed.append((kind, n))
    assert not failed, f"{channel}: listings changed only after more than 100 ms, twice in a row: {failed}"


def test_cached_listing_follows_grants_and_forgets(env):
    """Issue 21, SPEC S2/S13: a bare folder on the way to grants lists only
    the children leading to them; with its listing cached by the kernel, a
    new grant of a sibling shows in the listing at once (the CLI has
    returned) and a forgotten grant's item goes from it at once."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    mount_long(env, "auto")
    root = env.prov(ALPHA, LOCAL, "")
    watcher = Watcher(env)
    assert watcher.warm(root, kind="listing", path=root) == {"ok": ["docs"]}
    gid = env.grant(ALPHA, f"{LOCAL}:photos")
    result = watcher.wait("listing", root, {"ok": ["docs", "photos"]}, time.monotonic(), limit=0)
    assert result["seen"] == {"ok": ["docs", "photos"]}, result
    assert watcher.warm(root, kind="listing", path=root) == {"ok": ["docs", "photos"]}
    env.revoke(ALPHA, gid)
    # S14: a revoked item stays listed.
    assert watcher.warm(root, kind="listing", path=root) == {"ok": ["docs", "photos"]}
    env.cli("forget", ALPHA, gid)
    result = watcher.wait("listing", root, {"ok": ["docs"]}, time.monotonic(), limit=0)
    assert result["seen"] == {"ok": ["docs"]}, result


# Holds a descriptor on a folder and lists and stats through it (the kernel
# keeps the listing, the entry and the attributes); on "go", does both every
# 10 ms until both are refused, each use in time to be cached again.
HOLDS_AND_RELISTS = r"""
import time
dfd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
def uses():
    return {"list": outcome(lambda: sorted(os.listdir(dfd))),
            "stat": outcome(lambda: os.stat("f.txt", dir_fd=dfd).st_size)}
step({"before": [uses() for _ in range(2)][-1]})
t0 = time.monotonic()
while True:
    seen = uses()
    if all("errno" in v for v in seen.values()) or time.monotonic() - t0 > 3.0:
        break
    time.sleep(0.01)
emit({"seen": seen, "after": time.monotonic() - t0})
"""


def app_holding_a_granted_folder(env, channel):
    """An app of a long-cache mount holding a descriptor on `deep/a/b`
    inside its grant of `deep/a`, having listed it and stat'ed a file
    through it; it goes on using both when sent a line."""
    backing = env.backing(LOCAL)
    (backing / "deep" / "a" / "b").mkdir(parents=True, exist_ok=True)
    (backing / "deep" / "a" / "b" / "f.txt").write_bytes(b"f\n")
    env.grant(ALPHA, f"{LOCAL}:deep/a")
    mount_long(env, channel)
    app = env.app_session(ALPHA, HOLDS_AND_RELISTS, env.prov(ALPHA, LOCAL, "deep/a/b"))
    before = app.recv()["before"]
    assert "f.txt" in before["list"].get("ok", []) and before["stat"] == {"ok": 2}, before
    return app


def assert_cut_within_a_second(got, channel):
    """Both uses refused, within S33's second (and some slack)."""
    refused = ({"errno": "ENOENT"}, {"errno": "EPERM"})
    assert got["seen"]["list"] in refused and got["seen"]["stat"] in refused, (
        f"{channel}: still usable {got['after']:.2f} s after the move: {got}"
    )
    assert got["after"] <= 1.2, got


@pytest.mark.parametrize("channel", ["fanotify", "inotify"])
def test_kept_listing_of_a_held_folder_goes_when_an_ancestor_moves_out(env, channel):
    """SPEC S33 (amended), issue 21 (the CI finding that switched kept
    listings off): the app holds a descriptor on `deep/a/b`, inside the
    granted `deep/a`, and has listed it (the kernel keeps the listing). The
    owner moves `deep` out of the provider on the host: relisting through
    the descriptor (Python's listdir(fd) rewinds, with no opendir the daemon
    could refuse) and a stat of a file through it are refused within the
    1 s of S33, although the app keeps using both every 10 ms (each use
    between the move and a stale location check would be cached for 300 s)."""
    backing = env.backing(LOCAL)
    app = app_holding_a_granted_folder(env, channel)
    os.rename(backing / "deep", env.root / "backing" / "escape" / "deep")
    app.send()
    got = app.recv()
    assert app.finish() == 0, app.stderr()
    assert_cut_within_a_second(got, channel)


@pytest.mark.parametrize("channel", ["fanotify", "inotify"])
def test_held_folder_cut_when_the_provider_directory_itself_moves(env, channel):
    """SPEC S33 (amended), issue 21: as above, but the owner moves the
    provider's own directory on the host (no folder of any view is its
    parent): relisting and stat through the held descriptor are refused
    within the 1 s of S33, although the app keeps using both every 10 ms."""
    backing = env.backing(LOCAL)
    app = app_holding_a_granted_folder(env, channel)
    moved = backing.parent / "local-moved"
    os.rename(backing, moved)
    try:
        app.send()
        got = app.recv()
        assert app.finish() == 0, app.stderr()
    finally:
        os.rename(moved, backing)
    assert_cut_within_a_second(got, channel)
