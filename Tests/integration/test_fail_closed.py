"""Losing the database fails closed (issue 15, finding 5). SPEC S13 (the
daemon serves the isolation layer from the database), S14 (a revoked grant
means EPERM, open files included), S34 (a corrupt database is an error,
never a silent reset).

While a mount runs, the database deleted, overwritten with garbage or
replaced must not leave the daemon serving the old grants: within about a
second every provider access gets EPERM and `scopefs status` says why,
until a valid database is back at the path; `init` refuses a state
directory a daemon serves while its database exists."""

import json
import os
import shutil
import sqlite3
import subprocess
import time

import pytest
from scopefs_harness import ALPHA, LOCAL, ON_THE_FILE, REPORT_BYTES, WaitTimeout, wait_for

pytestmark = pytest.mark.sqlite_store(ON_THE_FILE)

REPORT = "docs/report.txt"
HEAD = REPORT_BYTES[:16].hex()
EXIT_REFUSED = 77  # docs/CLI.md

# Starts a scope on the granted file, keeps a descriptor open and, on every
# line from the test, reads through it and through a new open.
READ_LOOP = """
p = sys.argv[1]
os.getxattr(p, "user.scopefs.start")
fd = os.open(p, os.O_RDONLY)
def probe():
    return {"same-fd": outcome(lambda: os.pread(fd, 16, 0).hex()),
            "new-open": outcome(lambda: read_bytes(p)[:16].hex())}
while True:
    step(probe())
"""

SERVED = {"same-fd": {"ok": HEAD}, "new-open": {"ok": HEAD}}
DENIED = {"same-fd": {"errno": "EPERM"}, "new-open": {"errno": "EPERM"}}


def poll(app, want, within):
    """Asks the app to read until it reports `want`; returns (its last report,
    seconds), for the caller to assert on both."""

    def read():
        app.send()
        return app.recv()

    start = time.monotonic()
    try:
        got = wait_for(f"the app to read {want}", read, lambda got: got == want, timeout=within, interval=0.05)
    except WaitTimeout as late:
        got = late.last
    return got, time.monotonic() - start


def start_reading(env):
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    env.mount()
    app = env.app_session(ALPHA, READ_LOOP, env.prov(ALPHA, LOCAL, REPORT))
    assert app.recv() == SERVED
    return app


def policy_failure(env):
    status = json.loads(env.cli("status", "--json").stdout)
    return status["daemon"].get("policyFailure")


def database(env):
    return env.state / "scopefs.sqlite"


def test_deleted_database_denies_every_grant(env):
    """The database deleted under a running mount: the app's open descriptor
    and new opens get EPERM within ~1 s, and `status` says the policy failed
    closed and why (the CLI cannot revoke through a database that is gone)."""
    app = start_reading(env)
    database(env).unlink()
    got, took = poll(app, DENIED, within=1.5)
    assert got == DENIED, f"after deleting the database the app still reads: {got} ({took:.2f} s)"
    failure = policy_failure(env)
    assert failure and "deleted" in failure, failure
    text = env.cli("status").stdout
    assert "FAILED CLOSED" in text, text
    app.kill()


def test_database_overwritten_with_garbage_denies_every_grant(env):
    """Pages of the database overwritten in place (same file, no SQLite
    involved): the daemon's cached pages must not keep serving the grants,
    and the corrupt file is left as it is (S34). The good pages written back
    into the same file: the daemon serves them again."""
    app = start_reading(env)
    path = database(env)
    good = path.read_bytes()
    garbage = os.urandom(len(good))
    with open(path, "r+b") as f:
        f.write(garbage)
    got, took = poll(app, DENIED, within=1.5)
    assert got == DENIED, f"after corrupting the database the app still reads: {got} ({took:.2f} s)"
    assert policy_failure(env), "status does not say the policy failed closed"
    time.sleep(0.5)  # not a wait: the daemon is given time to write into the corrupt file, which it must not
    assert path.read_bytes() == garbage, "the daemon wrote into the corrupt database"
    with open(path, "r+b") as f:
        f.write(good)
    got, took = poll(app, SERVED, within=1.5)
    assert got == SERVED, f"the repaired database is not served: {got} ({took:.2f} s)"
    assert policy_failure(env) is None
    app.kill()


