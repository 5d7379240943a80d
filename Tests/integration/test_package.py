"""What a user gets beyond the binary (README, "Install"): `--version`, shell
completions that know the state directory's ids, and the Debian package
(`make deb`): installed with dpkg, its binary runs without the Swift
toolchain, `man scopefs` works, mount(8) finds the helper, the units and
the C library's pkg-config file are in place, and it removes cleanly.

The package test builds the package from the debug binary (`make deb
CONFIG=debug`, a few minutes less than a release build in CI) unless
SCOPEFS_DEB names a .deb; it installs on this machine (root, dpkg) and
purges it again."""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest
from scopefs_harness import ALPHA, BETA, DRIVE, LOCAL, REPO_ROOT, describe, mount_count, run_bounded
from test_readme import run_as_a_new_user

VERSION = re.search(
    r'static let package = "([^"]+)"', (REPO_ROOT / "Sources/ScopeFSCLI/Version.swift").read_text()
).group(1)


def test_version_names_the_package_version(env):
    """`scopefs --version` prints the version of Sources/ScopeFSCLI/Version.swift,
    with `git describe` in parentheses when the Makefile built it; exit 0."""
    p = run_bounded([env.bin, "--version"], 30, env.base_env)
    assert p.returncode == 0, describe(p)
    assert re.fullmatch(re.escape(VERSION) + r"( \([0-9A-Za-z._+~-]+\))?\n", p.stdout), describe(p)


def _completion_script(env) -> tuple[Path, str]:
    """The script `scopefs --generate-completion-script bash` prints, in a
    file, and the function its `complete` line names."""
    script = env.root / "scopefs.bash"
    generated = run_bounded([env.bin, "--generate-completion-script", "bash"], 30, env.base_env)
    assert generated.returncode == 0, describe(generated)
    script.write_text(generated.stdout)
    return script, re.search(r"complete .*-F (\S+) scopefs", generated.stdout).group(1)


def _split_as_bash(words: list[str]) -> tuple[list[str], str, str]:
    """The words as bash hands them to a completion function: each `:` a
    word of its own (COMP_WORDBREAKS), `local:` ending at its colon with
    an empty current word; returns COMP_WORDS, the current word and the
    previous one (what bash passes as $2 and $3)."""
    split = [piece for word in words[:-1] for piece in re.split("(:)", word) if piece] + [
        piece for piece in re.split("(:)", words[-1]) if piece
    ]
    if not words[-1] or not split:
        split.append("")
    current = "" if words[-1].endswith(":") or not words[-1] else split[-1]
    previous = split[-2] if words[-1].endswith(":") else split[-2] if len(split) > 1 else ""
    return split, current, previous


def _bash_complete(env, words: list[str]) -> list[str]:
    """Completions bash offers for the last (partial) word of `words`, from
    the script `scopefs --generate-completion-script bash` prints, called
    as bash calls it: the words split at colons."""
    script, function = _completion_script(env)
    comp_words, current, previous = _split_as_bash(words)
    line = " ".join(shlex.quote(w) for w in words)
    program = f"""
        source {shlex.quote(str(script))}
        COMP_WORDS=({" ".join(shlex.quote(w) for w in comp_words)})
        COMP_CWORD={len(comp_words) - 1}
        COMP_LINE={shlex.quote(line)}
        COMP_POINT=${{#COMP_LINE}}
        {function} scopefs {shlex.quote(current)} {shlex.quote(previous)} 2>/dev/null
        printf '%s\\n' "${{COMPREPLY[@]}}"
    """
    bindir = str(Path(env.bin).parent)
    p = run_bounded(["bash", "-c", program], 30, dict(env.base_env, PATH=bindir + ":" + env.base_env["PATH"]))
    assert p.returncode == 0, describe(p)
    return sorted(w for w in p.stdout.split("\n") if w)


