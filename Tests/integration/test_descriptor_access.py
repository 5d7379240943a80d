"""One access decision for opens and open descriptors (issue 46, finding 3).

SPEC S47: whether a process may read, write, create or list through a
grant is decided by one function, at open and on every operation of an
open descriptor or mapping alike; S14: a revoke cuts descriptors opened
before it with EPERM (`--open-files revoke`, the default); S9: a
descriptor opened in scope needs no scope afterwards. On the mount users
get (strict scopes) with each app in the default sandbox (S5).

The finding: with `local:Reports` granted read-only and
`local:Reports/plain.txt` read-write, a descriptor opened for writing
through the file's grant kept writing after that grant was revoked (or
narrowed to read-only), because descriptor operations asked only whether
some active grant covered the file, never for what access.
"""

import json

from scopefs_harness import (
    ALPHA,
    LOCAL,
    NON_ROOT_OWNER_PRELUDE,
    NON_ROOT_OWNER_STATE,
    describe,
    non_root_owner_root,
    run_non_root_session,
)

PLAIN = b"plain v1\n"
OTHER = b"other file, read through the folder grant\n"

# Starts the file's scope and the folder's, opens the file O_WRONLY|O_APPEND
# and writes, opens a read descriptor of the file itself and one of a
# sibling (which only the read-only folder grant covers), then waits. After
# each policy change the test makes, it retries on the SAME descriptors and
# tries a new open for writing.
HOLD_DESCRIPTORS = """
folder, plain, other = sys.argv[1], sys.argv[2], sys.argv[3]
start_accessing(plain)
wfd = os.open(plain, os.O_WRONLY | os.O_APPEND)
first = os.write(wfd, b"first\\n")
start_accessing(folder)
rfd_plain = os.open(plain, os.O_RDONLY)
rfd_other = os.open(other, os.O_RDONLY)

def probe(tag):
    return {
        "write-held-fd": outcome(lambda: os.write(wfd, tag.encode() + b"\\n")),
        "fsync-held-fd": attempt(os.fsync, wfd),
        # To its own size: a change of nothing, but a setattr through the
        # descriptor all the same.
        "ftruncate-held-fd": attempt(lambda: os.ftruncate(wfd, os.fstat(wfd).st_size)),
        "new-open-write": attempt(open_close, plain, os.O_WRONLY | os.O_APPEND),
        "new-open-read": attempt(open_close, plain, os.O_RDONLY),
        "read-held-plain": outcome(lambda: os.pread(rfd_plain, 64, 0).decode()),
        "read-held-other": outcome(lambda: os.pread(rfd_other, 64, 0).decode()),
    }

step({"first": first, "read-plain": os.pread(rfd_plain, 64, 0).decode(),
      "read-other": os.pread(rfd_other, 64, 0).decode()})
step(probe("after-change"))
emit(probe("after-restore"))
"""


def _world(env):
    """Reports/ (read-only folder grant) holding plain.txt (read-write file
    grant) and other.txt; returns the file grant's id."""
    reports = env.backing(LOCAL) / "Reports"
    reports.mkdir(mode=0o755)
    (reports / "plain.txt").write_bytes(PLAIN)
    (reports / "other.txt").write_bytes(OTHER)
    env.grant(ALPHA, f"{LOCAL}:Reports", read_only=True)
    return env.grant(ALPHA, f"{LOCAL}:Reports/plain.txt")


def _session(env):
    return env.app_session(
        ALPHA,
        HOLD_DESCRIPTORS,
        env.prov(ALPHA, LOCAL, "Reports"),
        env.prov(ALPHA, LOCAL, "Reports/plain.txt"),
        env.prov(ALPHA, LOCAL, "Reports/other.txt"),
        sandbox=True,
    )


def _cut(content: str) -> dict:
    """What the app sees once only the read-only folder grant allows the
    file: writing is cut, on the held descriptor and at open; reading, on
    held descriptors and at open (the folder's scope is started), goes on."""
    return {
        "write-held-fd": {"errno": "EPERM"},
        "fsync-held-fd": "EPERM",
        "ftruncate-held-fd": "EPERM",
        "new-open-write": "EPERM",
        "new-open-read": "OK",
        "read-held-plain": {"ok": content},
        "read-held-other": {"ok": OTHER.decode()},
    }


