"""One access decision (issue 46, SPEC S47; docs/SECURITY.md "The access
rule"): whether a process may read, write or reach an item through a
grant is decided by `Decision.permit` (and `permitDescriptor` for open
descriptors) in Sources/Policy, and every consumer asks it. Descriptor
checks once decided apart from opens and let a write descriptor outlive
its grant; the portal's layout and the control attributes had rules of
their own. These checks fail when a consumer stops asking the rule or
decides on a grant's state itself."""

from __future__ import annotations

import re
from pathlib import Path

SOURCES = Path(__file__).resolve().parents[2] / "Sources"

# Each consumer, and what it decides through the rule.
CONSUMERS = {
    "ScopeFS/Gate.swift": "opens and requests by name; every operation on an open descriptor",
    "ScopeFS/ScopeFileSystem+Control.swift": "start, stop, scope and bookmark attributes",
    "Portal/DocumentGrants.swift": "the document layout's access and its descriptors",
    "Portal/DocumentPortal.swift": "the portal's Info and List permissions (through DocumentGrants)",
    "Portal/DocumentLayout+Saves.swift": "atomic saves' temporaries, S48 (through DocumentGrants.mayReplace)",
    "ScopeFS/ScopeFileSystem+Replacement.swift": "temporaries beside a single-file grant, S48",
    "Documents/Bookmarks.swift": "whether a bookmark resolves",
}
# Handlers that ask the rule through the gate (`gate(`), the choke point
# every request by name passes before its syscall.
GATED = {
    "ScopeFS/ScopeFileSystem+Access.swift": "access(2) and chdir's check, as an open would be decided",
    "ScopeFS/ScopeFileSystem+Thumbnails.swift": "who reads (metadata) and saves (a write) an item's preview, S50",
}
ASKS = re.compile(
    r"\b(?:Decision\.permit|Decision\.permitDescriptor|\.permitDescriptor|DocumentGrants\.(?:access|mayReplace))\("
)
# Deciding on a grant's state or access by hand, where the rule belongs
# (the rule's own answer, an `Access`, may be read: that is its output).
BY_HAND = re.compile(r"\.state == \.active|\bgrant\.access ==|\bgrant\.state [!=]=")


def test_every_consumer_asks_the_one_rule():
    for name, what in CONSUMERS.items():
        text = (SOURCES / name).read_text()
        assert ASKS.search(text), f"{name} ({what}) no longer asks Decision.permit"


def test_every_gated_handler_passes_the_gate():
    for name, what in GATED.items():
        text = (SOURCES / name).read_text()
        assert re.search(r"\bgate\(", text), f"{name} ({what}) no longer passes the gate"


def test_the_layout_and_the_control_attributes_decide_nothing_by_hand():
    for name in (
        "Portal/DocumentLayout.swift",
        "Portal/DocumentLayout+Saves.swift",
        "Portal/DocumentLayout+Folders.swift",
        "Portal/DocumentPortal.swift",
        "ScopeFS/ScopeFileSystem+Replacement.swift",
        "ScopeFS/ScopeFileSystem+Access.swift",
        "Documents/Bookmarks.swift",
        "ScopeFS/ScopeFileSystem+Control.swift",
        "ScopeFS/ScopeFileSystem+Thumbnails.swift",
        "ScopeFS/Gate.swift",
    ):
        found = [
            f"{name}:{number}: {line.strip()}"
            for number, line in enumerate((SOURCES / name).read_text().splitlines(), 1)
            if BY_HAND.search(line) and not line.strip().startswith("//")
        ]
        assert not found, "a grant decided by hand, not by Decision.permit:\n" + "\n".join(found)


def test_a_caller_without_a_process_is_named_once():
    """Rules that hold whichever of an app's processes asks (a descriptor's
    operations, the portal's layout) ask for `Caller.anyProcess(of:)`; a
    made-up process key elsewhere would be taken for a real process."""
    made_up = re.compile(r"ProcessKey\(pid: 0\b")
    found = [
        f"{path.relative_to(SOURCES)}:{number}"
        for path in SOURCES.rglob("*.swift")
        if path.name != "Decision.swift"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if made_up.search(line)
    ]
    assert not found, "a process key made up, not Caller.anyProcess(of:):\n" + "\n".join(found)
