"""docs/CLIENTS.md "From zero to a revocation test in CI" runs as printed
(issue 31, "Done when"): after the README's session, in a fresh home
folder, every command block and every file of the walkthrough, in order,
as a developer who never saw the code would follow it. The Python app and
the Swift app each pass their revocation test (the pytest plugin, Swift
Testing with ScopeFSTesting) and the scenario, in the default sandbox
(`scopefs run` without `--no-sandbox`) and the default strict mount, and
the CI commands write their reports.

The Swift part builds a package against clients/swift from nothing (about
75 s on the 2-core CI machine, measured); it skips, saying why, when no
`swift` is found, as the Swift cases of test_clients.py do.
"""

from __future__ import annotations

import re
import shutil

import pytest
from doc_blocks import (
    CLIENTS,
    EXAMPLES,
    README,
    as_script,
    blocks,
    example_files,
    header_commands,
    remove_root,
    run_as_a_new_user,
    section,
    session_block,
    traversable_root,
)
from scopefs_harness import describe, mounts_under

HEADING = "## From zero to a revocation test in CI"
WALKTHROUGH_TIMEOUT = 290

# The same app with the bug the tests are for: it keeps the descriptor it
# opened in scope and reads through it after the revocation (SPEC S14).
BUGGY_NOTES = """
import os, sys, time
import scopefs
path = os.path.join(os.environ.get("SCOPEFS_MOUNT", "."), sys.argv[1])
scopefs.start_accessing(path)
document = open(path)
print("showing", os.path.basename(path), flush=True)
while True:
    document.seek(0)
    document.read()
    time.sleep(0.1)
"""
BUGGY_RUN = f"""
echo '=== the buggy app' | tee /dev/stderr
unset SCOPEFS_STATE  # the README's state again, after the CI block's own
cd ~/notes-app && cat > notes.py <<'EOF'{BUGGY_NOTES}EOF
python3 -m pytest -q tests || echo "pytest exit $?"
scopefs mount ~/scopefs
scopefs test tests/revoke-while-shown.yaml --app com.example.editor --expose "$PWD" -- \\
    python3 "$PWD/notes.py" Providers/local/docs/report.txt || echo "scenario exit $?"
scopefs unmount ~/scopefs
"""


def walkthrough_blocks():
    return blocks(section(CLIENTS, HEADING))


def test_every_block_of_the_walkthrough_is_run_or_says_why_not():
    """The walkthrough's blocks are commands (`sh`), files (`<!-- file:
    PATH -->`) or marked `<!-- not run: REASON -->`: nothing a reader
    pastes escapes the test below, and the exceptions stay few."""
    found = walkthrough_blocks()
    unknown = [b.text[:80] for b in found if not (b.is_commands or b.file or b.not_run)]
    assert not unknown, f"blocks neither run, nor files, nor marked not run: {unknown}"
    assert [b.not_run for b in found if b.not_run] == ["needs GitHub's runners"]
    assert sum(1 for b in found if b.file) >= 7 and sum(1 for b in found if b.is_commands) >= 7


@pytest.mark.scopefs_timeout(WALKTHROUGH_TIMEOUT + 20)
def test_walkthrough_from_zero_to_green_revocation_tests():
    if not shutil.which("swift"):
        pytest.skip("no `swift` on PATH: the walkthrough's Swift app needs a Swift toolchain")
    root = traversable_root()
    try:
        script = session_block() + "echo '=== walkthrough'\n" + as_script(walkthrough_blocks()) + BUGGY_RUN
        p = run_as_a_new_user(
            root, script, cwd=README.parent, timeout=WALKTHROUGH_TIMEOUT, extra_env={"TMPDIR": str(root)}
        )
        assert not mounts_under(root), f"mounts left behind: {mounts_under(root)}\n" + describe(p)
        assert p.returncode == 0, describe(p)
        out, buggy = p.stdout[p.stdout.index("=== walkthrough") :].split("=== the buggy app")
        errors = p.stderr.split("=== the buggy app")[0]
        # The scenario passes for both apps (its report is on stdout).
        assert out.count("scenario revoke-while-shown: PASSED") == 3, describe(p)
        assert "FAIL" not in out and "Traceback (most recent call last)" not in out + errors, describe(p)
        # pytest, twice (by hand, then as CI runs it): the plugin's world, sandboxed.
        assert out.count("1 passed") == 2, describe(p)
        # Swift Testing, twice, the second time with the CI report.
        assert (
            out.count("Test aRevokeClosesTheDocumentCleanly() passed")
            + errors.count("Test aRevokeClosesTheDocumentCleanly() passed")
            == 2
        ), describe(p)
        home = root / "home"
        python_report = (home / "notes-app" / "revocation-tests.xml").read_text()
        assert 'failures="0"' in python_report and "test_a_revoke_closes_the_document_cleanly" in python_report
        scenario_report = (home / "notes-app" / "scenario.xml").read_text()
        assert 'failures="0"' in scenario_report and "revoke-while-shown" in scenario_report, scenario_report
        swift_report = (home / "notes-swift" / "revocation-tests-swift-testing.xml").read_text()
        assert 'failures="0"' in swift_report and "aRevokeClosesTheDocumentCleanly" in swift_report
        # The same tests catch the app that reads a revoked document through
        # the descriptor it kept: they can fail.
        assert "pytest exit 1" in buggy and "1 failed" in buggy, describe(p)
        assert "scenario exit 1" in buggy and "scenario revoke-while-shown: FAILED" in buggy, describe(p)
    finally:
        remove_root(root)


