"""Every "SPEC Sxx" the repository cites resolves to a statement of
docs/SPEC.md, and docs/SPEC-CODE.md's table names every statement.

Runs anywhere (no FUSE, no root): `make test-unit` runs it after the Swift
unit tests.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "SPEC.md"
SPEC_CODE = ROOT / "docs" / "SPEC-CODE.md"

# Where statements are cited: code, tests, docs, scripts.
CITING = ["Sources", "Tests", "docs", "mount-scripts", "bench", "clients", "README.md", "Makefile"]
SUFFIXES = {".swift", ".py", ".md", ".c", ".h", ".sh", ""}
CITATION = re.compile(r"\bS(\d+[a-z]?)\b")
# A range such as "S6–S12" or "S17-S21" cites both ends and everything between.
RANGE = re.compile(r"\bS(\d+)\s*[–-]\s*S?(\d+)\b")
DEFINITION = re.compile(r"^\*\*S(\d+[a-z]?)\.\*\*", re.MULTILINE)


def defined_statements() -> set[str]:
    return set(DEFINITION.findall(SPEC.read_text(encoding="utf-8")))


def citing_files():
    for entry in CITING:
        path = ROOT / entry
        files = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        for file in files:
            if file.is_file() and file.suffix in SUFFIXES and ".build" not in file.parts:
                yield file


def test_spec_numbers_are_unique_and_in_order():
    numbers = DEFINITION.findall(SPEC.read_text(encoding="utf-8"))
    assert len(numbers) == len(set(numbers)), "a statement number is defined twice"
    as_keys = [(int(re.match(r"\d+", n).group()), n) for n in numbers]
    assert as_keys == sorted(as_keys), "statements are numbered out of order"


def test_every_cited_statement_is_defined():
    defined = defined_statements()
    unresolved: dict[str, list[str]] = {}
    for file in citing_files():
        if file == SPEC:
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        if "SPEC" not in text and "S1" not in text:
            continue
        for number in CITATION.findall(text):
            if number not in defined:
                unresolved.setdefault(number, []).append(str(file.relative_to(ROOT)))
    assert not unresolved, f"cited but not in docs/SPEC.md: {unresolved}"


def test_spec_code_table_names_every_statement():
    table = [line for line in SPEC_CODE.read_text(encoding="utf-8").splitlines() if line.startswith("| S")]
    named: set[str] = set()
    for row in table:
        cell = row.split("|")[1]
        for low, high in RANGE.findall(cell):
            named.update(str(n) for n in range(int(low), int(high) + 1))
        named.update(CITATION.findall(cell))
    missing = sorted(defined_statements() - named, key=lambda n: (int(re.match(r"\d+", n).group()), n))
    assert not missing, f"docs/SPEC-CODE.md's table lacks {missing}"
