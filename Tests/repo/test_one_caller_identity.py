"""One answer to who is calling (issue 46, finding 2; SPEC S5, S45, S46;
docs/SECURITY.md "Who is calling"): whether a peer is the owner's process
or an app's, and which app's, is decided by `CallerIdentity`
(Sources/Processes/CallerIdentity.swift), on the daemon's attribution.

The portal and its layout recognised app processes by a `scopefs-run-`
cgroup of their own reading, which a non-root owner's runs do not have
(they are told apart by process events), so an app's calls through its
bus proxy passed as the owner's. These checks fail when a source outside
the service reads a peer's cgroup, its run leaf or its `/.flatpak-info`,
asks the tracker about a process for itself, or when one of the
consumers stops asking the service."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "Sources"
SERVICE = SOURCES / "Processes" / "CallerIdentity.swift"

# The attribution itself, which the service reads: the runs' cgroups (made
# and read for the daemon's tracker) and /proc's reader.
MECHANISM = {SOURCES / "Processes" / "AppCgroups.swift", SOURCES / "Processes" / "ProcFS.swift"}
# A process asking about itself (is this process in a run?), never a peer:
# every cgroup read of theirs must be of "self".
SELF_CHECKS = {SOURCES / "Launcher" / "OwnerCheck.swift", SOURCES / "Launcher" / "MountLossFollower.swift"}
# Not who is calling, but which processes a known run holds: `app remove
# --force` lists the processes in the run leaves the run journal names, to
# end them (issue 46, finding 5c). It may read cgroups, never a run prefix.
RUN_MEMBERS = {SOURCES / "ScopeFSCLI" / "AppRemoval.swift"}

RUN_LEAF = re.compile(r"leafPrefix|scopefs-run-")
CGROUP_READ = re.compile(r"cgroup2Path\(of:\s*([^)]*)\)|/cgroup\"|parseCgroup2Path\(")
FLATPAK_INFO_READ = re.compile(r"root/\.flatpak-info")
TRACKER_QUERY = re.compile(r"\battribution\(of:|\.app\(of:|app\(ofCgroup:")
PEER_CREDENTIALS = re.compile(r"scopefs_portal_caller\(|SO_PEERCRED")

# Who may ask the tracker about a process: the tracker, the `identify`
# answer, and the daemon handing the tracker to its control server's
# CallerIdentity.
TRACKER_QUERIERS = {
    SOURCES / "Daemon" / "Callers" / "ProcessTracker.swift",
    SOURCES / "Daemon" / "Control" / "ProcessHandling.swift",
    SOURCES / "Daemon" / "Mount" / "Daemon.swift",
}
# Where the kernel's credentials of a peer are read (then handed to the service).
CREDENTIAL_READERS = {
    SOURCES / "Control" / "UnixSocket.swift",
    SOURCES / "Portal" / "OwnerCaller.swift",
    SOURCES / "CPortalBus" / "portal_bus.c",
    SOURCES / "CPortalBus" / "include" / "portal_bus.h",
}

# Every consumer, and how it asks the service.
CONSUMERS = {
    SOURCES / "Portal" / "OwnerCaller.swift": r"callers\.identify\(pid:",
    SOURCES / "Portal" / "DocumentsObject.swift": r"OwnerCaller\.check\(\s*message, callers: portal\.callers",
    SOURCES / "Portal" / "FileChooserObject.swift": r"OwnerCaller\.check\(\s*message, callers: portal\.callers",
    SOURCES / "Portal" / "FileTransferObject.swift": r"OwnerCaller\.identify\(message, callers: portal\.callers",
    SOURCES / "Portal" / "DocumentLayout.swift": r"portal\.callers\.identify\(pid: request\.threadID",
    SOURCES / "SettingsPage" / "AppPeerCheck.swift": r"callers\.identify\(pid:",
    SOURCES / "Daemon" / "Control" / "ControlServer.swift": r"identity\.identify\(pid:",
}
# Where the service is made, each with its source of attribution.
MAKERS = {
    SOURCES / "Portal" / "DocumentPortal.swift": r"source: \.daemon",
    SOURCES / "SettingsPage" / "AppPeerCheck.swift": r"source: \.daemon",
    SOURCES / "Daemon" / "Control" / "ControlServer.swift": r"source: \.tracker",
}


def code_lines(path: Path):
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip().startswith(("//", "*", "/*")):
            yield number, line


def sources() -> list[Path]:
    return [p for p in SOURCES.rglob("*") if p.suffix in (".swift", ".c", ".h") and p != SERVICE]


def where(path: Path, number: int, line: str) -> str:
    return f"{path.relative_to(REPO)}:{number}: {line.strip()}"


def test_no_source_outside_the_service_reads_a_peers_run_cgroup_or_sandbox():
    found = []
    for path in sources():
        if path in MECHANISM:
            continue
        for number, line in code_lines(path):
            for match in CGROUP_READ.finditer(line):
                if path in SELF_CHECKS and match.group(1) == '"self"' or path in RUN_MEMBERS:
                    continue
                found.append(where(path, number, line))
            if RUN_LEAF.search(line) and path not in SELF_CHECKS:
                found.append(where(path, number, line))
            if FLATPAK_INFO_READ.search(line):
                found.append(where(path, number, line))
    assert not found, "app-ness of a process decided outside CallerIdentity:\n" + "\n".join(found)


def test_only_the_service_and_the_tracker_ask_which_app_a_process_is():
    found = [
        where(path, number, line)
        for path in sources()
        if path not in TRACKER_QUERIERS and path not in MECHANISM
        for number, line in code_lines(path)
        if TRACKER_QUERY.search(line)
    ]
    assert not found, "the tracker asked outside CallerIdentity's sources:\n" + "\n".join(found)


def test_peer_credentials_are_read_only_where_they_reach_the_service():
    found = [
        where(path, number, line)
        for path in sources()
        if path not in CREDENTIAL_READERS
        for number, line in code_lines(path)
        if PEER_CREDENTIALS.search(line)
    ]
    assert not found, "a peer's credentials read where they do not reach CallerIdentity:\n" + "\n".join(found)


def test_every_consumer_asks_the_service():
    missing = [
        str(path.relative_to(REPO)) for path, pattern in CONSUMERS.items() if not re.search(pattern, path.read_text())
    ]
    assert not missing, "consumers that no longer ask CallerIdentity:\n" + "\n".join(missing)


def test_the_service_is_made_only_by_its_consumers_with_the_daemons_attribution():
    made = {path for path in sources() for _, line in code_lines(path) if re.search(r"\bCallerIdentity\(", line)}
    assert made == set(MAKERS), sorted(str(p.relative_to(REPO)) for p in made ^ set(MAKERS))
    wrong = [str(p.relative_to(REPO)) for p, pattern in MAKERS.items() if not re.search(pattern, p.read_text())]
    assert not wrong, wrong


def test_the_service_reads_the_kernels_signs_and_fails_closed():
    text = SERVICE.read_text()
    assert "AppCgroups.leafPrefix" in text and "root/.flatpak-info" in text
    # A gone process, a failed daemon: unknown, never the owner.
    assert 'return .unknown("process \\(pid) is gone")' in text
    assert re.search(r"case \.failure\(let error\):\s*return \.unknown\(", text)
    # A kept "no app" answer ends with the next registration.
    assert "registrations?.stamp()" in text and "given == stamp" in text
