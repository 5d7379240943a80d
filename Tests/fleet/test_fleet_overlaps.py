"""A fleet host re-checks folder overlaps when a reload brings another
host's provider (issue 50, finding 1; decision 73; SPEC S34, S44).

A fleet's provider is one path on every host. `fleet add-provider` on
host A checks it against A's mounts only; on host B the same path may be
B's mountpoint, or a folder that holds it. Served, such a provider makes
B's daemon ask its own mount for the provider's items, where a mount on
the same mistake waits for good. B checks each provider a reload brings
by the rule `mount` and `provider add` use: one that overlaps one of B's
ScopeFS mounts is not served on B (to B's apps it is not there, ENOENT,
S2), grants on it made later included, and B says so once, naming both
folders: in its log, as a `provider-refused` event, and in the fleet's
events under its host name, where the owner on A reads why. Everything
else B serves goes on.

On one machine every host sees every mount, so A's commands run in a
mount namespace of their own with B's mount detached, as on another
machine. Seen failing on the old main (/tmp/base/scopefs): no
`provider-refused` event came within 20 s.
"""

from __future__ import annotations

import json

import pytest
from fleet_hosts import two_hosts
from scopefs_harness import ALPHA, LOCAL, Env, describe, run_bounded, wait_for

LEASE = 3.0

# What an app on B sees: its providers, a granted report, a refused folder.
LOOK = """
providers, report, refused = sys.argv[1:4]
attempt(start_accessing, report)  # before the grant shows: not yet
emit({
    "listed": sorted(os.listdir(providers)),
    "report": outcome(lambda: read_bytes(report).decode()),
    "refused": outcome(lambda: os.stat(refused) and "there"),
})
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with two_hosts(tmp_path_factory.mktemp("overlap-daemon-logs"), LEASE, {"SCOPEFS_FLEET_TIMEOUT": "1"}) as hosts:
        yield hosts


def as_another_machine(a: Env, b: Env, *args) -> None:
    """A's CLI in a mount namespace without B's mount, as on another machine."""
    script = 'umount -l "$1" && shift && exec "$@"'
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(b.mnt)]
    p = run_bounded([*argv, *a.cli_argv(*args)], 30, a.base_env, what=" ".join(map(str, args)))
    assert p.returncode == 0, describe(p)


def refusals(events: list[dict]) -> dict[str, str]:
    return {e["path"]: e.get("operation", "") for e in events if e["kind"] == "provider-refused"}


def test_a_provider_another_host_added_over_this_hosts_mount_is_not_served_here(fleet):
    """A adds `home` (a folder that holds B's mount, as ~ holds ~/ScopeFS)
    and `under` (B's mountpoint itself): B refuses both once, says how
    each lies against its mount, serves neither nor a later grant on one,
    and serves a later grant on `local`."""
    a, b = fleet["a"], fleet["b"]
    (b.root / "shared").mkdir()
    (b.root / "shared" / "notes.txt").write_text("notes\n")
    # B's env root holds B's mount (as ~ holds ~/ScopeFS); B's mountpoint itself.
    as_another_machine(a, b, "fleet", "add-provider", "home", b.root)
    as_another_machine(a, b, "fleet", "add-provider", "under", b.mnt)
    refused = wait_for(
        "B's provider-refused events",
        lambda: refusals([json.loads(line) for line in b.cli("events", "--json").stdout.splitlines()]),
        lambda found: {"/Providers/home", "/Providers/under"} <= set(found),
        timeout=20,
    )
    assert refused["/Providers/home"] == f"{b.root} is above the ScopeFS mount {b.mnt}", refused
    assert refused["/Providers/under"] == f"{b.mnt} is the ScopeFS mount {b.mnt}", refused
    # A grant on the refused provider, made after, does not reach B; one
    # on `local` made after it does: B follows the fleet as before.
    a.cli("fleet", "grant", ALPHA, "home:shared")
    a.cli("fleet", "grant", ALPHA, f"{LOCAL}:docs")
    providers = str(b.mnt / ALPHA / "Providers")
    report = b.prov(ALPHA, LOCAL, "docs/report.txt")
    seen = wait_for(
        "B to serve the grant on local made after the refused one",
        lambda: b.app_json(ALPHA, LOOK, providers, report, f"{providers}/home/shared", sandbox=True),
        lambda seen: "ok" in seen["report"],
        timeout=20,
    )
    assert seen["listed"] == [LOCAL], seen
    assert seen["refused"] == {"errno": "ENOENT"}, seen
    # Said once, to the fleet too, under B's name.
    events = json.loads(a.cli("fleet", "events", "--json", "--limit", "1000").stdout)
    fleet_refusals = [e for e in events if e["kind"] == "provider-refused"]
    assert {(e["host"], e["path"]) for e in fleet_refusals} >= {
        ("host-b", "/Providers/home"),
        ("host-b", "/Providers/under"),
    }, events
    assert len([e for e in fleet_refusals if e["host"] == "host-b"]) == 2, fleet_refusals
    log = (b.state / "daemon.log").read_text()
    assert f"provider home is not served on this host: refused: the folder of provider home, {b.root}," in log
