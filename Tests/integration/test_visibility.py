"""What an app process sees through the mount: its own subtree, granted items
only, nothing of other apps; and the owner's read-only inspect view.
SPEC S2, S3, S4, S9."""

import pytest
from scopefs_harness import ALPHA, BETA, DRIVE, LOCAL, NOBODY, REPORT_BYTES

LIST_CHAIN = """
base = sys.argv[1]
emit({rel: listing(os.path.join(base, rel)) for rel in sys.argv[2:]})
"""

STAT_ERRNOS = """
base = sys.argv[1]
emit({rel: {"stat": attempt(os.stat, os.path.join(base, rel)),
            "open": attempt(open_close, os.path.join(base, rel), os.O_RDONLY)}
      for rel in sys.argv[2:]})
"""


def test_bare_ancestors_show_only_the_path_to_the_grant(env):
    """SPEC S2: bare ancestor folders leading to a granted item are listed, but
    show only the path to it; providers without grants are absent."""
    env.grant(ALPHA, f"{LOCAL}:deep/a/b/target.txt")
    env.mount()
    providers = env.app_dir(ALPHA) + "/Providers"
    got = env.app_json(ALPHA, LIST_CHAIN, providers, ".", "local", "local/deep", "local/deep/a", "local/deep/a/b")
    assert got == {
        ".": [LOCAL],
        "local": ["deep"],
        "local/deep": ["a"],
        "local/deep/a": ["b"],
        "local/deep/a/b": ["target.txt"],
    }


def test_app_directory_layout(env):
    """SPEC S2: MOUNT/<app>/ holds Container/{Documents,Library,tmp} and Providers/."""
    env.mount()
    got = env.app_json(ALPHA, LIST_CHAIN, env.app_dir(ALPHA), ".", "Container")
    assert got["."] == ["Container", "Providers"]
    assert {"Documents", "Library", "tmp"} <= set(got["Container"])


def test_ungranted_items_are_enoent(env):
    """SPEC S2, S32: lookup (stat) and open of ungranted items fail with ENOENT,
    including siblings of a granted item and of its bare ancestors."""
    env.grant(ALPHA, f"{LOCAL}:deep/a/b/target.txt")
    env.mount()
    ungranted = [
        "docs",
        "docs/secret.txt",
        "photos/p.jpg",
        "deep/a/other.txt",
        "deep/a/b/sibling.txt",
        "deep/hidden",
        "deep/hidden/x.txt",
        "no-such-file",
    ]
    got = env.app_json(ALPHA, STAT_ERRNOS, env.prov(ALPHA, LOCAL), *ungranted)
    assert got == {rel: {"stat": "ENOENT", "open": "ENOENT"} for rel in ungranted}
    got = env.app_json(ALPHA, STAT_ERRNOS, env.app_dir(ALPHA) + "/Providers", DRIVE, "drive/archive")
    assert got == {rel: {"stat": "ENOENT", "open": "ENOENT"} for rel in (DRIVE, "drive/archive")}


@pytest.mark.parametrize("read_only", [False, True], ids=["read-write", "read-only"])
def test_granted_file_is_readable(env, read_only):
    """SPEC S2, S9: an app process reads a granted file's exact bytes, in
    scope."""
    env.grant(ALPHA, f"{LOCAL}:docs/report.txt", read_only=read_only)
    env.mount()
    got = env.app_json(
        ALPHA,
        """
        start_accessing(sys.argv[1])
        data = read_bytes(sys.argv[1])
        emit({"len": len(data), "hex": data.hex()})
    """,
        env.prov(ALPHA, LOCAL, "docs/report.txt"),
    )
    assert got["len"] == len(REPORT_BYTES)
    assert bytes.fromhex(got["hex"]) == REPORT_BYTES


