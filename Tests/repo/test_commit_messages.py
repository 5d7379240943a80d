"""tools/commit_messages.py (issue 30): the CI check of the commits after
its base, in a full and a shallow clone, and the commit-msg hook that
`make hooks` installs. Each test builds a throwaway repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "tools" / "commit_messages.py"
HOOKS = REPO / ".githooks"
LONG = "Subject of a commit that goes on well past the seventy-two characters git shows"
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, capture_output=True, text=True, check=check)


def commit(repo: Path, message: str) -> str:
    """An empty commit with this message, kept verbatim; returns its id."""
    git(repo, "commit", "--allow-empty", "--cleanup=verbatim", "-m", message)
    return git(repo, "rev-parse", "HEAD").stdout.strip()


def check(repo: Path, base: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, CHECK, "--base", base], cwd=repo, env=ENV, capture_output=True, text=True)


@pytest.fixture
def repo(tmp_path) -> Path:
    """A history whose old commits break the rule, up to the base."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    commit(path, LONG)
    commit(path, "Old subject\nwith no blank line after it")
    return path


def test_commits_after_the_base_pass_when_they_keep_the_rule(repo):
    base = git(repo, "rev-parse", "HEAD").stdout.strip()
    commit(repo, "A subject of exactly seventy-two characters, counted by a test of it, ok")
    commit(repo, "Subject\n\nA body that says why, with lines as long as it likes to have them be, really.")
    p = check(repo, base)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "checked 2 commit(s) after" in p.stdout, p.stdout


def test_a_long_subject_after_the_base_fails_naming_the_commit(repo):
    base = git(repo, "rev-parse", "HEAD").stdout.strip()
    bad = commit(repo, LONG + "\n\nBody.")
    commit(repo, "Short")
    p = check(repo, base)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"commit {bad[:12]}: the subject is {len(LONG)} characters, more than 72" in p.stderr, p.stderr
    assert "1 of 2 commits" in p.stderr and "git rebase -i" in p.stderr, p.stderr


def test_a_body_without_a_blank_line_after_the_subject_fails(repo):
    base = git(repo, "rev-parse", "HEAD").stdout.strip()
    bad = commit(repo, "Subject\nbody at once")
    p = check(repo, base)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"commit {bad[:12]}: the second line is not blank" in p.stderr, p.stderr


def test_a_shallow_clone_says_so_and_checks_its_newest_commit(repo, tmp_path):
    base = git(repo, "rev-parse", "HEAD").stdout.strip()
    commit(repo, "Short one")
    commit(repo, LONG)
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    p = check(shallow, base)
    assert "shallow clone" in p.stdout and "only the newest commit" in p.stdout, p.stdout
    assert p.returncode == 1 and "the subject is" in p.stderr, p.stdout + p.stderr

    commit(repo, "Short two")
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(fresh))
    p = check(fresh, base)
    assert p.returncode == 0 and "shallow clone" in p.stdout, p.stdout + p.stderr


def test_a_full_clone_checks_every_commit_since_the_base(repo, tmp_path):
    base = git(repo, "rev-parse", "HEAD").stdout.strip()
    commit(repo, LONG)
    commit(repo, "Short one")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", f"file://{repo}", str(clone))
    p = check(clone, base)
    assert p.returncode == 1 and "1 of 2 commits" in p.stderr, p.stdout + p.stderr


def test_a_base_missing_from_a_full_history_is_an_error(repo):
    p = check(repo, "0" * 40)
    assert p.returncode == 1 and "is not in this history" in p.stderr, p.stdout + p.stderr


def test_the_hook_refuses_a_long_subject_and_keeps_a_good_one(repo):
    git(repo, "config", "core.hooksPath", str(HOOKS))
    refused = git(repo, "commit", "--allow-empty", "-m", LONG, check=False)
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert f"the subject is {len(LONG)} characters, more than 72" in refused.stderr, refused.stderr
    kept = git(repo, "commit", "--allow-empty", "-m", "A fine subject", "-m", "And a body.", check=False)
    assert kept.returncode == 0, kept.stdout + kept.stderr


def test_the_hook_ignores_comments_and_the_verbose_diff(tmp_path):
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text(
        "\nGood subject\n\nBody.\n# Please enter the commit message\n"
        "# ------------------------ >8 ------------------------\n" + "x" * 100 + "\n"
    )
    p = subprocess.run([sys.executable, CHECK, "--message-file", message], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