def test_revoke_cuts_write_descriptor_not_read_descriptors(env):
    """The finding, reproduced exactly: after `scopefs revoke` of the
    file's read-write grant, a write on the descriptor opened O_WRONLY|
    O_APPEND through it fails with EPERM and the host file is unchanged,
    as a new open for writing does; read descriptors, which the still
    active read-only folder grant allows, keep reading (S14, S47). After
    `scopefs restore` the same write descriptor writes again (S15)."""
    file_grant = _world(env)
    env.mount()
    host = env.backing(LOCAL) / "Reports/plain.txt"
    app = _session(env)
    ready = app.recv()
    assert ready == {"first": 6, "read-plain": "plain v1\nfirst\n", "read-other": OTHER.decode()}, app.stderr()
    written = host.read_bytes()
    assert written == PLAIN + b"first\n"

    env.revoke(ALPHA, file_grant)
    app.send()
    after_revoke = app.recv()
    assert after_revoke == _cut(written.decode()), app.stderr()
    assert host.read_bytes() == written, "a write through the held descriptor reached the host file"

    env.restore(ALPHA, file_grant)
    app.send()
    after_restore = app.recv()
    assert app.finish() == 0, app.stderr()
    restored = written + b"after-restore\n"
    assert after_restore == {
        "write-held-fd": {"ok": len(b"after-restore\n")},
        "fsync-held-fd": "OK",
        "ftruncate-held-fd": "OK",
        "new-open-write": "OK",
        "new-open-read": "OK",
        "read-held-plain": {"ok": restored.decode()},
        "read-held-other": {"ok": OTHER.decode()},
    }
    assert host.read_bytes() == restored


def test_narrowing_to_read_only_cuts_write_descriptor(env):
    """Narrowing the file's grant to read-only (`scopefs grant --read-only`
    replaces its access) cuts what it no longer allows: writes through the
    held write descriptor (EPERM, host file unchanged), while the read
    descriptors keep reading (S14, S47)."""
    _world(env)
    env.mount()
    host = env.backing(LOCAL) / "Reports/plain.txt"
    app = _session(env)
    app.recv()
    written = host.read_bytes()
    env.grant(ALPHA, f"{LOCAL}:Reports/plain.txt", read_only=True)
    app.send()
    after = app.recv()
    assert after == _cut(written.decode()), app.stderr()
    assert host.read_bytes() == written, "a write through the held descriptor reached the host file"
    app.send()
    app.recv()
    assert app.finish() == 0, app.stderr()


# --- a non-root owner ---------------------------------------------------------

# The app of a non-root owner's session: holds a write descriptor of
# plain.txt and a read descriptor of other.txt, says "ready", waits until
# a new open for writing is refused (the revoke is installed), then uses
# the held descriptors once more.
NOBODY_APP = r"""
import errno, json, os, sys, time
folder = sys.argv[1]
plain, other = folder + "/plain.txt", folder + "/other.txt"
os.setxattr(plain, "user.scopefs.start", b"")
os.setxattr(folder, "user.scopefs.start", b"")
wfd = os.open(plain, os.O_WRONLY | os.O_APPEND)
os.write(wfd, b"first\n")
rfd = os.open(other, os.O_RDONLY)
print("ready", flush=True)
deadline = time.time() + 20
while time.time() < deadline:
    try:
        os.close(os.open(plain, os.O_WRONLY | os.O_APPEND))
    except PermissionError:
        break
    time.sleep(0.05)
def outcome(fn):
    try:
        return {"ok": fn()}
    except OSError as exc:
        return {"errno": errno.errorcode[exc.errno]}
print(json.dumps({"write-held-fd": outcome(lambda: os.write(wfd, b"after\n")),
                  "read-held-other": outcome(lambda: os.pread(rfd, 64, 0).decode())}), flush=True)
"""

# The non-root owner's whole session, in a private mount namespace
# (NON_ROOT_OWNER_PRELUDE); it unmounts before it ends.
NOBODY_SESSION = (
    "root=$1 binary=$2 app=$3"
    + NON_ROOT_OWNER_PRELUDE
    + NON_ROOT_OWNER_STATE
    + r"""
s grant com.example.alpha local:Reports --read-only >/dev/null
file=$(s grant com.example.alpha local:Reports/plain.txt | awk '{ id = $NF } END { print id }')
s mount "$root/mnt" >/dev/null
trap 's unmount "$root/mnt" >/dev/null 2>&1 || fusermount3 -u "$root/mnt"' EXIT
s run --app com.example.alpha -- python3 -c "$app" "$root/mnt/com.example.alpha/Providers/local/Reports" \
  >"$root/out" 2>"$root/err" &
run=$!
for i in $(seq 200); do grep -q ready "$root/out" && break; sleep 0.1; done
s revoke com.example.alpha "$file" >/dev/null
wait $run || { cat "$root/err" >&2; exit 1; }
cat "$root/out"
"""
)


def test_a_non_root_owners_revoke_cuts_the_write_descriptor():
    """The finding with a non-root owner (uid 65534): after the revoke of
    the file's read-write grant, the held write descriptor gets EPERM and
    the host file is unchanged; a read descriptor through the read-only
    folder grant keeps reading (S14, S47)."""
    files = {"provider/Reports/plain.txt": PLAIN, "provider/Reports/other.txt": OTHER}
    with non_root_owner_root("scopefs-descriptors-", ("provider/Reports", "mnt"), files) as root:
        p = run_non_root_session(NOBODY_SESSION, root, NOBODY_APP)
        assert p.returncode == 0, describe(p)
        got = json.loads(p.stdout.strip().splitlines()[-1])
        assert got == {"write-held-fd": {"errno": "EPERM"}, "read-held-other": {"ok": OTHER.decode()}}, describe(p)
        assert (root / "provider/Reports/plain.txt").read_bytes() == PLAIN + b"first\n"
