"""The smaller traps of a newcomer's first hour (issue 50, finding 4; SPEC
S34: a clear error, a documented exit code, a hint at the remedy)."""

from __future__ import annotations

from scopefs_harness import ALPHA, LOCAL, describe, mount_count


def test_a_mistyped_command_gets_did_you_mean(env):
    """Issue 50.4: `scopefs grnat` said "2 unexpected arguments"; a
    mistyped command is named, with the nearest commands, exit 64."""
    p = env.cli("grnat", ALPHA, f"{LOCAL}:docs", expect=64)
    assert "unknown command 'grnat' for 'scopefs'; did you mean 'grant'?" in p.stderr, describe(p)
    p = env.cli("provider", "ad", "x", "/tmp", expect=64)
    assert "unknown command 'ad' for 'scopefs provider'; did you mean 'add'?" in p.stderr, describe(p)
    p = env.cli("frobnicate", expect=64)
    assert "unknown command 'frobnicate'" in p.stderr and "The commands: init, provider" in p.stderr, describe(p)
    env.cli("help", "grant")  # `help COMMAND` is no mistyped command


def test_a_host_path_where_an_item_belongs_gets_its_provider_form(env):
    """Issue 50.4: `scopefs grant APP ~/Documents/docs` (a host path) is
    refused with 64 as before, and now with the item's PROVIDER:RELPATH
    form when a provider's folder holds the path."""
    p = env.cli("grant", ALPHA, env.backing(LOCAL) / "docs" / "report.txt", expect=64)
    assert "Hint: that is local:docs/report.txt" in p.stderr, describe(p)
    p = env.cli("open", ALPHA, env.root / "elsewhere", expect=64)
    assert "Hint: an item is PROVIDER:RELPATH" in p.stderr and "no provider's folder holds" in p.stderr, describe(p)


def test_settings_and_run_without_init_exit_78_with_the_init_line(env):
    """Issue 50.4: like every other command, `settings` and `run` on a state
    directory never initialised exit 78 and print the `init` line (they
    said "no daemon" (69), and served an empty page)."""
    fresh = env.root / "fresh-state"
    for args in (("settings", "--no-open"), ("run", "--app", ALPHA, "--", "true")):
        p = env.cli(*args, state=fresh, expect=78, timeout=20)
        assert f"run `scopefs --state {fresh} init`" in p.stderr, describe(p)


def test_a_mount_over_a_folder_with_files_warns_and_names_the_source(env):
    """Issue 50.4: mounting over a folder with files says they are hidden
    (it mounts anyway, as FUSE and mount(8) do); the mount table's source
    is `scopefs:`, not the bare word `scopefs` that mount(8) took for a
    relative path, and not the state directory, which an app would read in
    its mountinfo (S47)."""
    (env.mnt / "left-here.txt").write_text("hidden while mounted\n")
    p = env.cli(*env.mount_args(), expect=0, timeout=30)
    env.mounted = bool(mount_count(env.mnt))
    env._record_daemon()
    assert f"warning: {env.mnt} is not empty (1 entry, such as left-here.txt)" in p.stderr, describe(p)
    sources = [line.split(" - ")[1].split()[1] for line in open("/proc/self/mountinfo") if f" {env.mnt} " in line]
    assert sources == ["scopefs:"], sources
