"""FUSE over io_uring (`scopefs mount --io-uring N`; issue 52; SPEC S35,
S14): with the fuse module's `enable_uring` at Y, the INIT reply agrees
to the ring and every request after INIT reaches the daemon through a
ring entry; FORGET, INTERRUPT and the daemon's own notices stay on
/dev/fuse. The file system behind it is the same, so what an app sees
must be exactly what it sees over /dev/fuse: the same bytes, the same
errnos, and a revoke that cuts its open descriptors (S14: EPERM).

As users run it: the default strict scopes, the app in the default
sandbox holding a scope on its grant, a root owner. The parameter is the
machine's: each test sets it and puts it back.
"""

from __future__ import annotations

import fcntl
import json
import tempfile
from pathlib import Path

import pytest
from scopefs_harness import (
    ALPHA,
    LOCAL,
    NON_ROOT_OWNER_PRELUDE,
    NON_ROOT_OWNER_STATE,
    describe,
    non_root_owner_root,
    run_non_root_session,
)

ENABLE_URING = Path("/sys/module/fuse/parameters/enable_uring")
THREADS = 2


# enable_uring is one switch for the whole machine: two test runs side by
# side (CI's SQLite and PostgreSQL suites were) flip it under each other,
# and a mount meant to fall back got the ring. Every test that sets it
# holds this lock, whichever run it belongs to.
ENABLE_URING_LOCK = Path(tempfile.gettempdir()) / "scopefs-tests-enable-uring.lock"


