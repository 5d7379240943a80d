"""Package.swift declares what each target imports, and nothing else
(issue 51; decision 37: "every `import` is declared in Package.swift").

SwiftPM lets a target import a module it reaches only through another
target's dependencies, so an undeclared import builds until that other
edge goes; and a dependency no source imports still makes the target wait
for it and link it. Both had happened (Processes imported CommandErrors
and HostText undeclared, SettingsPage HummingbirdCore; FleetStore and
SettingsPage declared what they never imported). Read from the sources
and Package.swift's text (tools/swift_package.py), no build."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import swift_package  # noqa: E402  (tools/, not a package)

# What the toolchain gives every target.
TOOLCHAIN = {
    "Foundation",
    "FoundationEssentials",
    "Glibc",
    "Musl",
    "Darwin",
    "Dispatch",
    "Synchronization",
    "Testing",
    "XCTest",
    "_Concurrency",
    "RegexBuilder",
    "Observation",
}


def swift_targets():
    return [target for target in swift_package.targets().values() if target.is_swift]


def test_every_import_is_declared():
    wrong: list[str] = []
    for target in swift_targets():
        declared = set(target.dependencies) | set(target.products)
        for module in sorted(target.imports() - declared - TOOLCHAIN - {target.name}):
            wrong.append(f"{target.name} imports {module}, which its dependencies in Package.swift lack")
    assert not wrong, "\n".join(wrong)


def test_every_declared_dependency_is_imported():
    wrong: list[str] = []
    for target in swift_targets():
        imported = target.imports()
        for dependency in sorted(set(target.dependencies) | set(target.products)):
            if dependency not in imported:
                wrong.append(f"{target.name} declares {dependency}, which none of its sources imports")
    assert not wrong, "\n".join(wrong)