READ_ONLY_WRITES = """
folder, rofile = sys.argv[1], sys.argv[2]
start_accessing(folder, rofile)
f = os.path.join(folder, "report.txt")
emit({
    "read": attempt(read_bytes, f),
    "open-wronly": attempt(open_close, f, os.O_WRONLY),
    "open-rdwr": attempt(open_close, f, os.O_RDWR),
    "open-append": attempt(open_close, f, os.O_WRONLY | os.O_APPEND),
    "create": attempt(open_close, os.path.join(folder, "new.txt"), os.O_WRONLY | os.O_CREAT),
    "mkdir": attempt(os.mkdir, os.path.join(folder, "newdir")),
    "unlink": attempt(os.unlink, os.path.join(folder, "secret.txt")),
    "rename": attempt(os.rename, f, os.path.join(folder, "renamed.txt")),
    "truncate": attempt(os.truncate, f, 0),
    "chmod": attempt(os.chmod, f, 0o600),
    "setxattr": attempt(os.setxattr, f, "user.test", b"x"),
    "symlink": attempt(os.symlink, "report.txt", os.path.join(folder, "link")),
    "file-grant-open-wronly": attempt(open_close, rofile, os.O_WRONLY),
    "file-grant-read": attempt(read_bytes, rofile),
})
"""


def test_read_only_grant_refuses_writes_with_eperm(env):
    """SPEC S9, S32: write-class operations under a read-only grant (folder or
    file) fail with EPERM; reads work."""
    env.grant(ALPHA, f"{LOCAL}:docs", read_only=True)
    env.grant(ALPHA, f"{LOCAL}:deep/a/b/target.txt", read_only=True)
    env.mount()
    got = env.app_json(
        ALPHA, READ_ONLY_WRITES, env.prov(ALPHA, LOCAL, "docs"), env.prov(ALPHA, LOCAL, "deep/a/b/target.txt")
    )
    expected = {op: "EPERM" for op in got}
    expected.update({"read": "OK", "file-grant-read": "OK"})
    assert got == expected
    backing = env.backing(LOCAL)
    assert (backing / "docs/report.txt").read_bytes() == REPORT_BYTES
    assert sorted(p.name for p in (backing / "docs").iterdir()) == ["report.txt", "secret.txt"]


def test_folder_grant_covers_items_created_later(env):
    """SPEC §1 (Grant: covers items created later), S2: files and folders
    created on the host after the app listed the granted folder appear and
    are readable."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    docs = env.prov(ALPHA, LOCAL, "docs")
    before = env.app_json(ALPHA, "start_accessing(sys.argv[1])\n" + LIST_CHAIN, docs, ".")
    assert before == {".": ["report.txt", "secret.txt"]}
    host_docs = env.backing(LOCAL) / "docs"
    (host_docs / "later.txt").write_text("created later\n")
    (host_docs / "sub").mkdir()
    (host_docs / "sub/nested.txt").write_text("nested later\n")
    got = env.app_json(
        ALPHA,
        """
        base = sys.argv[1]
        start_accessing(base)
        emit({"list": listing(base), "sub": listing(base + "/sub"),
              "later": read_text(base + "/later.txt"),
              "nested": read_text(base + "/sub/nested.txt")})
    """,
        docs,
    )
    assert got == {
        "list": ["later.txt", "report.txt", "secret.txt", "sub"],
        "sub": ["nested.txt"],
        "later": "created later\n",
        "nested": "nested later\n",
    }


@pytest.mark.parametrize("owner_view,other_view", [("app", "app"), ("shared", "shared"), ("app", "shared")])
def test_other_app_gets_enoent_right_after_owner_walked(env, owner_view, other_view):
    """SPEC S3: a process of another app gets ENOENT for MOUNT/X and its
    subpaths, even right after an X process listed and stat'ed them (no
    kernel cache leak), and MOUNT/ lists no X for it. In every combination
    of views: the shared view is where the kernel's caches are shared."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.grant(BETA, f"{LOCAL}:docs")  # same item granted to both: only the view differs
    env.mount()
    paths = [
        env.app_dir(ALPHA),
        env.app_dir(ALPHA) + "/Providers",
        env.prov(ALPHA, LOCAL),
        env.prov(ALPHA, LOCAL, "docs"),
        env.prov(ALPHA, LOCAL, "docs/report.txt"),
        env.container(ALPHA, "Documents"),
    ]
    walk = """
        emit({p: {"stat": attempt(os.stat, p), "list": listing(p) if os.path.isdir(p) else None}
              for p in sys.argv[2:]} | {"root": listing(sys.argv[1])})
    """
    env.view = owner_view
    owner = env.app_json(ALPHA, walk, env.mnt, *paths)
    assert all(owner[p]["stat"] == "OK" for p in paths), owner
    assert ALPHA in owner["root"]
    env.view = other_view
    other = env.app_json(
        BETA,
        """
        emit({"root": listing(sys.argv[1]),
              "paths": {p: {"stat": attempt(os.stat, p), "lstat": attempt(os.lstat, p),
                            "open": attempt(open_close, p, os.O_RDONLY)}
                        for p in sys.argv[2:]}})
    """,
        env.mnt,
        *paths,
    )
    assert ALPHA not in other["root"]
    assert other["paths"] == {p: {"stat": "ENOENT", "lstat": "ENOENT", "open": "ENOENT"} for p in paths}


