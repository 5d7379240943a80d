"""Provider extensions on real remote stores, over a link with real faults
(issue 32's "done when"; SPEC S41, S42, S43).

The S3 extension against moto's S3 server and the rclone extension against
`rclone serve webdav` and `rclone serve sftp`, each remote in a network
namespace of its own (remotes.py). An app in the default sandbox, on the
default mount (strict scopes), opens, reads, edits and saves a document;
a remote change made while the link is down meets the app's offline edit
as a conflict copy once the link is back; a read while the store cannot
be reached fails with EIO and works again after. The built-in extensions
run on either store (`SCOPEFS_IT_STORE=postgresql`: a fleet's provider,
decision 63).
"""

from __future__ import annotations

import hashlib
import json
import time

import pytest
from doc_scope_helpers import mount, wait_events
from scopefs_harness import ALPHA, wait_for

CLOUD = "cloud"
V1 = b"version one\n"

# An app process (default sandbox): starts a scope on argv[1], then runs
# the commands the test sends (one JSON object per line).
APP = r"""
import hashlib, json
folder = sys.argv[1]
emit({"start": outcome(lambda: os.getxattr(folder, "user.scopefs.start").decode())})
while True:
    line = sys.stdin.readline()
    if not line:
        break
    cmd = json.loads(line)
    path = os.path.join(folder, cmd["name"]) if "name" in cmd else folder
    if cmd["op"] == "read":
        emit(outcome(lambda: hashlib.sha256(read_bytes(path)).hexdigest()))
    elif cmd["op"] == "save":
        def save():
            with open(path, "wb") as f:
                f.write(cmd["data"].encode())
            return "saved"
        emit(outcome(save))
    elif cmd["op"] == "list":
        emit(outcome(lambda: sorted(os.listdir(path))))
"""


class Store:
    """One remote, seen the same way whatever its kind."""

    def __init__(self, remotes, kind: str):
        self.kind = kind
        self.remote = remotes.s3() if kind == "s3" else remotes.webdav() if kind == "webdav" else remotes.sftp()

    def put(self, key: str, data: bytes) -> None:
        if self.kind == "s3":
            self.remote.put(key, data)
        else:
            target = self.remote.folder / key
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    def get(self, key: str) -> bytes | None:
        try:
            if self.kind == "s3":
                return self.remote.get(key)
            return (self.remote.folder / key).read_bytes()
        except Exception:  # noqa: BLE001 - a missing key is None, whatever the client raises
            return None

    def names(self, folder: str) -> list[str]:
        if self.kind == "s3":
            return sorted(key.rsplit("/", 1)[-1] for key in self.remote.keys(folder + "/") if not key.endswith("/"))
        return sorted(path.name for path in (self.remote.folder / folder).iterdir())


def docs_app(env, store: Store):
    """The store as provider CLOUD on the default mount, `docs` granted to
    ALPHA, and an APP session of ALPHA in the default sandbox holding a
    scope on it."""
    env.cli("provider", "add", CLOUD, *store.remote.extension_arguments())
    mount(env)
    env.cli("provider", "sync", CLOUD, timeout=120)
    env.grant(ALPHA, f"{CLOUD}:docs")
    env._record_daemon()  # the extension and its replica are the daemon's from here on
    app = env.app_session(ALPHA, APP, env.prov(ALPHA, CLOUD, "docs"), sandbox=True)
    assert app.recv() == {"start": {"ok": "1"}}
    return app


def ask(session, **cmd):
    session.popen.stdin.write((json.dumps(cmd) + "\n").encode())
    session.popen.stdin.flush()
    return session.recv(timeout=60)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.scopefs_timeout(240)