@pytest.fixture
def uring():
    """Sets the fuse module's enable_uring for the test, and puts it back;
    no other test on the machine sets it meanwhile."""
    if not ENABLE_URING.exists():
        pytest.fail("this kernel's fuse has no io_uring (CONFIG_FUSE_IO_URING): the ring cannot be tested")
    with open(ENABLE_URING_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        before = ENABLE_URING.read_text().strip()

        def set_to(value: str) -> None:
            ENABLE_URING.write_text(value)
            assert ENABLE_URING.read_text().strip() == value

        try:
            yield set_to
        finally:
            ENABLE_URING.write_text(before)


def possible_cpus() -> int:
    """The kernel waits for an entry on every possible CPU's queue before it
    uses the ring, so the engine makes one queue per possible CPU."""
    count = 0
    for part in Path("/sys/devices/system/cpu/possible").read_text().strip().split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def transport(env) -> dict:
    return json.loads(env.cli("status", "--json").stdout)["daemon"]["fuseTransport"]


# The operations both runs make, drawn from one seed: creates, writes at
# offsets, truncates, renames, removals, reads, stats and listings in one
# folder, each recorded as its result or errno name. Large writes cross
# the 128 KiB readahead window and several ring payloads' worth of pages.
MODEL = r"""
def run_model(root, seed, steps):
    import errno, hashlib, os, random
    rng = random.Random(seed)
    names = [f"f{i}" for i in range(6)] + ["sub/g0", "sub/g1"]
    os.makedirs(os.path.join(root, "sub"), exist_ok=True)
    log = []
    def record(kind, fn):
        try:
            log.append([kind, fn()])
        except OSError as e:
            log.append([kind, errno.errorcode.get(e.errno, str(e.errno))])
    for _ in range(steps):
        name = os.path.join(root, rng.choice(names))
        other = os.path.join(root, rng.choice(names))
        op = rng.randrange(8)
        if op == 0:
            size = rng.choice([0, 1, 4095, 4096, 70000, 300000, 1 << 20])
            data = rng.randbytes(size)
            offset = rng.choice([0, 1, 4096, 131072])
            def write():
                fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644)
                try:
                    return os.pwrite(fd, data, offset)
                finally:
                    os.close(fd)
            record("write", write)
        elif op == 1:
            length = rng.choice([0, 10, 5000, 200000])
            record("truncate", lambda: os.truncate(name, length))
        elif op == 2:
            record("rename", lambda: os.rename(name, other))
        elif op == 3:
            record("unlink", lambda: os.unlink(name))
        elif op == 4:
            def read():
                with open(name, "rb") as f:
                    f.seek(rng.choice([0, 100, 4096]))
                    return hashlib.sha256(f.read()).hexdigest()
            record("read", read)
        elif op == 5:
            record("stat", lambda: [os.stat(name).st_size, oct(os.stat(name).st_mode)])
        elif op == 6:
            record("list", lambda: sorted(os.listdir(os.path.dirname(name))))
        else:
            record("mkdir", lambda: os.mkdir(name + ".d"))
    return log
"""

APP_MODEL = (
    MODEL
    + r"""
import threading
folder, seed, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
start_accessing(folder)
# One more worker on each CPU, so that both of the kernel's queues serve.
errors = []
def pinned(cpu):
    try:
        os.sched_setaffinity(0, {cpu})
        path = os.path.join(folder, f"cpu{cpu}")
        for i in range(200):
            with open(path, "wb") as f:
                f.write(bytes([i % 256]) * 8192)
            with open(path, "rb") as f:
                assert f.read() == bytes([i % 256]) * 8192
        os.unlink(path)
    except Exception as e:
        errors.append(repr(e))
workers = [threading.Thread(target=pinned, args=(cpu,)) for cpu in sorted(os.sched_getaffinity(0))]
for w in workers:
    w.start()
model = run_model(os.path.join(folder, "model"), seed, steps)
for w in workers:
    w.join()
emit({"model": model, "errors": errors})
"""
)


@pytest.mark.scopefs_timeout(180)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_apps_operations_over_the_ring_match_the_host_folder(env, uring, seed, tmp_path):
    """SPEC S35 (POSIX behaviour inside granted folders matches the
    backing file system): one seed's 300 operations run by an app through
    a mount served over io_uring give the same results, byte for byte and
    errno for errno, as the same operations on a host folder, while a
    worker pinned to each CPU writes and reads at the same time. `status`
    says the ring served them."""
    uring("Y")
    (env.backing(LOCAL) / "ring").mkdir()
    env.grant(ALPHA, f"{LOCAL}:ring")
    env.mount_args = lambda *a, **k: ["mount", env.mnt, "--io-uring", str(THREADS)]
    env.mount()
    before = transport(env)
    assert before["transport"] == "io_uring", before
    assert before["queues"] == possible_cpus(), before
    assert before["threads"] == before["queues"] * THREADS, before

    result = env.app_json(ALPHA, APP_MODEL, env.prov(ALPHA, LOCAL, "ring"), seed, 300, sandbox=True)
    namespace: dict = {}
    exec(MODEL, namespace)
    expected = namespace["run_model"](str(tmp_path / "model"), seed, 300)
    assert result["errors"] == [], result["errors"]
    assert len(result["model"]) == len(expected)
    for index, (got, want) in enumerate(zip(result["model"], expected, strict=True)):
        assert got == want, f"seed {seed}, step {index}: the mount gave {got}, the host folder {want}"
    after = transport(env)
    assert after["transport"] == "io_uring", after
    assert after["served"] > before["served"] + 300, (before, after)


HOLD_AND_LOSE = r"""
path = sys.argv[1]
start_accessing(os.path.dirname(path))
held = os.open(path, os.O_RDWR)
step({"read": os.pread(held, 64, 0).decode()})
emit({"held read": attempt(os.pread, held, 64, 0), "held write": attempt(os.pwrite, held, b"x", 0),
      "open": attempt(lambda: open(path).read())})
"""

AGAIN = r"""
path = sys.argv[1]
start_accessing(os.path.dirname(path))
with open(path) as f:
    emit({"read": f.read()})
"""


def test_a_revoke_cuts_a_descriptor_held_over_the_ring(env, uring):
    """SPEC S14: over io_uring as over /dev/fuse, a revoke makes the
    app's open descriptor fail with EPERM for reads and writes, and a new
    open too; a restore gives the file back."""
    uring("Y")
    (env.backing(LOCAL) / "ring").mkdir()
    (env.backing(LOCAL) / "ring" / "note.txt").write_text("the note\n")
    grant = env.grant(ALPHA, f"{LOCAL}:ring")
    env.mount_args = lambda *a, **k: ["mount", env.mnt, "--io-uring", str(THREADS)]
    env.mount()
    note = env.prov(ALPHA, LOCAL, "ring/note.txt")
    session = env.app_session(ALPHA, HOLD_AND_LOSE, note, sandbox=True)
    assert session.recv() == {"read": "the note\n"}
    env.revoke(ALPHA, grant)
    session.send()
    lost = session.recv()
    session.finish()
    assert lost == {"held read": "EPERM", "held write": "EPERM", "open": "EPERM"}, lost
    env.restore(ALPHA, grant)
    assert env.app_json(ALPHA, AGAIN, note, sandbox=True) == {"read": "the note\n"}
    assert transport(env)["transport"] == "io_uring"


def test_without_the_kernels_offer_the_mount_serves_through_dev_fuse(env, uring):
    """With enable_uring at N the kernel does not offer the ring: the
    mount asked for it still comes up, serves through /dev/fuse, and
    `status` says why."""
    uring("N")
    (env.backing(LOCAL) / "ring").mkdir()
    (env.backing(LOCAL) / "ring" / "note.txt").write_text("the note\n")
    env.grant(ALPHA, f"{LOCAL}:ring")
    env.mount_args = lambda *a, **k: ["mount", env.mnt, "--io-uring", str(THREADS)]
    env.mount()
    note = env.prov(ALPHA, LOCAL, "ring/note.txt")
    assert env.app_json(ALPHA, AGAIN, note, sandbox=True) == {"read": "the note\n"}
    status = transport(env)
    assert status["transport"] == "/dev/fuse", status
    assert "enable_uring" in (status.get("reason") or ""), status
    assert status["served"] == 0, status


def test_io_uring_takes_a_thread_count(env):
    """A count outside 1 to 64 is a usage error (exit 64), before anything is mounted."""
    p = env.cli("mount", env.mnt, "--io-uring", "0", expect=None)
    assert p.returncode == 64, p.stderr
    assert "--io-uring" in p.stderr


def test_the_same_seed_draws_the_same_operations(tmp_path):
    """The model is a function of its seed (so a failing seed replays)."""
    namespace: dict = {}
    exec(MODEL, namespace)
    first = namespace["run_model"](str(tmp_path / "a"), 7, 100)
    second = namespace["run_model"](str(tmp_path / "b"), 7, 100)
    assert first == second


# A non-root owner's whole session (uid 65534) in a private mount
# namespace (NON_ROOT_OWNER_PRELUDE): the mount goes through fusermount3,
# which hands the daemon its /dev/fuse descriptor, and the ring is
# registered on that descriptor by an unprivileged daemon. The app writes,
# reads back and renames in its granted folder; `status --json` is the
# last line. It unmounts before it ends.
NOBODY_SESSION = (
    "root=$1 binary=$2 threads=$3"
    + NON_ROOT_OWNER_PRELUDE
    + NON_ROOT_OWNER_STATE
    + r"""
s grant com.example.alpha local:ring >/dev/null
s mount "$root/mnt" --io-uring "$threads" >/dev/null
trap 's unmount "$root/mnt" >/dev/null 2>&1 || fusermount3 -u "$root/mnt"' EXIT
folder="$root/mnt/com.example.alpha/Providers/local/ring"
s run --app com.example.alpha --hold-scopes -- sh -c '
  printf "written by the app\n" > "$1/new.txt" && mv "$1/new.txt" "$1/moved.txt" && cat "$1/moved.txt"' app "$folder"
s status --json | tr -d "\n"; echo
"""
)


def test_a_non_root_owners_mount_serves_over_the_ring(uring):
    """As a non-root owner (uid 65534) runs it: `mount --io-uring` through
    fusermount3 serves the app's write, rename and read over the ring,
    and the bytes reach the provider folder."""
    uring("Y")
    with non_root_owner_root("scopefs-ring-", ("provider/ring", "mnt")) as root:
        p = run_non_root_session(NOBODY_SESSION, root, str(THREADS), what="a non-root owner's session over io_uring")
        assert p.returncode == 0, describe(p)
        lines = p.stdout.strip().splitlines()
        assert lines[0] == "written by the app", describe(p)
        ring = json.loads(lines[-1])["daemon"]["fuseTransport"]
        assert ring["transport"] == "io_uring" and ring["served"] > 0, ring
        assert (root / "provider/ring/moved.txt").read_text() == "written by the app\n"
        assert not (root / "provider/ring/new.txt").exists()
