#!/usr/bin/env python3
"""Commit messages as CONTRIBUTING.md asks: a subject of at most 72
characters and, when there is a body, a blank line between the two
(git shows the subject alone in `log --oneline`, `shortlog` and mail).

Two uses:

    tools/commit_messages.py                   # CI (`make lint`): every commit after BASE
    tools/commit_messages.py --message-file F  # the commit-msg hook (`make hooks`)

Commits up to BASE keep their long subjects: the check holds from there on
(issue 30). A shallow clone that does not reach BASE is said to be one,
and only its newest commit is checked; a copy without git history is not
checked at all, and says so.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

# main's HEAD when the check came in; the commits before it are not checked.
BASE = "5262eb36276918782bb566d5aeeb6644999712ff"
MAX_SUBJECT = 72
SCISSORS = "# ------------------------ >8 ------------------------"


def problems(message: str) -> list[str]:
    """What is wrong with one commit message (empty: nothing)."""
    lines = message.rstrip("\n").split("\n")
    subject = lines[0]
    found = []
    if not subject.strip():
        found.append("the subject (first line) is empty")
    if len(subject) > MAX_SUBJECT:
        found.append(f"the subject is {len(subject)} characters, more than {MAX_SUBJECT}: {subject!r}")
    if len(lines) > 1 and lines[1].strip():
        found.append(f"the second line is not blank (a blank line separates subject and body): {lines[1]!r}")
    return found


def as_committed(text: str) -> str:
    """The message git will store, from the file the commit-msg hook gets:
    without `#` comment lines, the diff below the scissors of
    `commit --verbose`, and leading blank lines."""
    kept = []
    for line in text.split("\n"):
        if line == SCISSORS:
            break
        if not line.startswith("#"):
            kept.append(line.rstrip())
    return "\n".join(kept).lstrip("\n")


def git(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def commits_to_check(base: str, cwd: Path) -> tuple[list[tuple[str, str]], str | None]:
    """(commit, message) of the commits after base, and a note when fewer
    can be checked than that (shallow clone, no git history)."""
    if git("rev-parse", "--git-dir", cwd=cwd).returncode != 0:
        return [], "not a git checkout: commit messages not checked"
    revs = f"{base}..HEAD"
    if git("cat-file", "-e", f"{base}^{{commit}}", cwd=cwd).returncode != 0:
        if git("rev-parse", "--is-shallow-repository", cwd=cwd).stdout.strip() != "true":
            raise SystemExit(
                f"commit messages: the base commit {base} is not in this history; "
                f"set BASE in {Path(__file__).name} to a commit it has"
            )
        revs = "HEAD^!"
        note = (
            f"shallow clone: the base commit {base[:12]} is not in it, so only the newest commit is "
            "checked; `git fetch --unshallow` to check every commit since the base"
        )
    else:
        note = None
    log = git("log", "--format=%H%x1f%B%x1e", revs, cwd=cwd)
    if log.returncode != 0:
        raise SystemExit(f"commit messages: git log {revs} failed: {log.stderr.strip()}")
    commits = []
    for record in log.stdout.split("\x1e"):
        if "\x1f" in record:
            commit, message = record.strip("\n").split("\x1f", 1)
            commits.append((commit, message))
    return commits, note


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--message-file", type=Path, help="check one message (the commit-msg hook's argument)")
    parser.add_argument("--base", default=BASE, help="check the commits after this one (default: %(default)s)")
    args = parser.parse_args()

    if args.message_file:
        found = problems(as_committed(args.message_file.read_text(errors="replace")))
        for problem in found:
            print(f"commit message: {problem}", file=sys.stderr)
        if found:
            print(f"(your message is kept in {args.message_file}; see CONTRIBUTING.md, Commits)", file=sys.stderr)
        return 1 if found else 0

    commits, note = commits_to_check(args.base, Path.cwd())
    if note:
        print(f"commit messages: {note}")
    bad = [(commit, found) for commit, message in commits if (found := problems(message))]
    for commit, found in bad:
        for problem in found:
            print(f"commit {commit[:12]}: {problem}", file=sys.stderr)
    if bad:
        print(
            f"commit messages: {len(bad)} of {len(commits)} commits after {args.base[:12]} break the rules "
            f"(subject at most {MAX_SUBJECT} characters, then a blank line); reword them with "
            "`git rebase -i` before they are merged",
            file=sys.stderr,
        )
        return 1
    print(f"commit messages: checked {len(commits)} commit(s) after {args.base[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
