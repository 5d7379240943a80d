"""Package.swift's targets read without Swift (no build, no SwiftPM lock),
for the checks that compare it with the sources and the docs:
Tests/docs/test_architecture_map.py (the layer table) and
Tests/repo/test_declared_dependencies.py (imports against dependencies).

`python3 tools/swift_package.py` prints each target and what it uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TARGET = re.compile(r'\.(target|executableTarget|systemLibrary|testTarget)\(\s*name:\s*"([^"]+)"')
PRODUCT = re.compile(r'\.product\(\s*name:\s*"([^"]+)",\s*package:\s*"([^"]+)"\s*\)')
IMPORT = re.compile(
    r"^\s*(?:@\w+\s+)*(?:(?:public|package|internal|private|fileprivate)\s+)?import\s+"
    r"(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Target:
    name: str
    kind: str  # target, executableTarget, systemLibrary, testTarget
    dependencies: tuple[str, ...]  # targets of this package
    products: tuple[str, ...]  # products of other packages
    folder: Path

    @property
    def is_swift(self) -> bool:
        return self.kind != "systemLibrary" and any(self.folder.rglob("*.swift"))

    def imports(self) -> set[str]:
        """The modules this target's Swift sources import."""
        found: set[str] = set()
        for source in self.folder.rglob("*.swift"):
            found.update(IMPORT.findall(source.read_text(encoding="utf-8")))
        return found


def closing(text: str, start: int, opening: str, closing: str) -> int:
    """The index just past the bracket that closes the one before `start`."""
    depth, index = 1, start
    while depth:
        depth += {opening: 1, closing: -1}.get(text[index], 0)
        index += 1
    return index


def targets(package: Path = ROOT / "Package.swift") -> dict[str, Target]:
    text = package.read_text(encoding="utf-8")
    found: dict[str, Target] = {}
    for match in TARGET.finditer(text):
        kind, name = match.groups()
        body = text[match.end() : closing(text, match.end(), "(", ")")]
        dependencies: list[str] = []
        products: list[str] = []
        listed = re.search(r"dependencies:\s*\[", body)
        if listed:
            inner = body[listed.end() : closing(body, listed.end(), "[", "]") - 1]
            products = [name for name, _ in PRODUCT.findall(inner)]
            dependencies = re.findall(r'"([^"]+)"', PRODUCT.sub("", inner))
        path = re.search(r'\bpath:\s*"([^"]+)"', body)
        default = ("Tests/" if kind == "testTarget" else "Sources/") + name
        found[name] = Target(
            name, kind, tuple(dependencies), tuple(products), package.parent / (path.group(1) if path else default)
        )
    return found


if __name__ == "__main__":
    for target in targets().values():
        print(f"{target.name} ({target.kind}): {', '.join(target.dependencies + target.products) or '-'}")
