"""One store choice (issue 51, SPEC S13, S44; docs/CLI.md "A fleet"):
whether a state directory's isolation layer is its own SQLite file or a
fleet's PostgreSQL store is decided by `IsolationBackend`
(Sources/FleetStore/IsolationBackend.swift), and every consumer asks it.

The choice was made at about 32 call sites, and one was missed: the
settings page always opened the SQLite file, so on a fleet it showed this
host's file, none of the fleet's grants. These checks fail when a source
outside the owner reads `fleet.json` or opens the SQLite file by itself,
reaches the fleet's database without a configuration the owner (or `init`
and `mount --database`, which write it) handed out, or when a consumer
stops asking the owner."""

from __future__ import annotations

import re
from pathlib import Path

SOURCES = Path(__file__).resolve().parents[2] / "Sources"
OWNER = SOURCES / "FleetStore" / "IsolationBackend.swift"
# The configuration's own file defines `load` and `fileName`.
CONFIGURATION = SOURCES / "FleetStore" / "FleetConfiguration.swift"

# Deciding by oneself: reading `fleet.json`, opening the SQLite file of a
# state directory (creating it, `PolicyDatabase.create`, is `init`'s), or
# making the SQLite file's item locator, which a fleet has none of.
DECIDES = re.compile(
    r'FleetConfiguration\.load\(|FleetConfiguration\.fileName|"fleet\.json"|PolicyDatabase\.open\(|ItemLocator\(repository'
)

# Reaching the fleet's database: only from a configuration handed out.
CONNECTS = re.compile(r"\bFleetDatabase\(")
CONNECTORS = {
    # `init --database` and `mount --database`: they write the choice.
    SOURCES / "ScopeFSCLI" / "SetupCommands.swift",
    SOURCES / "ScopeFSCLI" / "FleetCommands.swift",
    # The daemon's claims and events, from the configuration of its run's
    # `IsolationBackend` (Daemon.run).
    SOURCES / "Daemon" / "Fleet" / "FleetCoordination.swift",
    SOURCES / "Daemon" / "Fleet" / "FleetEvents.swift",
}

# Each consumer, and what it takes from the owner.
CONSUMERS = {
    "ScopeFSCLI/ScopeFSCommand.swift": "every command's store (StateOptions)",
    "Daemon/Mount/Daemon.swift": "the daemon's policy, document and session stores",
    "SettingsPage/SettingsBackend.swift": "the settings page's apps, grants and changes",
    "ScopeFSCLI/Completions.swift": "TAB completion's apps and providers",
    "ScopeFSCLI/UsageHints.swift": "the providers an error's hint names",
    "ScopeFSCLI/EventsCommand.swift": "`events`: the layer's apps, this host's log",
    "ScopeFSCLI/PortalCommand.swift": "the portal's store",
    "ScopeFSCLI/FleetClaimCommands.swift": "`fleet claims` and `privacy`'s hosts",
    "ScopeFSCLI/FleetCommands.swift": "the `fleet` commands' store",
    "ScopeFSCLI/DocumentCommands.swift": "`query`: the layer's items and the SQLite file's locator",
}
ASKS = re.compile(r"\bIsolationBackend\b|\bbackend\(\)|\boptions\.(?:fleetStore|isolationStore|storeForChange)\(")


def code_lines(path: Path):
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip().startswith("//"):
            yield number, line


def sources() -> list[Path]:
    return sorted(p for p in SOURCES.rglob("*.swift") if p not in (OWNER, CONFIGURATION))


def test_no_source_outside_the_owner_decides_local_or_fleet():
    found = [
        f"{path.relative_to(SOURCES)}:{number}: {line.strip()}"
        for path in sources()
        for number, line in code_lines(path)
        if DECIDES.search(line)
    ]
    assert not found, "local or fleet decided outside IsolationBackend:\n" + "\n".join(found)


def test_the_fleet_database_is_reached_only_from_a_configuration_handed_out():
    found = [
        f"{path.relative_to(SOURCES)}:{number}: {line.strip()}"
        for path in sources()
        if SOURCES / "FleetStore" not in path.parents and path not in CONNECTORS
        for number, line in code_lines(path)
        if CONNECTS.search(line)
    ]
    assert not found, "the fleet's database opened outside IsolationBackend:\n" + "\n".join(found)


def test_every_consumer_asks_the_owner():
    missing = [
        f"{name} ({what})"
        for name, what in CONSUMERS.items()
        if not any(ASKS.search(line) for _, line in code_lines(SOURCES / name))
    ]
    assert not missing, "consumers that no longer ask IsolationBackend: " + ", ".join(missing)


def test_the_owner_hands_out_both_stores():
    text = OWNER.read_text()
    members = ("func reader(", "func store(", "func localRepository(", "func fleetRepository(", "var isFleet")
    rules = ("func locator(", "var builtInExtensionsOnly", "var containersFollowPolicy")
    for member in members + rules:
        assert member in text, f"IsolationBackend has no {member}"
    assert "FleetConfiguration.load(" in text, "IsolationBackend no longer reads the choice"
