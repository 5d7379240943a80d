"""The corpus of buggy apps (issue 48, docs/SCENARIOS.md "The corpus of
buggy apps"): one app per bug a revocation test exists to catch, each with
its fixed twin (the same program with ``--fixed``), in Python, and in C
and Swift where the language changes how the bug looks (a descriptor, a
mapping, a scope). Every app takes ``[--fixed] DOCUMENT``, the document
relative to ``$SCOPEFS_MOUNT``, and gets ``local:docs/report.txt``
(``numbers\\n``) with a grant of ``local:docs``.

Three clients judge each app: ``scopefs test`` with the pattern's scenario
(``scenarios/PATTERN.yaml``), the pytest plugin (``plugin_tests.py``) and
ScopeFSTesting (``swift_apps/Tests``); each must fail every buggy app and
pass every fixed one (Tests/integration/test_buggy_apps.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCUMENT = "Providers/local/docs/report.txt"
CONTENT = "numbers\n"


@dataclass(frozen=True)
class Pattern:
    name: str
    #: What the buggy app does, for the table.
    bug: str
    #: The checks of the scenario that must fail on the buggy app (its
    #: other checks may fail too), as `scopefs test` names them.
    caught_by: tuple
    languages: tuple = ("python",)
    #: Checks that hold on the buggy app too: what the daemon must record
    #: of it (a denied read through a descriptor or a mapping is a denial
    #: event, SPEC S14, S29).
    holds: tuple = ()

    @property
    def scenario(self) -> Path:
        return HERE / "scenarios" / f"{self.name}.yaml"

    @property
    def module(self) -> str:
        return self.name.replace("-", "_")


PATTERNS = [
    Pattern(
        "cached-descriptor",
        "caches a descriptor",
        ("exit status is 0",),
        ("python", "c", "swift"),
        holds=("at least 1 denials of read",),
    ),
    Pattern(
        "cached-mapping",
        "caches a mapping (mmap)",
        ("exit status is 0",),
        ("python", "c", "swift"),
        holds=("at least 1 denials of read",),
    ),
    Pattern(
        "ignores-write-error",
        "ignores EPERM on write, reports success",
        ("the app printed 'could not save' on standard output", "the app did not print 'saved the document'"),
    ),
    Pattern("scope-leak-in-loop", "leaks a scope in a loop", ("no leaked scope",), ("python", "c", "swift")),
    Pattern("no-stop-on-error", "never stops a scope on an error path", ("no leaked scope",)),
    Pattern("stale-bookmark", "resolves a stale bookmark, never renews it", ("stale bookmarks were renewed",)),
    Pattern("revoked-presenter", "writes through a revoked presenter", ("at most 0 denials",)),
    Pattern("crash-on-stderr", "crashes, output on stderr only", ("the app did not print 'Traceback'",)),
    Pattern("traceback-exit-zero", "exits 0 after logging a traceback", ("the app did not print 'Traceback'",)),
    Pattern("hangs-on-revoke", "hangs on revoke", ("finished within 5 s (timeout)",)),
]

#: (pattern, language) of every app of the corpus.
ROWS = [(pattern, language) for pattern in PATTERNS for language in pattern.languages]
VARIANTS = ("buggy", "fixed")


def command(pattern: Pattern, language: str, variant: str, c_apps: Path, swift_apps: Path) -> list:
    """The app's command line, as the app runs it (the document relative to
    its view of the mount)."""
    switch = ["--fixed"] if variant == "fixed" else []
    if language == "python":
        program = ["python3", str(HERE / "python" / f"{pattern.module}.py")]
    elif language == "c":
        program = [str(c_apps / pattern.name)]
    else:
        program = [str(swift_apps / pattern.name)]
    return program + switch + [DOCUMENT]


def exposed(c_apps: Path, swift_apps: Path, python_client: Path) -> list:
    """What the default sandbox must show the apps (read-only): the corpus,
    the C and Swift builds, the Python client."""
    return [str(HERE), str(c_apps), str(swift_apps), str(python_client)]


def case_id(pattern: Pattern, language: str, variant: str) -> str:
    return f"{pattern.name}-{language}-{variant}"