def _readline_complete(env, line: str) -> str:
    """The command line after one TAB at its end, in an interactive bash
    (readline, the completion script sourced, COMP_WORDBREAKS as shipped),
    run in env.root."""
    script, _ = _completion_script(env)
    bindir = str(Path(env.bin).parent)
    shell_env = dict(env.base_env, PS1="$ ", TERM="dumb", PATH=bindir + ":" + env.base_env["PATH"])
    shell = pexpect.spawn(
        "bash", ["--norc", "--noprofile", "-i"], encoding="utf-8", timeout=30, env=shell_env, cwd=str(env.root)
    )
    try:
        shell.expect_exact("$ ")
        # Ctrl-X prints the line being edited, between markers.
        shell.sendline(f'source {shlex.quote(str(script))}; bind -x \'"\\C-x": printf "<<%s>>\\n" "$READLINE_LINE"\'')
        shell.expect_exact("$ ")
        shell.send(line + "\t")
        shell.send("\x18")
        shell.expect(r"<<(.*)>>")
        return shell.match.group(1)
    finally:
        shell.close(force=True)


def test_completions_offer_the_state_directory_ids(env):
    """Shell completion (bash, through the generated script) completes app
    ids, provider ids, PROVIDER: prefixes and an app's grant ids from the
    state directory that --state names; zsh and fish scripts are generated too."""
    first = env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    second = env.grant(ALPHA, f"{DRIVE}:archive")
    env.grant(BETA, f"{LOCAL}:photos")
    state = str(env.state)
    assert _bash_complete(env, ["scopefs", "--state", state, "privacy", ""]) == sorted([ALPHA, BETA])
    assert _bash_complete(env, ["scopefs", "--state", state, "run", "--app", "com.example.a"]) == [ALPHA]
    assert _bash_complete(env, ["scopefs", "--state", state, "provider", "remove", ""]) == sorted([LOCAL, DRIVE])
    assert _bash_complete(env, ["scopefs", "--state", state, "grant", ALPHA, "lo"]) == [f"{LOCAL}:"]
    # Issue 50.4: the ids with their items, so the list says which is which.
    assert _bash_complete(env, ["scopefs", "--state", state, "revoke", ALPHA, ""]) == sorted(
        [first, second, f"{LOCAL}:docs/report.txt", f"{DRIVE}:archive"]
    )
    assert _bash_complete(env, ["scopefs", "--state", state, "revoke", ALPHA, first[:1]]) == sorted(
        g for g in (first, second) if g.startswith(first[:1])
    )
    # A state directory that does not exist: nothing offered, nothing created.
    missing = env.root / "no-such-state"
    assert _bash_complete(env, ["scopefs", "--state", str(missing), "privacy", ""]) == []
    assert not missing.exists()
    # Issue 31, point 6: file arguments complete as files and folders, and
    # `test --app` as app ids. Seen failing on the old main: nothing offered.
    scenario = env.root / "revoke-scenario.yaml"
    scenario.write_text("steps: []\n")
    prefix = str(env.root / "revoke-sc")
    assert _bash_complete(env, ["scopefs", "--state", state, "test", prefix]) == [str(scenario)]
    assert _bash_complete(env, ["scopefs", "--state", state, "test", str(scenario), "--junit", prefix]) == [
        str(scenario)
    ]
    assert _bash_complete(env, ["scopefs", "--state", state, "test", str(scenario), "--app", "com.example.b"]) == [BETA]
    assert str(env.mnt) in _bash_complete(env, ["scopefs", "--state", state, "mount", str(env.root / "mn")])
    assert str(env.state) in _bash_complete(env, ["scopefs", "--state", str(env.root / "sta")])
    for shell in ("zsh", "fish"):
        p = run_bounded([env.bin, "--generate-completion-script", shell], 30, env.base_env)
        assert p.returncode == 0 and "scopefs" in p.stdout, describe(p)