@pytest.mark.parametrize("view", ["app", "shared"])
def test_each_app_reaches_a_shared_item_through_its_own_view(env, view):
    """SPEC S3, S2, S14: two apps granted the same host folder each reach it
    through their own view, one right after the other: the nodes the kernel
    holds for one app's view never answer for the other's (each view keys
    its own nodes). Revoking one app's grant cuts that app alone."""
    alpha_grant = env.grant(ALPHA, f"{LOCAL}:docs")
    env.grant(BETA, f"{LOCAL}:docs")
    env.mount()
    env.view = view
    read = """
        emit({"start": attempt(start_accessing, sys.argv[1]), "list": listing(sys.argv[1]),
              "read": attempt(read_bytes, sys.argv[1] + "/report.txt")})
    """
    for app in (ALPHA, BETA, ALPHA):
        got = env.app_json(app, read, env.prov(app, LOCAL, "docs"))
        assert "report.txt" in got["list"] and got["read"] == "OK", (app, got)
    env.revoke(ALPHA, alpha_grant)
    assert env.app_json(ALPHA, read, env.prov(ALPHA, LOCAL, "docs"))["read"] == "EPERM"
    got = env.app_json(BETA, read, env.prov(BETA, LOCAL, "docs"))
    assert got["read"] == "OK", got


def test_inspect_view_reads_every_app(env):
    """SPEC S4, S2: the mount owner's own (non-app) processes browse every
    app's container and granted items read-only; ungranted items stay ENOENT."""
    env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    env.mount()
    env.app_py(ALPHA, "write_text(sys.argv[1], 'note from alpha\\n')", env.container(ALPHA, "Documents/note.txt"))
    got = env.host_json(
        """
        mnt, alpha = sys.argv[1], sys.argv[2]
        emit({"root": listing(mnt),
              "container": listing(mnt + "/" + alpha + "/Container"),
              "documents": listing(mnt + "/" + alpha + "/Container/Documents"),
              "note": read_text(mnt + "/" + alpha + "/Container/Documents/note.txt"),
              "report": read_bytes(mnt + "/" + alpha + "/Providers/local/docs/report.txt").hex(),
              "docs": listing(mnt + "/" + alpha + "/Providers/local/docs"),
              "secret": attempt(os.stat, mnt + "/" + alpha + "/Providers/local/docs/secret.txt")})
    """,
        env.mnt,
        ALPHA,
    )
    assert {ALPHA, BETA} <= set(got["root"])
    assert {"Documents", "Library", "tmp"} <= set(got["container"])
    assert got["documents"] == ["note.txt"]
    assert got["note"] == "note from alpha\n"
    assert bytes.fromhex(got["report"]) == REPORT_BYTES
    assert got["docs"] == ["report.txt"]
    assert got["secret"] == "ENOENT"