@pytest.mark.parametrize("kind", ["s3", "webdav", "sftp"])
def test_an_app_edits_a_remote_document_meets_a_conflict_and_survives_a_dropped_link(remotes, env, kind):
    store = Store(remotes, kind)
    store.put("docs/report.txt", V1)
    env.base_env.update(
        store.remote.env,
        SCOPEFS_EXTENSION_POLL_SECONDS="1",
        SCOPEFS_EXTENSION_RETRY_SECONDS="0.5",
        SCOPEFS_EXTENSION_STALL_SECONDS="20",
    )
    app = docs_app(env, store)

    # Open, read, edit, save: the store has the edit.
    assert ask(app, op="read", name="report.txt") == {"ok": sha(V1)}
    assert ask(app, op="save", name="report.txt", data="version two\n") == {"ok": "saved"}
    wait_for("the edit in the store", lambda: store.get("docs/report.txt"), lambda v: v == b"version two\n", timeout=30)

    # The link drops. A read of what is not downloaded fails (EIO: the
    # store cannot be reached; ETIMEDOUT when the extension's own retries
    # outlast the stall limit, as rclone's do), what is downloaded stays
    # readable, and an edit is saved locally and waits.
    store.put("docs/other.txt", b"not downloaded yet\n")
    env.cli("provider", "sync", CLOUD, timeout=120)
    store.remote.link_down("unreachable")
    assert ask(app, op="read", name="report.txt") == {"ok": sha(b"version two\n")}
    assert ask(app, op="read", name="other.txt") in ({"errno": "EIO"}, {"errno": "ETIMEDOUT"})
    # Meanwhile someone else changes the document in the store.
    store.put("docs/report.txt", b"changed in the store while we were offline\n")
    assert ask(app, op="save", name="report.txt", data="changed here, offline\n") == {"ok": "saved"}

    # The link is back: the edit goes out, meets the other change, and
    # both are kept: the store's under the name, ours as a conflict copy.
    store.remote.link_up()
    wait_events(env, lambda e: "(conflict " in (e.get("path") or ""), kind="conflict", timeout=60)
    listing = wait_for(
        "the conflict copy in the app's folder",
        lambda: ask(app, op="list").get("ok", []),
        lambda names: any("(conflict " in n for n in names),
        timeout=30,
    )
    copy = next(n for n in listing if "(conflict " in n)
    assert ask(app, op="read", name=copy) == {"ok": sha(b"changed here, offline\n")}
    wait_for(
        "the store's version under the name, in the app's view",
        lambda: ask(app, op="read", name="report.txt"),
        lambda v: v == {"ok": sha(b"changed in the store while we were offline\n")},
        timeout=30,
    )
    wait_for("the conflict copy in the store", lambda: store.names("docs"), lambda n: copy in n, timeout=30)
    assert store.get(f"docs/{copy}") == b"changed here, offline\n"
    assert store.get("docs/report.txt") == b"changed in the store while we were offline\n"
    # And what could not be read offline reads now.
    assert ask(app, op="read", name="other.txt") == {"ok": sha(b"not downloaded yet\n")}


@pytest.mark.scopefs_timeout(180)
def test_a_download_in_flight_when_the_link_drops_times_out_then_reads_again(remotes, env):
    """S42 on a real network fault: the link slows to 4 Mbit/s and an app
    reads a 16 MiB object; the link drops mid-download: with no progress
    for the stall limit (5 s here) the read fails with ETIMEDOUT (or EIO
    when the extension sees the failure first), and once the link is back
    the same read works, byte for byte."""
    store = Store(remotes, "s3")
    data = bytes(range(256)) * (64 << 10)  # 16 MiB
    store.put("docs/big.bin", data)
    env.base_env.update(store.remote.env, SCOPEFS_EXTENSION_STALL_SECONDS="5", SCOPEFS_EXTENSION_RETRY_SECONDS="0.5")
    app = docs_app(env, store)
    store.remote.netem(rate="4mbit")
    app.popen.stdin.write((json.dumps({"op": "read", "name": "big.bin"}) + "\n").encode())
    app.popen.stdin.flush()
    time.sleep(2)  # the download is under way (16 MiB take 30 s at this rate)
    store.remote.link_down()
    failed = app.recv(timeout=90)
    assert failed in ({"errno": "ETIMEDOUT"}, {"errno": "EIO"}), failed
    store.remote.link_up()
    store.remote.netem()
    assert ask(app, op="read", name="big.bin") == {"ok": sha(data)}


CANNOT_HOLD = r"""
import json
folder = sys.argv[1]
os.getxattr(folder, "user.scopefs.start")
out = {
    "symlink": outcome(os.symlink, "report.txt", os.path.join(folder, "link")),
    "link": outcome(os.link, os.path.join(folder, "report.txt"), os.path.join(folder, "hard")),
    "fifo": outcome(os.mkfifo, os.path.join(folder, "fifo")),
    "mkdir": outcome(os.mkdir, os.path.join(folder, "sub")),
}
write_text(os.path.join(folder, "sub", "inside.txt"), "inside\n")
out["rename-file"] = outcome(os.rename, os.path.join(folder, "report.txt"), os.path.join(folder, "renamed.txt"))
emit(out)
"""