def test_completion_of_item_paths_and_fault_values(env):
    """Issue 31, point 6: after `PROVIDER:` bash completes the names in the
    provider's folder, one folder at a time (a folder with its slash and
    no space after it, so the path goes on), whether bash split the word at
    its colon or not; a path out of the provider offers nothing; names that
    are shell syntax are quoted, and completing them runs nothing. `fault
    add --op`/`--errno` and `chaos --fault OP:ERRNO` complete the lists the
    commands themselves check against (read here from their error
    messages, not written down a second time). Seen failing on the old
    main: nothing was offered after the colon nor for --op/--errno."""
    backing = env.backing(LOCAL)
    (backing / "Novel").mkdir()
    (backing / "Novel" / "chapter one.txt").write_text("It was a dark and stormy night.\n")
    (backing / "y$(touch PWNED)").write_text("")
    (backing / "x`touch PWNED`").write_text("")
    (backing / ".hidden").write_text("")
    base = ["scopefs", "--state", str(env.state)]
    assert _bash_complete(env, base + ["grant", ALPHA, "local:No"]) == ["Novel/"]
    assert _bash_complete(env, base + ["grant", ALPHA, "local:d"]) == ["deep/", "docs/"]
    # What bash replaces: the word after its last colon.
    assert _bash_complete(env, base + ["open", ALPHA, "local:deep/a/b/t"]) == ["deep/a/b/target.txt"]
    assert _bash_complete(env, base + ["grant", ALPHA, "local:Novel/"]) == ["Novel/chapter\\ one.txt"]
    assert _bash_complete(env, base + ["grant", ALPHA, "local:.h"]) == [".hidden"]
    assert _bash_complete(env, base + ["grant", ALPHA, "local:../"]) == []
    assert _bash_complete(env, base + ["grant", ALPHA, "nosuch:"]) == []
    assert _bash_complete(env, base + ["pick", "--app", ALPHA, "--start", "drive:ar"]) == ["archive/"]

    bad_op = run_bounded(
        [env.bin, "--state", env.state, "fault", "add", "--op", "nosuch", "--errno", "EIO"], 30, env.base_env
    )
    assert bad_op.returncode == 64 and "operations: " in bad_op.stderr, describe(bad_op)
    operations = bad_op.stderr.split("operations: ")[1].strip().split(", ")
    bad_errno = run_bounded(
        [env.bin, "--state", env.state, "fault", "add", "--op", "read", "--errno", "ENOPE"], 30, env.base_env
    )
    assert bad_errno.returncode == 64 and "known: " in bad_errno.stderr, describe(bad_errno)
    errnos = bad_errno.stderr.split("known: ")[1].strip().split(", ")
    assert "read" in operations and "EIO" in errnos
    assert _bash_complete(env, base + ["fault", "add", "--op", ""]) == sorted(operations)
    assert _bash_complete(env, base + ["fault", "add", "--op", "read", "--errno", ""]) == sorted(errnos)
    assert _bash_complete(env, base + ["fault", "add", "--op", "read", "--errno", "ENOS"]) == ["ENOSPC"]
    assert _bash_complete(env, base + ["chaos", "--app", ALPHA, "--fault", "read:"]) == sorted(errnos)
    assert _bash_complete(env, base + ["chaos", "--app", ALPHA, "--fault", "read:EI"]) == sorted(
        e for e in errnos if e.startswith("EI")
    )
    assert _bash_complete(env, base + ["chaos", "--app", ALPHA, "--latency", "ope"]) == sorted(
        f"{o}:" for o in operations if o.startswith("ope")
    )

    # What a person sees: readline with the script, one TAB.
    typed = f"scopefs --state {env.state} grant {ALPHA} "
    assert _readline_complete(env, typed + "loc") == typed + "local:"
    assert _readline_complete(env, typed + "local:No") == typed + "local:Novel/"
    assert _readline_complete(env, typed + "local:Novel/c") == typed + "local:Novel/chapter\\ one.txt "
    assert _readline_complete(env, typed + "local:y") == typed + "local:y\\$\\(touch\\ PWNED\\) "
    assert _readline_complete(env, typed + "local:x") == typed + "local:x\\`touch\\ PWNED\\` "
    assert not (env.root / "PWNED").exists()


# ---------------------------------------------------------------------------
# make install

INSTALL_SECONDS = 30  # once the build is done: no second build (it took minutes), no no-op build (issue 50)


