#!/usr/bin/env python3
"""Writes the man page scopefs(1) (mdoc) from two sources, so that it says
what they say and nothing is kept twice:

- the commands, arguments and options from the built binary's argument
  parser (`scopefs --experimental-dump-help`, the data swift-argument-parser's
  own manual plugin reads);
- ENVIRONMENT, FILES, EXIT STATUS, EXAMPLES and SEE ALSO from the sections
  "Environment", "Files", "Exit codes", "Examples" and "See also" of
  docs/CLI.md.

    packaging/manpage.py BINARY CLI_MD DATE OUTPUT

The options the top command takes (`--state`, `--help`, `--version`) are
taken by every subcommand: they are described once, under OPTIONS COMMON TO
ALL SUBCOMMANDS, instead of under each of the 35 commands.

Only the Markdown docs/CLI.md uses in those sections is understood:
paragraphs, fenced code, bullet lists, two-column tables, `code` and
[links](target). Anything else stops the build with the line it could not
read, rather than turning into a garbled page.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

# The CLI.md section each man page section is made from, in page order
# after COMMANDS and the common options.
SECTIONS = [
    ("ENVIRONMENT", "Environment"),
    ("FILES", "Files"),
    ("EXIT STATUS", "Exit codes"),
    ("EXAMPLES", "Examples"),
    ("SEE ALSO", "See also"),
]


class Unreadable(Exception):
    pass


# ---------------------------------------------------------------------------
# roff text


def escape(text: str) -> str:
    """Plain text for a roff text line or macro argument: backslashes and
    minus signs escaped (a `-` would print as a hyphen, and a command copied
    from the page would not run), other than ASCII as roff's named code
    points (`\\[u00D7]`), which groff reads whatever the input encoding."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in text)


def inline(markdown: str, strict: bool = True) -> str:
    """One line of Markdown prose as roff: `code` in bold, [text](target)
    as its text, `\\|` (a pipe inside a table cell) as a pipe. A help
    text (not strict) with an odd number of backquotes keeps them."""
    markdown = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", markdown.replace("\\|", "|"))
    pieces = markdown.split("`")
    if len(pieces) % 2 == 0:
        if strict:
            raise Unreadable(f"unbalanced backquotes: {markdown}")
        pieces = [markdown]
    out = "".join(escape(piece) if i % 2 == 0 else f"\\fB{escape(piece)}\\fR" for i, piece in enumerate(pieces))
    return "\\&" + out if out.startswith((".", "'")) else out


def literal(line: str) -> str:
    """A line of a literal block: only escapes, no fonts."""
    out = escape(line)
    return "\\&" + out if out.startswith((".", "'")) else out


def prose(text: str) -> list:
    """A help text of the argument parser (abstract or discussion) as
    roff lines: its blank lines part paragraphs."""
    out: list = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        if out:
            out.append(".Pp")
        out += [inline(line.strip(), strict=False) for line in paragraph.splitlines() if line.strip()]
    return out


def item_head(markdown: str) -> str:
    """The argument of `.It` for a table's first cell: every word escaped
    with \\& so that none is taken for an mdoc macro (`No`, `Ar`, ...)."""
    return " ".join("\\&" + word for word in inline(markdown).split())


# ---------------------------------------------------------------------------
# docs/CLI.md sections


def cli_sections(text: str) -> dict:
    """`## Title` sections of CLI.md, each as its lines."""
    sections: dict = {}
    current = None
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            current = line[3:].strip()
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return sections


def table_cells(line: str) -> list:
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [cell.strip() for cell in cells[1:-1]]


def markdown_blocks(lines: list) -> list:
    """The section's Markdown as mdoc lines."""
    out: list = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("```"):
            out += [".Bd -literal -offset indent"]
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                out.append(literal(lines[i]))
                i += 1
            out.append(".Ed")
            i += 1
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(table_cells(lines[i]))
                i += 1
            if len(rows) < 3 or any(len(row) != 2 for row in rows) or not set(rows[1][0]) <= set("-: "):
                raise Unreadable(f"not a two-column table: {rows[0]}")
            out.append(".Bl -tag -width Ds")
            for head, body in rows[2:]:
                out += [f".It {item_head(head)}", inline(body)]
            out.append(".El")
        elif line.startswith("- "):
            out.append(".Bl -bullet")
            while i < len(lines) and (lines[i].startswith("- ") or lines[i].startswith("  ")):
                if lines[i].startswith("- "):
                    out.append(".It")
                out.append(inline(lines[i][2:].strip()))
                i += 1
            out.append(".El")
        elif line.startswith(("#", ">", "<")) or re.match(r"\d+\. ", line):
            raise Unreadable(f"no man page form for: {line}")
        else:
            paragraph = []
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("```", "|", "- ")):
                paragraph.append(inline(lines[i].strip()))
                i += 1
            out += [".Pp", *paragraph]
    return out


# ---------------------------------------------------------------------------
# commands, from the argument parser


def option_spelling(argument: dict) -> str:
    """`Fl -state Ar dir` (mdoc) for an option, `Fl -json` for a flag,
    `Ar app` for a positional argument."""
    name = argument.get("preferredName") or (argument.get("names") or [{}])[0]
    value = escape(argument.get("valueName") or "value")
    if argument["kind"] == "positional":
        return f"Ar {value}"
    flag = f"Fl {'-' if name.get('kind') == 'long' else ''}{escape(name['name'])}"
    return flag if argument["kind"] == "flag" else f"{flag} Ar {value}"