INSPECT_WRITES = """
docs, report = sys.argv[1], sys.argv[2]
note = os.path.join(docs, "note.txt")
emit({
    "create": attempt(open_close, os.path.join(docs, "new.txt"), os.O_WRONLY | os.O_CREAT),
    "mkdir": attempt(os.mkdir, os.path.join(docs, "newdir")),
    "unlink": attempt(os.unlink, note),
    "open-wronly": attempt(open_close, note, os.O_WRONLY),
    "open-rdwr": attempt(open_close, note, os.O_RDWR),
    "rename": attempt(os.rename, note, os.path.join(docs, "moved.txt")),
    "truncate": attempt(os.truncate, note, 0),
    "chmod": attempt(os.chmod, note, 0o600),
    "symlink": attempt(os.symlink, "note.txt", os.path.join(docs, "link")),
    "setxattr": attempt(os.setxattr, note, "user.test", b"x"),
    "provider-open-wronly": attempt(open_close, report, os.O_WRONLY),
    "provider-unlink": attempt(os.unlink, report),
})
"""


def test_inspect_view_writes_fail_with_erofs(env):
    """SPEC S4: any write from a non-app process of the mount owner fails
    with EROFS, in containers and in provider items alike."""
    env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    env.mount()
    env.app_py(ALPHA, "write_text(sys.argv[1], 'keep me\\n')", env.container(ALPHA, "Documents/note.txt"))
    got = env.host_json(INSPECT_WRITES, env.container(ALPHA, "Documents"), env.prov(ALPHA, LOCAL, "docs/report.txt"))
    assert got == {op: "EROFS" for op in got}
    after = env.app_json(
        ALPHA,
        "emit({'list': listing(sys.argv[1]), 'note': read_text(sys.argv[1] + '/note.txt')})",
        env.container(ALPHA, "Documents"),
    )
    assert after == {"list": ["note.txt"], "note": "keep me\n"}
    assert (env.backing(LOCAL) / "docs/report.txt").read_bytes() == REPORT_BYTES


def test_other_users_do_not_reach_mount_without_allow_other(env):
    """SPEC S4: without --allow-other, processes of other users never reach
    the mount (the kernel refuses them)."""
    env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    env.mount()
    got = env.host_json(
        """
        emit(as_user(%d, %d, lambda: {"list": listing(sys.argv[1]),
                                      "stat": attempt(os.stat, sys.argv[2])}))
    """
        % (NOBODY, NOBODY),
        env.mnt,
        env.prov(ALPHA, LOCAL, "docs/report.txt"),
    )
    assert got == {"value": {"list": "EACCES", "stat": "EACCES"}}


@pytest.mark.parametrize("view", ["app", "shared"])
def test_provider_folder_follows_the_policy_at_once(env, view):
    """SPEC S2 (providers without grants are absent), S37 (cached entries are
    invalidated explicitly): the kernel caches an app's layout for long, yet a
    running app sees Providers/<provider> vanish as soon as the provider (and
    so its last grant) is removed, and appear as soon as it is granted again.
    The app asks with statx(AT_STATX_DONT_SYNC), which answers from the
    kernel's caches whenever it can: only a dropped entry reaches ScopeFS."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    env.view = view
    providers = env.app_dir(ALPHA) + "/Providers"
    app = env.app_session(
        ALPHA,
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        AT_FDCWD, AT_STATX_DONT_SYNC, STATX_BASIC_STATS = -100, 0x4000, 0x7FF
        def cached_stat(path):
            buf = ctypes.create_string_buffer(256)
            if libc.statx(AT_FDCWD, path.encode(), AT_STATX_DONT_SYNC, STATX_BASIC_STATS, buf) == 0:
                return "OK"
            return errno.errorcode[ctypes.get_errno()]
        providers, root = sys.argv[1], sys.argv[1] + "/local"
        look = lambda: {"stat": cached_stat(root), "docs": cached_stat(root + "/docs"), "list": listing(providers)}
        step(look())
        step(look())
        emit(look())
    """,
        providers,
    )
    assert app.recv() == {"stat": "OK", "docs": "OK", "list": [LOCAL]}
    env.cli("provider", "remove", LOCAL)
    app.send()
    assert app.recv() == {"stat": "ENOENT", "docs": "ENOENT", "list": []}
    env.cli("provider", "add", LOCAL, env.backing(LOCAL))
    env.grant(ALPHA, f"{LOCAL}:docs")
    app.send()
    assert app.recv() == {"stat": "OK", "docs": "OK", "list": [LOCAL]}
    assert app.finish() == 0, app.stderr()