@pytest.fixture(scope="module")
def make_install(tmp_path_factory):
    """`make install CONFIG=debug DESTDIR=...` into a staging root, timed
    after a `make generated` that brings the build up to date, as a user's
    `make && make install` would; returns (root, seconds)."""
    root = tmp_path_factory.mktemp("make-install") / "root"
    logs = tmp_path_factory.mktemp("make-install-logs")
    built = run_bounded(
        ["make", "-C", REPO_ROOT, "generated", "CONFIG=debug"], 1200, dict(os.environ), out_dir=logs, what="make"
    )
    assert built.returncode == 0, describe(built)
    started = time.monotonic()
    installed = run_bounded(
        ["make", "-C", REPO_ROOT, "install", "CONFIG=debug", f"DESTDIR={root}"],
        600,
        dict(os.environ),
        out_dir=logs,
        what="make install",
    )
    seconds = time.monotonic() - started
    assert installed.returncode == 0, describe(installed)
    return root, seconds


def _system_python_site(prefix: str = "/usr/local") -> str:
    minor = subprocess.run(
        ["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
    ).stdout.strip()
    return f"{prefix}/lib/python{minor}/dist-packages"


def test_make_install_installs_the_clients_examples_and_a_stripped_binary(make_install, env, tmp_path):
    """Issue 31, point 6: `make install` installs, besides the binary, the
    C library with its header and pkg-config file (a program builds and
    links against them), the Python client and its pytest plugin where the
    system's python3 reads them, with the metadata that makes pytest load
    the plugin without `-p` (an installed plugin runs a test of a mount),
    and the documentation's examples; the binary is stripped; and once the
    build is done it takes seconds, not the minutes a second build took.
    Seen failing on the old main: no library, client or examples."""
    root, seconds = make_install
    assert seconds < INSTALL_SECONDS, f"make install took {seconds:.0f} s after a finished build"
    prefix = root / "usr" / "local"

    binary = prefix / "bin" / "scopefs"
    sections = run_bounded(["readelf", "-S", "-W", binary], 30, dict(os.environ)).stdout
    assert ".symtab" not in sections and ".debug_info" not in sections, "the installed binary is not stripped"
    assert (root / "sbin" / "mount.scopefs").is_file()

    lib = prefix / "lib"
    for name in (f"libscopefs.so.{VERSION}", "libscopefs.so.0", "libscopefs.so", "pkgconfig/scopefs.pc"):
        assert (lib / name).exists(), name
    assert (prefix / "include" / "scopefs.h").is_file()
    pc_env = dict(os.environ, PKG_CONFIG_PATH=str(lib / "pkgconfig"), PKG_CONFIG_SYSROOT_DIR=str(root))
    assert run_bounded(["pkg-config", "--modversion", "scopefs"], 30, pc_env).stdout.strip() == VERSION
    flags = run_bounded(["pkg-config", "--cflags", "--libs", "scopefs"], 30, pc_env).stdout.split()
    source = tmp_path / "use.c"
    source.write_text('#include <scopefs.h>\nint main(void) { return scopefs_scope_count("/") == -2 ? 0 : 1; }\n')
    cc = run_bounded([os.environ.get("CC", "cc"), "-o", tmp_path / "use", source, *flags], 60, dict(os.environ))
    assert cc.returncode == 0, describe(cc)

    site = root / _system_python_site().lstrip("/")
    assert (site / "scopefs.py").is_file() and (site / "scopefs_testing.py").is_file()
    # The built-in extensions where the daemon looks (docs/PROVIDERS.md), each
    # finding the SDK beside it: the folder example starts and asks for its root.
    share = prefix / "share" / "scopefs"
    for name in (
        "extensions/s3/scopefs_s3.py",
        "extensions/rclone/scopefs_rclone.py",
        "clients/python/scopefs_extension.py",
    ):
        assert (share / name).is_file(), name
    assert (site / "scopefs_extension.py").is_file()
    folder = run_bounded(["/usr/bin/python3", share / "docs/examples/extensions/folder.py"], 30, dict(os.environ))
    assert folder.returncode == 2 and "usage: folder.py ROOT" in folder.stderr, describe(folder)
    entry_points = (site / f"scopefs-{VERSION}.dist-info" / "entry_points.txt").read_text()
    assert "[pytest11]\nscopefs_testing = scopefs_testing\n" in entry_points, entry_points
    found = run_bounded(
        [
            "/usr/bin/python3",
            "-c",
            "import importlib.metadata as m, scopefs; print([e.value for e in m.entry_points(group='pytest11')])",
        ],
        30,
        dict(os.environ, PYTHONPATH=str(site)),
    )
    assert "'scopefs_testing'" in found.stdout, describe(found)
    test = tmp_path / "test_installed_plugin.py"
    test.write_text(
        "import pytest\n\n\n@pytest.mark.scopefs(app='com.example.installed')\n"
        "def test_a_mount(scopefs_mount):\n    assert scopefs_mount.mounted\n"
    )
    plugin = run_bounded(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", tmp_path, test],
        180,
        dict(env.base_env, PYTHONPATH=str(site), SCOPEFS_BIN=str(env.bin), TMPDIR=str(tmp_path)),
    )
    assert plugin.returncode == 0 and "1 passed" in plugin.stdout, describe(plugin)

    examples = prefix / "share" / "doc" / "scopefs" / "examples"
    tracked = run_bounded(["git", "-C", REPO_ROOT, "ls-files", "docs/examples"], 30, dict(os.environ)).stdout.split()
    missing = [f for f in tracked if not (examples / Path(f).relative_to("docs/examples")).is_file()]
    assert tracked and not missing, missing


def test_installed_docs_have_their_images_clients_and_folder(make_install):
    """Issue 50.4: the installed README's links and images resolve beside
    it, PERFORMANCE.md's charts are there, the Swift examples name the
    installed Swift client (not ../../../clients/swift, which is not
    installed), and the man pages name the documentation folder of this
    install (/usr/local/share/doc, not /usr/share/doc)."""
    root, _ = make_install
    prefix = root / "usr" / "local"
    doc = prefix / "share" / "doc" / "scopefs"
    readme = (doc / "README.md").read_text()
    assert "](docs/" not in readme, "the installed README links to docs/, which is not installed"
    for name in ("README.md", "PERFORMANCE.md"):
        images = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", (doc / name).read_text())
        assert images and all((doc / image).is_file() for image in images), (name, images)
    packages = sorted((doc / "examples").glob("*/Package.swift"))
    assert packages
    for package in packages:
        paths = re.findall(r'\.package\(path: "([^"]+)"\)', package.read_text())
        assert paths == ["/usr/local/share/scopefs/clients/swift"], (package, paths)
        assert (root / paths[0].lstrip("/") / "Package.swift").is_file(), paths
    for page in ("man1/scopefs.1.gz", "man8/mount.scopefs.8.gz"):
        text = gzip.decompress((prefix / "share" / "man" / page).read_bytes()).decode()
        assert "/usr/share/doc" not in text and "/usr/local/share/doc/scopefs" in text, page


def _exit_codes_of_cli_md() -> list[str]:
    """The first column of docs/CLI.md's "Exit codes" table."""
    text = (REPO_ROOT / "docs" / "CLI.md").read_text().split("\n## Exit codes\n")[1].split("\n## ")[0]
    return [line.split("|")[1].strip() for line in text.splitlines() if re.match(r"\|\s*(\d|other)", line)]


def test_man_page_has_its_sections_and_options_once(make_install):
    """Issue 31, point 6: the installed scopefs(1) renders with `man -l`
    without warnings and has EXIT STATUS (every code of docs/CLI.md's
    table, which lists every code of CommandError), ENVIRONMENT, FILES,
    EXAMPLES and SEE ALSO; the options every command takes are described
    once, so `--state` appears a few times, not once per command, and
    every command is there. Seen failing on the old main: none of those
    sections, and `--state` 36 times."""
    root, _ = make_install
    page = root / "usr" / "local" / "share" / "man" / "man1" / "scopefs.1.gz"
    rendered = run_bounded(["man", "-l", "-P", "cat", page], 60, dict(os.environ, MANWIDTH="100", MAN_KEEP_STDERR="1"))
    assert rendered.returncode == 0 and not rendered.stderr.strip(), describe(rendered)
    text = rendered.stdout
    headings = [line for line in text.splitlines() if re.fullmatch(r"[A-Z][A-Z ]+", line)]
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "OPTIONS COMMON TO ALL SUBCOMMANDS"):
        assert section in headings, headings
    for section in ("ENVIRONMENT", "FILES", "EXIT STATUS", "EXAMPLES", "SEE ALSO"):
        assert section in headings, headings
    assert text.count("--state") <= 5, text.count("--state")

    status = text.split("\nEXIT STATUS\n")[1].split("\nEXAMPLES\n")[0]
    codes = _exit_codes_of_cli_md()
    for code in codes:
        assert re.search(rf"^\s+{re.escape(code)}\b", status, re.M), code
    kinds = re.findall(r"case \w+ = (\d+)", (REPO_ROOT / "Sources/CommandErrors/CommandError.swift").read_text())
    listed = {part for code in codes for part in code.split("/")}
    assert kinds and set(kinds) <= listed, sorted(set(kinds) - listed)
    for variable in ("SCOPEFS_STATE", "XDG_STATE_HOME", "SCOPEFS_LOG_LEVEL"):
        assert variable in text.split("\nENVIRONMENT\n")[1].split("\nFILES\n")[0], variable
    for command in ("init", "provider add", "grant", "run", "fault add", "chaos", "test", "bookmark resolve"):
        assert f"scopefs {command}" in text, command
    assert "mount.scopefs(8)" in text.split("\nSEE ALSO\n")[1]
    # The examples are commands as typed: ASCII minus signs, not hyphens.
    assert "scopefs fault add --app com.example.editor --op read --errno EIO" in text


