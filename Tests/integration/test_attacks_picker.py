"""Attacks on the picker's operations (SPEC S33, S17-S20, S21a): open, import,
export and move run with the owner's rights, while the app controls its
container and, with a read-write grant, folders of a provider. A symbolic
link the app plants there must not make them write into, or read from,
the owner's other files; with app-initiated picking (issue 17) the app can
even ask for the operation. Each is refused (77) and leaves the owner's
files as they were.

The app runs as users run it: the default mount (strict scopes, SPEC S9)
and the default sandbox; it starts accessing a provider folder before it
plants a link there, as a real app must."""

from __future__ import annotations

import os

from scopefs_harness import ALPHA, LOCAL, describe

SECRET = b"the owner's secret\n"


def owner_folder(env):
    """A folder of the owner's, outside every provider, with a secret."""
    victim = env.root / "owner-files"
    victim.mkdir()
    (victim / "owner-secret.txt").write_bytes(SECRET)
    return victim


SWAP_FOR_LINK = """
path, aside, target, scope = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
if scope:
    os.setxattr(scope, "user.scopefs.start", b"")
if os.path.lexists(path):
    os.rename(path, aside)
os.symlink(target, path)
emit({"link": os.readlink(path)})
"""


def plant_link(env, app_path: str, aside: str, target, scope: str = "") -> None:
    """ALPHA, sandboxed, puts a link to `target` at `app_path` (moving what
    was there to `aside`), in scope of `scope` (a granted folder) if given."""
    got = env.app_json(ALPHA, SWAP_FOR_LINK, app_path, aside, target, scope, sandbox=True)
    assert got == {"link": str(target)}, got


def test_open_does_not_write_a_reference_through_a_linked_documents(env):
    """The app swaps its Documents for a link to a folder of the owner;
    `scopefs open` refuses instead of writing its reference there."""
    victim = owner_folder(env)
    env.grant(ALPHA, f"{LOCAL}:docs")  # a view, so the app can reach its container through the mount
    env.mount()
    plant_link(env, env.container(ALPHA, "Documents"), env.container(ALPHA, "Documents-aside"), victim)
    p = env.cli("open", ALPHA, f"{LOCAL}:docs/report.txt", expect=None)
    assert p.returncode == 77 and "symbolic link" in p.stderr, describe(p)
    assert sorted(os.listdir(victim)) == ["owner-secret.txt"], os.listdir(victim)


def test_import_does_not_copy_into_a_linked_inbox(env):
    """The app swaps its inbox for a link to a folder of the owner; an
    import refuses instead of putting the copy there."""
    victim = owner_folder(env)
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    inbox = env.container(ALPHA, f"tmp/{ALPHA}-Inbox")
    env.app_json(ALPHA, "os.makedirs(sys.argv[1], exist_ok=True)\nemit({})", inbox, sandbox=True)
    plant_link(env, inbox, env.container(ALPHA, "tmp/aside"), victim)
    p = env.cli("import", ALPHA, f"{LOCAL}:docs/report.txt", expect=None)
    assert p.returncode == 77, describe(p)
    assert sorted(os.listdir(victim)) == ["owner-secret.txt"], os.listdir(victim)


def test_import_of_a_planted_link_does_not_copy_what_it_points_to(env):
    """The app plants, in its read-write folder, a link to an owner's file
    and gets it imported (the user picks "notes"): the import refuses, and
    the owner's file never reaches the app's inbox."""
    victim = owner_folder(env)
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    plant_link(
        env,
        env.prov(ALPHA, LOCAL, "docs/notes"),
        env.prov(ALPHA, LOCAL, "docs/notes-aside"),
        victim / "owner-secret.txt",
        scope=env.prov(ALPHA, LOCAL, "docs"),
    )
    p = env.cli("import", ALPHA, f"{LOCAL}:docs/notes", expect=None)
    assert p.returncode == 77 and "symbolic link" in p.stderr, describe(p)
    inbox = env.state / "containers" / ALPHA / "tmp" / f"{ALPHA}-Inbox"
    copies = [path.read_bytes() for path in inbox.iterdir()] if inbox.exists() else []
    assert SECRET not in copies, "the owner's file was copied into the app's inbox"


def test_move_and_export_do_not_read_through_a_linked_container_folder(env):
    """The app makes Documents a link to a folder of the owner and asks for
    Documents/owner-secret.txt to be moved (or exported) to a provider folder:
    both refuse, so the owner's file is neither copied where the app gets a
    grant on it, nor removed."""
    victim = owner_folder(env)
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    plant_link(env, env.container(ALPHA, "Documents"), env.container(ALPHA, "Documents-aside"), victim)
    for command in ("move", "export"):
        p = env.cli(command, ALPHA, "Documents/owner-secret.txt", f"{LOCAL}:docs", expect=None)
        assert p.returncode == 77 and "symbolic link" in p.stderr, describe(p)
    assert not (env.backing(LOCAL) / "docs" / "owner-secret.txt").exists(), (
        "the owner's file was copied into the provider"
    )
    assert (victim / "owner-secret.txt").read_bytes() == SECRET, "the owner's file was removed"
