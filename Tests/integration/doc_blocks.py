"""The docs' code blocks, run as a new user pastes them (issue 19: "the
first hour works"; issue 31: "every command runs as printed"). Used by
test_readme.py and test_clients_walkthrough.py.

Conventions the docs follow (docs/CLIENTS.md says them to its readers):
- a ```sh block (or a bare ``` block in the README) is commands, run with
  bash in the order of the document;
- a block right after `<!-- file: PATH -->` is a file the reader saves:
  it is written to PATH (`~` is the new user's home) at that point;
- a block right after `<!-- not run: REASON -->` is deliberately not run;
  keep those few and say why.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from scopefs_harness import REPO_ROOT, mount_count, safe_rmtree, scopefs_bin

README = REPO_ROOT / "README.md"
CLIENTS = REPO_ROOT / "docs" / "CLIENTS.md"

_FENCE = re.compile(r"^(?:<!-- (file|not run): ([^>]*?) -->\n)?```([\w-]*)[^\n]*\n(.*?)^```", re.S | re.M)


@dataclass
class Block:
    language: str  # "" for a bare fence
    text: str
    file: str | None = None  # `<!-- file: PATH -->`
    not_run: str | None = None  # `<!-- not run: REASON -->`

    @property
    def is_commands(self) -> bool:
        return self.file is None and self.not_run is None and self.language in ("", "sh")


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, in order, with their markers."""
    return [
        Block(language, body, file=value if marker == "file" else None, not_run=value if marker == "not run" else None)
        for marker, value, language, body in _FENCE.findall(text)
    ]


def section(path: Path, heading: str) -> str:
    """The text of the section that starts at `heading` (a whole line),
    up to the next heading of the same or a higher level outside a code
    block (a `# comment` in a block is no heading)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = lines.index(heading + "\n")
    level = len(heading.split(" ", 1)[0])
    in_block = False
    for end in range(start + 1, len(lines)):
        line = lines[end]
        if line.startswith("```"):
            in_block = not in_block
        elif not in_block and re.match(r"#{1,%d} " % level, line):
            return "".join(lines[start:end])
    return "".join(lines[start:])


def as_script(items: list[Block]) -> str:
    """Commands and files of `items`, in order, as one bash script: a file
    block becomes a quoted here-document, so it is written exactly."""
    parts = []
    for block in items:
        if block.file:
            target = block.file.replace("~", "$HOME", 1) if block.file.startswith("~") else block.file
            assert "SCOPEFS_DOC_EOF" not in block.text
            parts.append(
                f'mkdir -p "$(dirname "{target}")" && cat > "{target}" <<\'SCOPEFS_DOC_EOF\'\n'
                f"{block.text}SCOPEFS_DOC_EOF\n"
            )
        elif block.is_commands:
            parts.append(block.text)
    return "".join(parts)


def session_block() -> str:
    """The README's session (after "## A session")."""
    text = README.read_text(encoding="utf-8")
    return re.search(r"```\n(.*?)```", text[text.index("## A session") :], re.S).group(1)


def revocation_block() -> str:
    """The README's revocation-testing block, run after its session."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("Does your app survive losing a document") :]
    return re.search(r"```\n(.*?)```", section, re.S).group(1)


def fleet_block() -> str:
    """The README's "Many machines" block (Tests/fleet/test_readme_fleet.py runs it)."""
    text = README.read_text(encoding="utf-8")
    return re.search(r"```\n(.*?)```", text[text.index("## Many machines") :], re.S).group(1)


def traversable_root() -> Path:
    """A temporary folder the app account can walk into (0755): a root
    owner's apps run as `scopefs-app`, and an `--expose`d folder of the
    new user's home must be readable by it (docs/CLI.md)."""
    root = Path(tempfile.mkdtemp(prefix="scopefs-doc-", dir="/tmp"))
    os.chmod(root, 0o755)
    return root


def remove_root(root: Path) -> None:
    assert safe_rmtree(root), f"a mount is left under {root}"


def run_as_a_new_user(
    tmp_path: Path,
    script: str,
    cwd: Path | None = None,
    timeout: float = 180,
    extra_env: dict | None = None,
    home_ready: bool = False,
    builds_in_checkout: bool = False,
):
    """Runs `script` with bash in a fresh home folder, with `scopefs` on
    PATH, as a new user pastes a README block; the mount goes after.
    `home_ready`: the caller made the home folder (with files the block expects).
    `builds_in_checkout`: the block builds into the checkout as printed
    (`cc -o clients/c/build/example`), so it runs alone: the SQLite and
    PostgreSQL suites run side by side, and one ran the example while the
    other was writing it ("not an executable file", exit 126)."""
    if builds_in_checkout:
        with checkout_builds_lock():
            return run_as_a_new_user(tmp_path, script, cwd, timeout, extra_env, home_ready)
    home = tmp_path / "home"
    home.mkdir(exist_ok=home_ready)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scopefs").symlink_to(scopefs_bin())
    path = tmp_path / "session.sh"
    path.write_text("set -e\n" + script)
    env = {k: v for k, v in os.environ.items() if k not in ("SCOPEFS_STATE", "XDG_STATE_HOME")}
    env.update(HOME=str(home), PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", **(extra_env or {}))
    try:
        p = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    finally:
        if mount_count(home / "scopefs"):
            subprocess.run(["fusermount3", "-u", str(home / "scopefs")], capture_output=True)
    assert not mount_count(home / "scopefs"), "the block left its mount behind"
    return p


@contextlib.contextmanager
def checkout_builds_lock():
    """Held while a block builds into the checkout, across processes."""
    lock = REPO_ROOT / ".build" / "docs-builds-in-checkout.lock"
    lock.parent.mkdir(exist_ok=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


EXAMPLES = REPO_ROOT / "docs" / "examples"
# `$ COMMAND` in a comment or docstring of an example, a trailing `\`
# continuing it on the next line (which has no `$`).
_HEADER_COMMAND = re.compile(r"^\s*(?:#|//|\*)?\s*\$ (.*)$")
_COMMENT_LEADER = re.compile(r"^\s*(?:#|//|\*)?\s?")


def header_commands(path: Path) -> str:
    """The `$ ` commands of an example file's comments, as a script."""
    commands = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        found = _HEADER_COMMAND.match(lines[index])
        index += 1
        if not found:
            continue
        command = [found.group(1)]
        while command[-1].rstrip().endswith("\\") and index < len(lines):
            command.append(_COMMENT_LEADER.sub("", lines[index], count=1))
            index += 1
        commands.append("\n".join(command) + "\n")
    return "".join(commands)


def example_files() -> list[Path]:
    """Every file of docs/examples, sorted."""
    return sorted(p for p in EXAMPLES.rglob("*") if p.is_file())