def test_the_man_page_example_session_runs_verbatim(tmp_path):
    """The first block of docs/CLI.md's "Examples" (the man page's
    EXAMPLES) runs as printed in a fresh home folder, in the default
    sandbox and strict scopes: the app lists the granted folder in a scope,
    and the events show the revoke."""
    text = (REPO_ROOT / "docs" / "CLI.md").read_text().split("\n## Examples\n")[1]
    block = re.search(r"```\n(.*?)```", text, re.S).group(1)
    p = run_as_a_new_user(tmp_path, block)
    assert p.returncode == 0, describe(p)
    assert "total 0" in p.stdout, p.stdout
    kinds = [line.split("\t")[1] for line in p.stdout.splitlines() if line.count("\t") > 3]
    # The revoke is written at once; the app's start with the daemon's next
    # batch (every 100 ms), so it may come after the listing.
    assert "revoke" in kinds and set(kinds) <= {"start", "revoke"}, p.stdout


# ---------------------------------------------------------------------------
# the Debian package


@pytest.fixture
def installed(deb):
    """The package installed with dpkg on this machine, purged afterwards."""
    if os.geteuid() != 0 or shutil.which("dpkg") is None:
        pytest.skip("installing the package needs root and dpkg")
    if subprocess.run(["dpkg", "-s", "scopefs"], capture_output=True).returncode == 0:
        pytest.skip("a scopefs package is already installed here; the test does not replace it")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    p = run_bounded(["dpkg", "-i", deb], 300, env, what="dpkg -i")
    try:
        assert p.returncode == 0, describe(p)
        yield deb
    finally:
        purge = run_bounded(["dpkg", "--purge", "scopefs"], 300, env, what="dpkg --purge")
        assert purge.returncode == 0, describe(purge)
        assert not os.path.exists("/usr/bin/scopefs") and not os.path.exists("/sbin/mount.scopefs")