def test_new_database_after_deletion_is_served_and_revocable(env):
    """Deleted, then `init` and the provider, app and grant re-added with
    the CLI: the daemon serves the new database (the app reads again after a
    new scope start) and a `revoke --all` then takes effect."""
    app = start_reading(env)
    database(env).unlink()
    assert poll(app, DENIED, within=1.5)[0] == DENIED
    env.cli("init")
    env.cli("provider", "add", LOCAL, env.backing(LOCAL))
    env.cli("app", "add", ALPHA)
    env.grant(ALPHA, f"{LOCAL}:{REPORT}")
    assert policy_failure(env) is None
    fresh = env.app_session(ALPHA, READ_LOOP, env.prov(ALPHA, LOCAL, REPORT))
    assert fresh.recv() == SERVED
    env.cli("revoke", ALPHA, "--all")
    got, took = poll(fresh, DENIED, within=1.5)
    assert got == DENIED, f"`revoke --all` on the new database did not take effect: {got} ({took:.2f} s)"
    events = env.cli("events", "--json").stdout
    assert "policy-failed-closed" in events, events[-2000:]
    fresh.kill()
    app.kill()


def test_init_while_mounted_is_refused(env):
    """`init` on a state directory a daemon serves, database present: refused
    (exit 77) with a message that says how to start over; the mount keeps
    serving."""
    app = start_reading(env)
    p = env.cli("init", expect=EXIT_REFUSED)
    assert "unmount" in p.stderr and "move" in p.stderr, p.stderr
    assert poll(app, SERVED, within=1.0)[0] == SERVED
    app.kill()


def test_revoke_works_on_an_immutable_database(env):
    """`chattr +i` on the database: the CLI cannot open it for writing, so
    `revoke --all` goes through the daemon, exits 0 and takes effect; the
    revocation is in the database once it is writable again."""
    env.grant(ALPHA, f"{LOCAL}:docs/secret.txt")
    app = start_reading(env)
    path = database(env)
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        p = env.cli("revoke", ALPHA, "--all")
        assert "revoked" in p.stdout, p.stdout
        got, took = poll(app, DENIED, within=1.0)
        assert got == DENIED, f"`revoke --all` on an immutable database did not take effect: {got}"
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    privacy = env.cli("privacy", ALPHA).stdout
    assert "active" not in privacy, privacy
    app.kill()


def test_revoke_after_deletion_holds_when_the_database_returns(env):
    """The database deleted (the daemon fails closed) and a copy put back
    later: a `revoke --all` made meanwhile exits 0 and still holds when the
    copy is served again — the daemon writes it into the copy."""
    path = database(env)
    copy = env.root / "copy.sqlite"
    app = start_reading(env)
    source, backup = sqlite3.connect(path), sqlite3.connect(copy)
    source.backup(backup)  # with the grant, which may still be in the WAL
    source.close()
    backup.close()
    path.unlink()
    assert poll(app, DENIED, within=1.5)[0] == DENIED
    p = env.cli("revoke", ALPHA, "--all")
    assert "revoked" in p.stdout and "through the daemon" in p.stderr, p.stdout + p.stderr
    shutil.copy(copy, path)
    wait_for(
        "the daemon to serve the database put back",
        lambda: policy_failure(env),
        lambda failure: failure is None,
        timeout=1.5,
    )
    assert poll(app, DENIED, within=0.5)[0] == DENIED
    fresh = env.app_json(
        ALPHA, "emit(outcome(lambda: read_bytes(sys.argv[1])[:16].hex()))", env.prov(ALPHA, LOCAL, REPORT)
    )
    assert fresh == {"errno": "EPERM"}, "a grant revoked while the database was gone is served again"
    assert "active" not in env.cli("privacy", ALPHA).stdout
    app.kill()