@pytest.mark.scopefs_timeout(120)
def test_what_the_s3_store_cannot_hold_is_refused_or_put_back(remotes, env):
    """docs/PROVIDERS.md "Errors": S3 keeps no symlinks, hard links or FIFOs
    (EPERM at once); a file rename works (a new key); a folder rename, which
    S3 cannot make, is moved back in the replica with an event (EXDEV)."""
    store = Store(remotes, "s3")
    store.put("docs/report.txt", V1)
    env.base_env.update(store.remote.env, SCOPEFS_EXTENSION_POLL_SECONDS="1", SCOPEFS_EXTENSION_RETRY_SECONDS="0.5")
    env.cli("provider", "add", CLOUD, *store.remote.extension_arguments())
    mount(env)
    env.cli("provider", "sync", CLOUD, timeout=120)
    env.grant(ALPHA, f"{CLOUD}:docs")
    env._record_daemon()
    got = env.app_json(ALPHA, CANNOT_HOLD, env.prov(ALPHA, CLOUD, "docs"), sandbox=True)
    assert got == {
        "symlink": {"errno": "EPERM"},
        "link": {"errno": "EPERM"},
        "fifo": {"errno": "EPERM"},
        "mkdir": {"ok": None},
        "rename-file": {"ok": None},
    }, got
    wait_for(
        "the rename and the folder in the store",
        lambda: sorted(store.remote.keys("docs/")),
        lambda keys: "docs/renamed.txt" in keys and "docs/sub/inside.txt" in keys and "docs/report.txt" not in keys,
        timeout=30,
    )
    moved = env.app_json(
        ALPHA,
        "os.getxattr(sys.argv[1], 'user.scopefs.start'); "
        "emit(outcome(os.rename, os.path.join(sys.argv[1], 'sub'), os.path.join(sys.argv[1], 'moved')))",
        env.prov(ALPHA, CLOUD, "docs"),
        sandbox=True,
    )
    assert moved == {"ok": None}, moved
    wait_events(env, lambda e: "moved back" in (e.get("operation") or ""), kind="extension", timeout=30)
    listing = wait_for(
        "the folder back in the app's view",
        lambda: env.app_json(
            ALPHA,
            "os.getxattr(sys.argv[1], 'user.scopefs.start'); emit(outcome(lambda: sorted(os.listdir(sys.argv[1]))))",
            env.prov(ALPHA, CLOUD, "docs"),
            sandbox=True,
        ),
        lambda got: got.get("ok") == ["renamed.txt", "sub"],
        timeout=30,
    )
    assert listing


COMPOSED = "caf\u00e9.txt"  # NFC
DECOMPOSED = "cafe\u0301.txt"  # NFD


@pytest.mark.scopefs_timeout(180)
def test_names_that_differ_only_by_normalisation_are_two_documents(remotes, env):
    """SPEC S33a, issue 50 finding 4: an S3 bucket holds `docs/café.txt`
    in NFC and in NFD, two objects (S3 keys are bytes). Through the
    default mount (strict scopes) an app in the default sandbox sees two
    files, reads each one's own content, and a save to one reaches only
    its object. (The replica had taken the two ids for one: Swift's String
    equality is canonical equivalence.)"""
    store = Store(remotes, "s3")
    store.put(f"docs/{COMPOSED}", b"composed\n")
    store.put(f"docs/{DECOMPOSED}", b"decomposed\n")
    env.base_env.update(store.remote.env, SCOPEFS_EXTENSION_POLL_SECONDS="1")
    app = docs_app(env, store)
    assert ask(app, op="list") == {"ok": sorted([COMPOSED, DECOMPOSED])}
    assert ask(app, op="read", name=COMPOSED) == {"ok": sha(b"composed\n")}
    assert ask(app, op="read", name=DECOMPOSED) == {"ok": sha(b"decomposed\n")}
    assert ask(app, op="save", name=DECOMPOSED, data="decomposed, edited\n") == {"ok": "saved"}
    wait_for(
        "the edit in its own object",
        lambda: store.get(f"docs/{DECOMPOSED}"),
        lambda v: v == b"decomposed, edited\n",
        timeout=30,
    )
    assert store.get(f"docs/{COMPOSED}") == b"composed\n"
    assert store.names("docs") == sorted([COMPOSED, DECOMPOSED])
    app.popen.stdin.close()
    assert app.finish() == 0, app.stderr()