def test_deb_contents(deb):
    """The package holds what README's "Install" lists, at Debian's paths."""
    p = run_bounded(["dpkg-deb", "--contents", deb], 60, dict(os.environ))
    assert p.returncode == 0, describe(p)
    paths = {line.split()[5].lstrip(".") for line in p.stdout.splitlines()}
    expected = {
        "/usr/bin/scopefs",
        "/sbin/mount.scopefs",
        "/sbin/mount.fuse.scopefs",
        "/usr/share/man/man1/scopefs.1.gz",
        "/usr/share/man/man8/mount.scopefs.8.gz",
        "/usr/share/bash-completion/completions/scopefs",
        "/usr/share/zsh/vendor-completions/_scopefs",
        "/usr/share/fish/vendor_completions.d/scopefs.fish",
        "/lib/systemd/system/scopefs@.service",
        "/usr/lib/systemd/user/scopefs.service",
        "/usr/lib/systemd/user/scopefs-portal.service",
        "/usr/share/xdg-desktop-portal/portals/scopefs.portal",
        "/usr/share/dbus-1/services/org.freedesktop.impl.portal.desktop.scopefs.service",
        "/usr/lib/systemd/user/scopefs-settings.service",
        "/usr/share/doc/scopefs/PORTAL.md",
        f"/usr/lib/x86_64-linux-gnu/libscopefs.so.{VERSION}",
        "/usr/lib/x86_64-linux-gnu/libscopefs.so.0",
        "/usr/lib/x86_64-linux-gnu/libscopefs.so",
        "/usr/lib/x86_64-linux-gnu/pkgconfig/scopefs.pc",
        "/usr/include/scopefs.h",
        "/usr/lib/python3/dist-packages/scopefs.py",
        "/usr/lib/python3/dist-packages/scopefs_testing.py",
        f"/usr/lib/python3/dist-packages/scopefs-{VERSION}.dist-info/entry_points.txt",
        "/usr/share/doc/scopefs/examples/example.c",
        "/usr/share/doc/scopefs/examples/pytest/test_reader_app.py",
        "/usr/lib/scopefs/libswiftCore.so",
        "/usr/share/doc/scopefs/copyright",
        "/usr/share/doc/scopefs/CLI.md",
        "/usr/share/doc/scopefs/README.md",
        "/usr/share/scopefs/extensions/s3/scopefs_s3.py",
        "/usr/share/scopefs/extensions/rclone/scopefs_rclone.py",
        "/usr/share/scopefs/clients/python/scopefs_extension.py",
        "/usr/lib/python3/dist-packages/scopefs_extension.py",
    }
    assert expected <= paths, sorted(expected - paths)
    control = run_bounded(["dpkg-deb", "--field", deb, "Version", "Depends"], 60, dict(os.environ))
    assert f"Version: {VERSION}" in control.stdout, control.stdout
    for dependency in (
        "fuse3",
        "libfuse3-3",
        "bubblewrap",
        "libjson-c5",
        "libseccomp2",
        "libsqlite3-0",
        "libsystemd0",
        "liburing2",
    ):
        assert re.search(rf"\b{dependency}\b", control.stdout), control.stdout