def all_spellings(argument: dict) -> str:
    """Every name of an option, for its entry: `Fl h , Fl -help`."""
    if argument["kind"] == "positional":
        return option_spelling(argument)
    value = "" if argument["kind"] == "flag" else f" Ar {escape(argument.get('valueName') or 'value')}"
    names = [
        f"Fl {'-' if name['kind'] == 'long' else ''}{escape(name['name'])}" for name in argument.get("names") or []
    ]
    return " , ".join(names) + value


def synopsis_word(argument: dict) -> str:
    words = option_spelling(argument)
    if argument.get("parsingStrategy") in ("postTerminator", "allRemainingInput"):
        words = f"Fl \\- {words}"
    if argument.get("isRepeating"):
        words += " No ..."
    return f"Op {words}" if argument.get("isOptional") else words


def describe(argument: dict) -> list:
    text = argument.get("abstract") or ""
    if argument.get("allValues"):
        text += f" One of: {', '.join(argument['allValues'])}."
    if argument.get("defaultValue") not in (None, ""):
        text += f" Default: {argument['defaultValue']}."
    lines = [f".It {all_spellings(argument)}", *(prose(text) or ["\\&"])]
    if argument.get("discussion"):
        lines += [".Pp", *prose(argument["discussion"])]
    return lines


def common_names(root: dict) -> set:
    """The options of the top command, which every subcommand takes too."""
    return {argument.get("valueName") for argument in root.get("arguments") or [] if argument["kind"] != "positional"}


def command_sections(command: dict, path: list, common: set) -> list:
    """A `.Ss` per command that runs something (a leaf), in the order of
    `scopefs --help`: its synopsis, what it does, and its own arguments."""
    if not command.get("shouldDisplay", True):
        return []
    path = path + [command["commandName"]]
    if command.get("subcommands"):
        out = []
        for sub in command["subcommands"]:
            out += command_sections(sub, path, common)
        return out
    own = [
        argument
        for argument in command.get("arguments") or []
        if argument.get("shouldDisplay", True)
        and not (argument["kind"] != "positional" and argument.get("valueName") in common)
    ]
    out = [f".Ss {escape(' '.join(path))}", ".Nm", f".Cm {escape(' '.join(path[1:]))}"]
    out += [f".{synopsis_word(argument)}" for argument in own]
    for text in (command.get("abstract"), command.get("discussion")):
        if text:
            out += [".Pp", *prose(text)]
    if own:
        out.append(".Bl -tag -width Ds")
        for argument in own:
            out += describe(argument)
        out.append(".El")
    return out


def manual(tool: dict, cli_md: str, date: str, version: str) -> str:
    root = tool["command"]
    common = common_names(root)
    sections = cli_sections(cli_md)
    out = [
        '.\\" Generated by packaging/manpage.py from the argument parser and docs/CLI.md; do not edit.',
        f".Dd {date}",
        ".Dt SCOPEFS 1",
        f".Os scopefs {escape(version)}",
        # Paths and options are not to be split at a line's end.
        ".nh",
        ".Sh NAME",
        ".Nm scopefs",
        f".Nd {escape(root.get('abstract', '').rstrip('.'))}",
        ".Sh SYNOPSIS",
        ".Nm",
        ".Op Fl -state Ar state",
        ".Ar command",
        ".Op Ar arguments",
        ".Nm",
        ".Fl -version | -help",
        ".Sh DESCRIPTION",
        ".Nm",
        "manages ScopeFS: a state directory with its providers (folders of the host), apps and grants,",
        "the FUSE mount that gives each app its own view of what it was granted,",
        "and the app processes that run in it.",
        "Every command below takes the options of",
        ".Sx OPTIONS COMMON TO ALL SUBCOMMANDS .",
        "The full reference, with the JSON output of each command, is docs/CLI.md",
        "(installed in the documentation folder, e.g. /usr/share/doc/scopefs/CLI.md).",
        ".Sh COMMANDS",
    ]
    for sub in root.get("subcommands") or []:
        out += command_sections(sub, [root["commandName"]], common)
    out += [".Sh OPTIONS COMMON TO ALL SUBCOMMANDS", ".Bl -tag -width Ds"]
    for argument in root.get("arguments") or []:
        out += describe(argument)
    out.append(".El")
    for title, source in SECTIONS:
        if source not in sections:
            raise Unreadable(f"docs/CLI.md has no section '## {source}' for {title}")
        out += [f".Sh {title}", *markdown_blocks(sections[source])]
    return "\n".join(out) + "\n"


def main(binary: str, cli_md: str, date: str, output: str) -> int:
    dump = subprocess.run([binary, "--experimental-dump-help"], capture_output=True, text=True, check=True)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout.split()[0]
    try:
        page = manual(json.loads(dump.stdout), Path(cli_md).read_text(), date, version)
    except Unreadable as problem:
        print(f"manpage.py: {cli_md}: {problem}", file=sys.stderr)
        return 65
    Path(output).write_text(page)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print("usage: packaging/manpage.py BINARY CLI_MD DATE OUTPUT", file=sys.stderr)
        sys.exit(64)
    sys.exit(main(*sys.argv[1:]))
