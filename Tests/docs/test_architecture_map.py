"""The map stays true (issue 51): docs/ARCHITECTURE.md and docs/SPEC-CODE.md
name only files that exist, the three paths name only functions their
files declare, the layer table says what Package.swift says, and every
"decision N" cited anywhere is a decision of docs/DECISIONS.md, which is
where decisions are cited (not ARCHITECTURE.md, which held them once).

The old map named five files that no longer existed and repeated two rows;
nothing checked it. Runs anywhere (no FUSE, no root): `make test` runs
Tests/docs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import swift_package  # noqa: E402  (tools/, not a package)

DOCS = ROOT / "docs"
ARCHITECTURE = DOCS / "ARCHITECTURE.md"
SPEC_CODE = DOCS / "SPEC-CODE.md"
DECISIONS = DOCS / "DECISIONS.md"
MAPS = [ARCHITECTURE, SPEC_CODE]

MODULES = {path.name for path in (ROOT / "Sources").iterdir() if path.is_dir()}
TOP_LEVEL = {path.name for path in ROOT.iterdir()}
# A token with one of these endings names a file of the repository.
FILE_SUFFIXES = (".swift", ".py", ".md", ".c", ".h", ".sh")
BACKTICKED = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def repo_path(token: str) -> Path | str | None:
    """Where a backticked token of a map points in the repository: a path
    under Sources/ (`Daemon/Control/ControlServer.swift`) or from the root
    (`Tests/repo/...`); "bare" for a file name without its folder, which
    a reader cannot find; None for what is no repository path (a type, a
    path of the state directory or the mount, an absolute path)."""
    token = token.strip()
    if " " in token or token.startswith(("/", "$", "~", "-")) or "://" in token:
        return None
    first = token.split("/")[0]
    if "/" in token:
        if first in TOP_LEVEL:
            return ROOT / token
        if first in MODULES:
            return ROOT / "Sources" / token
        return "unknown" if token.endswith(FILE_SUFFIXES) else None
    return "bare" if token.endswith(FILE_SUFFIXES) else None


def exists(path: Path) -> bool:
    if "*" in path.name:
        return any(path.parent.glob(path.name))
    return path.exists()


def section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"docs/ARCHITECTURE.md has no section '## {title}'"
    return match.group(1)


def test_every_path_the_map_names_exists():
    wrong: list[str] = []
    for document in MAPS:
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
            for token in BACKTICKED.findall(line):
                where = repo_path(token)
                if where in ("bare", "unknown"):
                    wrong.append(f"{document.name}:{number}: `{token}` (name its folder: Module/File.swift)")
                elif isinstance(where, Path) and not exists(where):
                    wrong.append(f"{document.name}:{number}: `{token}` does not exist")
    assert not wrong, "the map names files that are not in the repository:\n" + "\n".join(wrong)


def anchors(document: Path) -> set[str]:
    text = document.read_text(encoding="utf-8")
    headings = {
        re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)
    }
    return headings | set(re.findall(r'<a id="([^"]+)"></a>', text))


def test_every_link_of_the_map_leads_somewhere():
    wrong: list[str] = []
    for document in [*MAPS, DECISIONS, DOCS / "GLOSSARY.md"]:
        for target in LINK.findall(document.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            file, _, anchor = target.partition("#")
            path = (document.parent / file) if file else document
            if not path.exists():
                wrong.append(f"{document.name}: ({target}): no such file")
            elif anchor and anchor not in anchors(path):
                wrong.append(f"{document.name}: ({target}): {path.name} has no such anchor")
    assert not wrong, "\n".join(wrong)


def steps(text: str) -> list[str]:
    """The numbered steps of the paths section, each as one string."""
    found: list[str] = []
    for line in text.splitlines():
        if re.match(r"\d+\. ", line):
            found.append(line)
        elif found and line.startswith("   "):
            found[-1] += " " + line.strip()
        elif not line.strip():
            continue
        else:
            found.append("")
    return [step for step in found if step]


def test_every_function_the_paths_name_is_in_its_file():
    """In "Three paths", a lowercase name after a file (`Gate.swift` `gate`)
    is declared in that file: a renamed function breaks the map here, not
    in a newcomer's hands."""
    paths = section(ARCHITECTURE.read_text(encoding="utf-8"), "Three paths")
    wrong: list[str] = []
    named = 0
    for step in steps(paths):
        current: Path | None = None
        for token in BACKTICKED.findall(step):
            where = repo_path(token)
            if isinstance(where, Path):
                current = where
                continue
            if current is None or not re.fullmatch(r"[a-z_][A-Za-z0-9_]*", token) or not current.is_file():
                continue
            source = current.read_text(encoding="utf-8")
            declared = (
                re.search(rf"\b(func|var|let|case)\s+{token}\b", source)
                if current.suffix == ".swift"
                else re.search(rf"\b{token}\s*\(", source)
            )
            named += 1
            if not declared:
                wrong.append(f"`{token}` is not declared in {current.relative_to(ROOT)}")
    assert named >= 30, f"the paths name only {named} functions: is the section's format still 'File `name`'?"
    assert not wrong, "docs/ARCHITECTURE.md's paths name functions their files lack:\n" + "\n".join(wrong)