def test_installed_package_works(installed, env, tmp_path):
    """After `dpkg -i`: /usr/bin/scopefs runs even with the Swift toolchain
    hidden; `man scopefs` shows the generated page; `mount -t scopefs`
    with -o options mounts through /sbin/mount.scopefs and rejects a typo
    (exit 64); the system unit verifies as installed (binary and man page
    found); the C library links through pkg-config with soname
    libscopefs.so.0; Debian's python3 imports the client."""
    base = dict(os.environ)
    version = run_bounded(
        ["unshare", "--mount", "sh", "-c", "mount -t tmpfs tmpfs /opt/swift && /usr/bin/scopefs --version"], 30, base
    )
    assert version.returncode == 0 and version.stdout.startswith(VERSION), describe(version)
    ldd = run_bounded(["ldd", "/usr/bin/scopefs"], 30, base)
    assert "/opt/swift" not in ldd.stdout and "not found" not in ldd.stdout, ldd.stdout

    where = run_bounded(["man", "-w", "scopefs"], 30, base)
    assert where.stdout.strip() == "/usr/share/man/man1/scopefs.1.gz", describe(where)
    page = run_bounded(["man", "-P", "cat", "scopefs"], 30, dict(base, MANWIDTH="100"))
    assert page.returncode == 0 and "SYNOPSIS" in page.stdout and "provider" in page.stdout, describe(page)
    helper_page = run_bounded(["man", "-w", "mount.scopefs"], 30, base)
    assert helper_page.stdout.strip() == "/usr/share/man/man8/mount.scopefs.8.gz", describe(helper_page)
    with open("/usr/share/bash-completion/completions/scopefs") as completion:
        assert not completion.readline().startswith("#!"), "bash sources completions: no #! line"

    # mount(8) runs /sbin/mount.scopefs, which runs /usr/bin/scopefs.
    mount_env = {k: v for k, v in env.base_env.items() if k != "SCOPEFS_BIN"}
    typo = run_bounded(["mount", "-t", "scopefs", "-o", "scope=lenient", env.state, env.mnt], 30, mount_env)
    assert typo.returncode != 0 and "'scope=lenient'" in typo.stderr and mount_count(env.mnt) == 0, describe(typo)
    # The type findmnt shows works too, through the same helper (issue 31).
    typed = run_bounded(["mount", "-t", "fuse.scopefs", "-o", "scope=lenient", env.state, env.mnt], 30, mount_env)
    assert typed.returncode != 0 and "'scope=lenient'" in typed.stderr, describe(typed)
    p = run_bounded(
        ["mount", "-t", "scopefs", "-o", "scopes=lenient,open_files=keep,nofail", env.state, env.mnt],
        60,
        mount_env,
        out_dir=tmp_path,
        what="mount -t scopefs",
    )
    env.mounted = bool(mount_count(env.mnt))
    assert p.returncode == 0, describe(p)
    env._record_daemon()
    daemon = json.loads(env.cli("status", "--json").stdout)["daemon"]
    assert (daemon["scopes"], daemon["openFiles"]) == ("lenient", "keep"), daemon
    assert Path(f"/proc/{daemon['pid']}/exe").resolve() == Path("/usr/bin/scopefs")

    if shutil.which("systemd-analyze"):
        verify = run_bounded(["systemd-analyze", "verify", "scopefs@main.service"], 60, base)
        assert verify.returncode == 0 and not verify.stderr.strip(), describe(verify)

    pc = run_bounded(["pkg-config", "--modversion", "scopefs"], 30, base)
    assert pc.stdout.strip() == VERSION, describe(pc)
    source = tmp_path / "use.c"
    source.write_text('#include <scopefs.h>\nint main(void) { return scopefs_scope_count("/") == -2 ? 0 : 1; }\n')
    flags = run_bounded(["pkg-config", "--cflags", "--libs", "scopefs"], 30, base).stdout.split()
    cc = run_bounded([os.environ.get("CC", "cc"), "-o", tmp_path / "use", source, *flags], 60, base)
    assert cc.returncode == 0, describe(cc)
    needed = run_bounded(["readelf", "-d", tmp_path / "use"], 30, base).stdout
    assert "[libscopefs.so.0]" in needed, needed
    python = run_bounded(["/usr/bin/python3", "-c", "import scopefs; print(scopefs.__file__)"], 30, base)
    assert python.stdout.strip() == "/usr/lib/python3/dist-packages/scopefs.py", describe(python)
    # pytest loads the plugin by itself (issue 31): its pytest11 entry point.
    plugins = "import importlib.metadata as m; print([e.value for e in m.entry_points(group='pytest11')])"
    entry = run_bounded(["/usr/bin/python3", "-c", plugins], 30, base)
    assert "'scopefs_testing'" in entry.stdout, describe(entry)


def test_lintian_has_no_unexplained_tags(deb):
    """lintian (when installed) reports no error or warning that
    packaging/deb/lintian-overrides does not explain."""
    if shutil.which("lintian") is None:
        pytest.skip("lintian is not installed (`apt-get install lintian`; `make lint-deb` runs it)")
    p = run_bounded(["lintian", "--fail-on", "error,warning", deb], 600, dict(os.environ), what="lintian")
    assert p.returncode == 0, describe(p)