def example_blocks():
    """docs/CLIENTS.md's command blocks outside the walkthrough, in order."""
    walkthrough = {b.text for b in walkthrough_blocks()}
    return [b for b in blocks(CLIENTS.read_text(encoding="utf-8")) if b.text not in walkthrough]


# Twice the run: it may wait for the other suite's run (builds_in_checkout).
@pytest.mark.scopefs_timeout(2 * WALKTHROUGH_TIMEOUT + 20)
def test_the_examples_of_clients_md_run_as_printed_after_the_readme_session():
    """Issue 31: every command block of docs/CLIENTS.md outside the
    walkthrough (the world, the Swift, C and Python examples) runs as
    printed after the README's session, from the checkout, in the default
    sandbox and the default strict mount; each example reads its file only
    after starting a scope. Seen failing on the old main: the world used
    `$B --state $S` of a build folder, and the examples' programs were
    where the sandbox does not look (`/tmp`, a relative path) or needed a
    `PYTHONPATH` the sandbox clears."""
    if not shutil.which("swift"):
        pytest.skip("no `swift` on PATH: the Swift example needs a Swift toolchain")
    found = example_blocks()
    marked = [b.not_run for b in found if b.not_run]
    assert marked == ["installs into /usr/local and cleans what the examples use"], marked
    root = traversable_root()
    try:
        script = session_block() + "echo '=== examples'\n" + as_script(found) + "scopefs unmount ~/scopefs\n"
        p = run_as_a_new_user(root, script, cwd=README.parent, timeout=WALKTHROUGH_TIMEOUT, builds_in_checkout=True)
        assert p.returncode == 0, describe(p)
        out = p.stdout[p.stdout.index("=== examples") :]
        # Swift, C and Python: EPERM before the start, the line in scope.
        assert out.count("read before start: EPERM") == 3, describe(p)
        assert out.count("first line: hello from ScopeFS") == 3, describe(p)
        assert out.count("scope count after: 0") == 3, describe(p)
    finally:
        remove_root(root)


# Example files whose comments name commands that are not `$ ` lines, and why.
NOT_RUN_EXAMPLES = {
    "swift-testing/Package.swift": "its `swift test` is test_swift_testing_library.py's (five tests, minutes)",
    "swift-testing/Tests/ReaderAppTests/ReaderAppTests.swift": "names `swift test` as its runner (the line above)",
}


def test_every_command_in_an_example_file_is_run_or_says_why_not():
    """A comment naming a command (`scopefs run`, `scopefs test`, `cc`,
    `pytest`, `swift test`) in docs/examples is a `$ ` line the test below
    runs, or its file is in NOT_RUN_EXAMPLES with a reason."""
    unmarked = []
    for path in example_files():
        name = str(path.relative_to(EXAMPLES))
        text = path.read_text(encoding="utf-8")
        names_a_command = re.search(r"scopefs (run|test|agent) |\bcc |pytest |swift test", text)
        if names_a_command and not header_commands(path) and name not in NOT_RUN_EXAMPLES:
            unmarked.append(name)
    assert not unmarked, f"commands in comments that no test runs: {unmarked}"


@pytest.mark.scopefs_timeout(2 * WALKTHROUGH_TIMEOUT + 20)  # as above
def test_the_commands_in_docs_examples_run_as_printed():
    """Issue 31: the `$ ` commands in the comments of docs/examples (the C,
    Python, picker, coordination, scenario and pytest examples) run as
    printed, after the README's session and docs/CLIENTS.md's world, from
    the checkout, in the default sandbox and the default strict mount.
    Seen failing on the old main: `PYTHONPATH=clients/python scopefs run
    ... python3 docs/examples/picker.py` lost PYTHONPATH and the relative
    path in the sandbox, `cc picker.c -Lbuild` named folders that do not
    exist, and `./picker` is no path the sandbox shows."""
    world = example_blocks()[0]
    assert world.is_commands and "scopefs mount ~/scopefs" in world.text, world.text
    commands = "".join(header_commands(path) for path in example_files())
    root = traversable_root()
    try:
        script = session_block() + world.text + "echo '=== examples'\n" + commands + "wait\nscopefs unmount ~/scopefs\n"
        p = run_as_a_new_user(root, script, cwd=README.parent, timeout=WALKTHROUGH_TIMEOUT, builds_in_checkout=True)
        assert p.returncode == 0, describe(p)
        out = p.stdout[p.stdout.index("=== examples") :]
        # example.c, example.py, the Swift example
        assert out.count("first line: hello from ScopeFS") == 3, describe(p)
        assert "claimed " in out and "released" in out, describe(p)  # coordinate.c
        assert "chapter1.txt: It was a dark and stormy night." in out, describe(p)  # picker.c
        assert re.search(r"picked \S+/Providers/local/Novel/chapter1.txt: \d+ characters", out), describe(p)
        assert "lost access" in out, describe(p)  # reader_app.py
        assert "3 passed" in out, describe(p)  # test_reader_app.py
        assert "scenario revoke-while-open: PASSED" in out and "scenario scope-leak: PASSED" in out, describe(p)
        assert out.count("exit 1: caught") == 2, describe(p)  # the buggy scenario apps
        assert (root / "home" / "Documents" / "docs" / "file.txt").read_text().endswith("a new line\n")
    finally:
        remove_root(root)
