"""The corpus of buggy apps judged by the pytest plugin (issue 48): each
test is what an app developer writes with ``scopefs_mount`` for one bug
pattern, run against every app of the pattern, buggy and fixed, in the
default sandbox with strict scopes. Every buggy app must fail its test,
every fixed one pass (Tests/integration/test_buggy_apps.py runs this file
with ``pytest -p scopefs_testing`` and reads its JUnit report). Not named
``test_*.py``: the integration suite does not collect it itself.

``$CORPUS_C_APPS`` and ``$CORPUS_SWIFT_APPS`` name the folders of the built
C and Swift apps; ``clients/python`` and this folder are on ``PYTHONPATH``."""

from __future__ import annotations

import os
from pathlib import Path

import corpus
import pytest

C_APPS = Path(os.environ.get("CORPUS_C_APPS", "/nonexistent"))
SWIFT_APPS = Path(os.environ.get("CORPUS_SWIFT_APPS", "/nonexistent"))
PYTHON_CLIENT = Path(corpus.HERE).parents[2] / "clients" / "python"
BY_NAME = {pattern.name: pattern for pattern in corpus.PATTERNS}

pytestmark = pytest.mark.scopefs(
    app="com.example.corpus", files={"docs/report.txt": corpus.CONTENT}, grants=["local:docs"]
)


def cases(name: str):
    """The pattern's apps: each language, buggy and fixed."""
    pattern = BY_NAME[name]
    return pytest.mark.parametrize(
        "language, variant",
        [(language, variant) for language in pattern.languages for variant in corpus.VARIANTS],
        ids=[f"{name}-{language}-{variant}" for language in pattern.languages for variant in corpus.VARIANTS],
    )


def start(mount, name: str, language: str, variant: str):
    """The app, in the default sandbox: its program and the Python client
    exposed, ``PYTHONPATH`` given (the sandbox passes no environment on)."""
    command = corpus.command(BY_NAME[name], language, variant, C_APPS, SWIFT_APPS)
    exposed = corpus.exposed(C_APPS, SWIFT_APPS, PYTHON_CLIENT)
    return mount.start(command, sandbox=True, expose=exposed, env={"PYTHONPATH": str(PYTHON_CLIENT)})


def ended(app, timeout: float = 10) -> tuple:
    """The app's exit status, standard output and error, once it ended."""
    out, err = app.communicate(timeout=timeout)
    return app.returncode, out, err


def revoked_while_open(mount, name: str, language: str, variant: str, timeout: float = 10) -> tuple:
    """Starts the app, revokes its grant once it printed READY, waits for its end."""
    app = start(mount, name, language, variant)
    app.wait_for_line("READY")
    mount.revoke("local:docs")
    return ended(app, timeout)


def ends_cleanly(status: int, out: str, err: str) -> None:
    assert status == 0, err
    assert "lost access" in out, out
    assert "Traceback" not in err, err


@cases("cached-descriptor")
def test_a_revoke_ends_a_reader_cleanly(scopefs_mount, language, variant):
    ends_cleanly(*revoked_while_open(scopefs_mount, "cached-descriptor", language, variant))
    scopefs_mount.wait_for_events("denial", operation="read")
    assert not scopefs_mount.leaks()


@cases("cached-mapping")
def test_a_revoke_ends_a_mapping_reader_cleanly(scopefs_mount, language, variant):
    ends_cleanly(*revoked_while_open(scopefs_mount, "cached-mapping", language, variant))
    scopefs_mount.wait_for_events("denial", operation="read")
    assert not scopefs_mount.leaks()


@cases("ignores-write-error")
def test_a_refused_save_is_told(scopefs_mount, language, variant):
    status, out, err = revoked_while_open(scopefs_mount, "ignores-write-error", language, variant)
    assert status == 0, err
    assert "could not save" in out and "saved the document" not in out, out
    assert scopefs_mount.host_path("local:docs/report.txt").read_text() == "draft\n"


@cases("scope-leak-in-loop")
def test_reloading_leaves_no_scope(scopefs_mount, language, variant):
    status, out, err = ended(start(scopefs_mount, "scope-leak-in-loop", language, variant))
    assert status == 0 and "done" in out, (out, err)
    assert not scopefs_mount.leaks()
    assert not scopefs_mount.events("unbalanced-stop")


@cases("no-stop-on-error")
def test_an_error_path_stops_the_scope(scopefs_mount, language, variant):
    status, out, err = revoked_while_open(scopefs_mount, "no-stop-on-error", language, variant)
    assert status == 0 and "lost access" in out, (out, err)
    assert not scopefs_mount.leaks()


@cases("stale-bookmark")
def test_a_stale_bookmark_is_renewed(scopefs_mount, language, variant):
    app = start(scopefs_mount, "stale-bookmark", language, variant)
    app.wait_for_line("READY")
    scopefs_mount.rename_on_host("local:docs/report.txt", "local:docs/renamed.txt")
    status, out, err = ended(app)
    assert status == 0 and "reopened renamed.txt" in out, (out, err)
    scopefs_mount.settle()
    stale = scopefs_mount.events("stale-bookmark")
    assert sum(e.get("occurrences", 1) for e in stale) == 1, stale


@cases("revoked-presenter")
def test_a_revoked_document_is_not_written(scopefs_mount, language, variant):
    status, out, err = revoked_while_open(scopefs_mount, "revoked-presenter", language, variant)
    assert status == 0 and "lost access" in out, (out, err)
    scopefs_mount.settle()
    assert not scopefs_mount.events("denial")
    assert scopefs_mount.host_path("local:docs/report.txt").read_text() == corpus.CONTENT


@cases("crash-on-stderr")
def test_a_revoke_is_no_crash(scopefs_mount, language, variant):
    ends_cleanly(*revoked_while_open(scopefs_mount, "crash-on-stderr", language, variant))


@cases("traceback-exit-zero")
def test_a_revoke_logs_no_traceback(scopefs_mount, language, variant):
    ends_cleanly(*revoked_while_open(scopefs_mount, "traceback-exit-zero", language, variant))


@cases("hangs-on-revoke")
def test_a_revoke_ends_the_app_within_seconds(scopefs_mount, language, variant):
    ends_cleanly(*revoked_while_open(scopefs_mount, "hangs-on-revoke", language, variant, timeout=5))
