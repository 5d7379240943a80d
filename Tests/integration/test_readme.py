"""The README's session runs verbatim (issue 19: "the first hour works"):
its code block, in a fresh home folder, with `scopefs` on PATH, as a new
user would paste it."""

from __future__ import annotations

from doc_blocks import README, blocks, fleet_block, revocation_block, run_as_a_new_user, session_block
from scopefs_harness import describe


def test_readme_session_runs_verbatim(tmp_path):
    p = run_as_a_new_user(tmp_path, session_block())
    assert p.returncode == 0, describe(p)
    out = p.stdout
    assert "Container" in out and "Providers" in out, describe(p)
    assert "no scope yet: EPERM" in out, describe(p)
    # In scope twice: `scope exec`, and `run --hold-scopes` (issue 50.3).
    assert out.count("It was a dark and stormy night.") == 2, describe(p)
    assert "exit 77: only you change grants" in out, describe(p)
    # Issue 50.1: a mount over a provider's folder is refused at once, not wedged.
    assert "exit 73: not over a provider's folder" in out, describe(p)
    assert "chapter1.txt ->" in out and "chapter1 2.txt" not in out, describe(p)


def test_readme_revocation_testing_block_runs_verbatim_after_the_session(tmp_path):
    """Issue 31, point 1: the README's revocation-testing block, pasted
    after its session from the repository's folder, gives the printed
    result in the default mount (strict scopes) and the default sandbox:
    the buggy app fails the scenario (exit status 1), the fixed one passes.
    Seen failing on the old main: `local:docs` did not exist (66)."""
    script = session_block() + "echo '=== revocation block'\n" + revocation_block()
    p = run_as_a_new_user(tmp_path, script, cwd=README.parent, timeout=240)
    assert p.returncode == 0, describe(p)
    out = p.stdout[p.stdout.index("=== revocation block") :]
    assert "FAIL exit status is 0: it was 1" in out and "exit 1" in out, describe(p)
    # The run's events are readable: fields apart, no literal `\t` (point 5).
    assert "\\t" not in out and "  revoke  com.example.editor" in out, describe(p)
    fixed = out[out.index("exit 1") :]
    assert "PASS" in fixed and "FAIL" not in fixed, describe(p)


def test_every_command_block_of_readme_and_api_md_is_run_or_says_why_not():
    """Issue 31: a command block of the README is one the tests here run
    (the session, the revocation block) or is marked `<!-- not run:
    REASON -->`; docs/API.md's blocks are protocol traces and C (`text`,
    `c`), none a reader pastes into a shell. docs/CLIENTS.md's are all run
    by test_clients_walkthrough.py."""
    # The "Many machines" block needs a PostgreSQL server: `make test-fleet` runs it.
    run_here = {session_block(), revocation_block(), fleet_block()}
    readme = blocks(README.read_text(encoding="utf-8"))
    unrun = [b.text[:60] for b in readme if b.is_commands and b.text not in run_here]
    assert not unrun, f"README command blocks no test runs and none marked not run: {unrun}"
    assert len([b for b in readme if b.not_run]) == 3, [b.not_run for b in readme]
    api = blocks((README.parent / "docs" / "API.md").read_text(encoding="utf-8"))
    assert not [b.text[:60] for b in api if b.is_commands], "docs/API.md has a command block no test runs"