def test_the_layer_table_says_what_package_swift_says():
    targets = swift_package.targets()
    swift = {name for name, target in targets.items() if target.is_swift and target.kind != "testTarget"}
    layers = section(ARCHITECTURE.read_text(encoding="utf-8"), "Layers")
    table: dict[str, set[str]] = {}
    order: list[str] = []
    for row in layers.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if not row.startswith("| `") or len(cells) != 3:
            continue
        uses = {name.strip() for name in cells[2].split(",") if name.strip()}
        for module in BACKTICKED.findall(cells[0]):
            assert module not in table, f"the layer table has two rows for {module}"
            table[module] = uses
            order.append(module)
    wrong = [f"{name} has no row" for name in sorted(swift - set(table))]
    wrong += [f"{name} is no Swift target of Package.swift" for name in sorted(set(table) - swift)]
    for name in sorted(set(table) & swift):
        declared = {dependency for dependency in targets[name].dependencies if dependency in swift}
        if table[name] != declared:
            wrong.append(
                f"{name}: the table says {sorted(table[name])}, Package.swift {sorted(declared)}"
                f" (C targets are left out of the table)"
            )
    for position, name in enumerate(order):
        above = set(order[:position]) & table[name]
        if above:
            wrong.append(f"{name} uses {sorted(above)}, which the table lists above it (rows use only rows below)")
    assert not wrong, "docs/ARCHITECTURE.md's layers and Package.swift differ:\n" + "\n".join(wrong)


def decision_numbers() -> list[int]:
    log = DECISIONS.read_text(encoding="utf-8").split("\n## Decisions\n", 1)[1]
    return [int(number) for number in re.findall(r"^(\d+)\. \*\*", log, re.MULTILINE)]


def test_decisions_are_numbered_once_in_order_and_indexed_by_topic():
    numbers = decision_numbers()
    assert numbers == list(range(1, len(numbers) + 1)), "decisions are numbered 1, 2, 3, ... with none twice"
    index = DECISIONS.read_text(encoding="utf-8").split("\n## Decisions\n", 1)[0]
    indexed: set[int] = set()
    for line in index.splitlines():
        listed = re.search(r":\s*((?:\d+,\s*)*\d+)\s*$", line) if line.startswith("- <a id=") else None
        if listed:
            indexed.update(int(number) for number in listed.group(1).split(","))
    assert not indexed - set(numbers), f"topics list decisions that do not exist: {sorted(indexed - set(numbers))}"
    assert not set(numbers) - indexed, f"decisions under no topic: {sorted(set(numbers) - indexed)}"


# Where decisions are cited: code, tests, docs, scripts.
CITING = [
    "Sources",
    "Tests",
    "docs",
    "clients",
    "bench",
    "packaging",
    "tools",
    "mount-scripts",
    "extensions",
    "README.md",
    "CONTRIBUTING.md",
    "CHANGELOG.md",
    "Makefile",
    "Package.swift",
]
SUFFIXES = {".swift", ".py", ".md", ".c", ".h", ".sh", ".toml", ".yaml", ".yml", ""}
SKIPPED = {".build", "node_modules", "__pycache__", ".git"}
# "decision 45", "decisions 49, 51 and 52", "decision 8 and 43"; a comment's
# line break may fall inside.
CITATION = re.compile(r"\bdecisions?[\s/#*]+(\d+(?:(?:,|,?[\s/#*]+and)[\s/#*]+\d+)*)", re.IGNORECASE)
# A decision cited in ARCHITECTURE.md ("ARCHITECTURE.md, decision 45",
# "ARCHITECTURE decision 40", "ARCHITECTURE.md 8, 43", "ARCHITECTURE.md,
# "Mount views""): since issue 51 they are in DECISIONS.md.
IN_ARCHITECTURE = re.compile(r"ARCHITECTURE(?:\.md)?(?:'s)?,?[\s/#*]+(?:decisions?\b|\d|\")")


def citing_files():
    for entry in CITING:
        path = ROOT / entry
        files = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        for file in files:
            if file.is_file() and file.suffix in SUFFIXES and not SKIPPED & set(file.parts):
                yield file


def test_every_cited_decision_exists():
    known = set(decision_numbers())
    unknown: dict[int, list[str]] = {}
    for file in citing_files():
        text = file.read_text(encoding="utf-8", errors="replace")
        for listed in CITATION.findall(text):
            for number in map(int, re.findall(r"\d+", listed)):
                if number not in known:
                    unknown.setdefault(number, []).append(str(file.relative_to(ROOT)))
    assert not unknown, f"cited as a decision but not in docs/DECISIONS.md: {unknown}"


def test_decisions_are_cited_in_the_decision_log():
    """CHANGELOG.md keeps its history as written; everything else points
    at docs/DECISIONS.md."""
    wrong: list[str] = []
    for file in citing_files():
        if file.name == "CHANGELOG.md" or file == Path(__file__).resolve():
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        for match in IN_ARCHITECTURE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            wrong.append(f"{file.relative_to(ROOT)}:{line}: {match.group(0)!r}")
    assert not wrong, "decisions are in docs/DECISIONS.md now:\n" + "\n".join(wrong)


def test_the_spec_table_repeats_no_row():
    """The old table had two rows twice, each with stale paths."""
    rows = [line for line in SPEC_CODE.read_text(encoding="utf-8").splitlines() if re.match(r"\| S\d", line)]
    seen: dict[frozenset[str], str] = {}
    twice: list[str] = []
    for row in rows:
        cell = row.split("|")[1].strip()
        statements = set(re.findall(r"\bS(\d+[a-z]?)\b", cell))
        for low, high in re.findall(r"\bS(\d+)\s*[–-]\s*S?(\d+)\b", cell):
            statements.update(str(n) for n in range(int(low), int(high) + 1))
        key = frozenset(statements)
        if key in seen:
            twice.append(f"'{seen[key]}' and '{cell}'")
        seen[key] = cell
    assert not twice, "docs/SPEC-CODE.md has rows for the same statements:\n" + "\n".join(twice)
