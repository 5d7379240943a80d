"""Workloads of a person's tools on a mount (issue 21): `git status` on a
repository, `find` over many files, a Python import of a package tree and
the build of a small C project, each first on a fresh tree and again once
the 1 s entry and attribute timeouts have passed (`AFTER_EXPIRY`), and
`git status` also again at once.

The trees are made once per run in the bench's temporary folder
(templates, outside the backing directory) and copied natively into each
system's working folder before its phases (untimed), so every system meets
the same fresh tree that no FUSE mount has looked up yet.
"""

import os
import shutil
import subprocess
import sys
import sysconfig

# Seconds after the system's previous phase: longer than every FUSE
# system's 1 s timeouts, so the kernel must ask the daemon again.
AFTER_EXPIRY = 2.0
# The stdlib packages copied for the import workload: pure Python, none
# imported by the interpreter's own start-up.
PY_PACKAGES = (
    "asyncio",
    "concurrent",
    "email",
    "html",
    "http",
    "json",
    "logging",
    "tomllib",
    "unittest",
    "urllib",
    "wsgiref",
    "xml",
    "xmlrpc",
)
PY_IMPORT = (
    "import asyncio, concurrent.futures, email.mime.multipart, email.parser, html.parser, "
    "http.client, http.server, json, logging.handlers, tomllib, unittest.mock, "
    "urllib.request, wsgiref.simple_server, xml.dom.minidom, xml.etree.ElementTree, "
    "xmlrpc.client"
)
# git: no safe.directory refusal (the owner a mount reports may differ),
# no background maintenance.
GIT = ["git", "-c", "safe.directory=*", "-c", "gc.auto=0", "-c", "maintenance.auto=false"]


def _run(argv, **kw):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, **kw)


def python_binary():
    """The interpreter itself, not a wrapper script (a pyenv shim would add
    its own file look-ups to every run)."""
    return os.path.realpath(sys.executable)


class Templates:
    """The source trees, made on first use and kept for the whole run."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.base = os.path.join(ctx.tmp, "templates")
        self.made = {}

    def get(self, name):
        if name not in self.made:
            path = os.path.join(self.base, name)
            os.makedirs(self.base, exist_ok=True)
            getattr(self, "_make_" + name)(path)
            self.made[name] = path
        return self.made[name]

    def copy(self, name, dest):
        """Copies template NAME to DEST natively (untimed): new inodes, same
        contents and modification times."""
        _run(["cp", "-a", self.get(name), dest])

    def _make_repo(self, path):
        """A git repository of the bench's source tree (the tracked files of
        HEAD), with a copy of /usr/include in the full run, committed."""
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        os.makedirs(os.path.join(path, "src"))
        archive = subprocess.run(["git", "-C", repo, "archive", "HEAD"], check=True, capture_output=True).stdout
        _run(["tar", "-x", "-C", os.path.join(path, "src")], input=archive)
        if self.ctx.sizes.repo_usr_include and os.path.isdir("/usr/include"):
            _run(["cp", "-r", "/usr/include", os.path.join(path, "include")])
        _run(GIT + ["init", "-q", path])
        _run(GIT + ["-C", path, "add", "-A"])
        _run(
            GIT
            + [
                "-C",
                path,
                "-c",
                "user.name=bench",
                "-c",
                "user.email=bench@localhost",
                "commit",
                "-q",
                "-m",
                "bench tree",
            ]
        )
        self.ctx.repo_files = int(
            subprocess.run(GIT + ["-C", path, "ls-files"], check=True, capture_output=True, text=True).stdout.count(
                "\n"
            )
        )

    def _make_pylib(self, path):
        """Stdlib packages copied with their bytecode compiled natively, so
        an import reads .pyc files as an installed package tree does."""
        stdlib = sysconfig.get_paths()["stdlib"]
        os.makedirs(path)
        for pkg in PY_PACKAGES:
            shutil.copytree(
                os.path.join(stdlib, pkg),
                os.path.join(path, pkg),
                ignore=shutil.ignore_patterns("__pycache__", "test", "tests"),
            )
        _run([python_binary(), "-m", "compileall", "-q", path])
        # The import must come from the copy, not from the stdlib.
        where = subprocess.run(
            [
                "env",
                "PYTHONPATH=" + path,
                python_binary(),
                "-s",
                "-B",
                "-c",
                PY_IMPORT + "; print(email.__file__, xml.__file__)",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        if not all(w.startswith(path + "/") for w in where):
            raise RuntimeError(f"the import workload imports from {where}, not from {path}")

    def _make_cproject(self, path):
        """CFILES generated C files with a shared header and a Makefile:
        one object per file, then a link."""
        n = self.ctx.sizes.c_files
        os.makedirs(path)
        with open(os.path.join(path, "common.h"), "w") as f:
            f.write("#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n")
            f.write("".join(f"long unit{i}(long x);\n" for i in range(n)))
        for i in range(n):
            with open(os.path.join(path, f"unit{i}.c"), "w") as f:
                f.write('#include "common.h"\n')
                f.write(
                    f'static long helper{i}(long x) {{ char b[64]; snprintf(b, sizeof b, "%ld", x);'
                    f" return (long)strlen(b) + x * {i + 3}; }}\n"
                )
                f.write(
                    f"long unit{i}(long x) {{ long s = 0; for (long k = 0; k < x; k++) "
                    f"s += helper{i}(k) % {i + 7}; return s; }}\n"
                )
        with open(os.path.join(path, "main.c"), "w") as f:
            f.write('#include "common.h"\nint main(void) { long s = 0;\n')
            f.write("".join(f"    s += unit{i}(10);\n" for i in range(n)))
            f.write('    printf("%ld\\n", s); return 0; }\n')
        objects = " ".join([f"unit{i}.o" for i in range(n)] + ["main.o"])
        with open(os.path.join(path, "Makefile"), "w") as f:
            f.write(f"OBJS = {objects}\nprog: $(OBJS)\n\tcc -o $@ $(OBJS)\n%.o: %.c common.h\n\tcc -O1 -c -o $@ $<\n")


def templates(ctx):
    if getattr(ctx, "templates", None) is None:
        ctx.templates = Templates(ctx)
    return ctx.templates


def git_status(ctx, system, tag):
    native = os.path.join(system.host_workdir, tag)
    templates(ctx).copy("repo", native)
    # The index matches the files as seen natively (a repository in use on
    # the host); a mount that reports other inode numbers makes git re-read
    # every file on its first `git status` there.
    _run(GIT + ["-C", native, "update-index", "-q", "--refresh"])
    status = ["run", *GIT, "-C", os.path.join(system.root, tag), "status"]
    yield "git-first", ctx.phase(system, status)
    yield "git-again", ctx.phase(system, status, fresh_cache=False)
    yield "git-expired", ctx.phase(system, status, gap=AFTER_EXPIRY)


# One system at a time: in turns, the other systems' phases would pass
# between this one's first and its "at once" run, and its entries expire.
git_status.lockstep = False


def find_walk(ctx, system, tag):
    """`find -type f -printf '%s\\n'` (a readdir and a stat per file) over
    folders of 1,000 empty files, on a fresh tree and again after expiry."""
    os.mkdir(os.path.join(system.host_workdir, tag))
    n, per = ctx.sizes.find_files, 1000
    for i in range(0, n, per):
        ctx.native_create(system, os.path.join(tag, f"d{i // per:03d}"), min(per, n - i), 0)
    find = ["run", "find", os.path.join(system.root, tag), "-type", "f", "-printf", "%s\\n"]
    # The kernel forgets what earlier workloads left it holding: through
    # passthrough_ll and the portal each inode it holds is a descriptor,
    # and the walk alone comes near their limit (`fit_descriptor_limit`).
    ctx.drop_caches()
    yield "find-first", ctx.phase(system, find)
    yield "find-expired", ctx.phase(system, find, gap=AFTER_EXPIRY)


# One system at a time: another system's cache drop would come between
# this one's walks and turn its repeat into a first walk.
find_walk.lockstep = False


def python_import(ctx, system, tag):
    templates(ctx).copy("pylib", os.path.join(system.host_workdir, tag))
    cmd = ["run", "env", "PYTHONPATH=" + os.path.join(system.root, tag), python_binary(), "-s", "-B", "-c", PY_IMPORT]
    yield "py-import", ctx.phase(system, cmd)
    yield "py-import-expired", ctx.phase(system, cmd, gap=AFTER_EXPIRY)


def c_build(ctx, system, tag):
    templates(ctx).copy("cproject", os.path.join(system.host_workdir, tag))
    make = ["run", "make", "-s", "-j2", "-C", os.path.join(system.root, tag)]
    yield "make", ctx.phase(system, make)
    yield "make-noop", ctx.phase(system, make, gap=AFTER_EXPIRY)


# An app's own database as Core Data keeps one: WAL, SQLite's default
# synchronous=FULL, a transaction per insert, so each commit appends to
# the -wal file and syncs it, and checkpoints write the database itself.
SQLITE_INSERTS = r"""
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, body BLOB)")
for i in range(int(sys.argv[2])):
    db.execute("BEGIN")
    db.execute("INSERT INTO notes (title, body) VALUES (?, ?)", ("note %d" % i, b"x" * 512))
    db.execute("COMMIT")
db.close()
"""


def sqlite_inserts(ctx, system, tag):
    """SQLite inserts, one transaction each, into a new database (the
    interpreter's start-up is in every system's time alike)."""
    os.mkdir(os.path.join(system.host_workdir, tag))
    db = os.path.join(system.root, tag, "notes.db")
    yield (
        "sqlite",
        ctx.phase(system, ["run", python_binary(), "-s", "-B", "-c", SQLITE_INSERTS, db, ctx.sizes.sqlite_rows]),
    )


def label_values(sizes, repo_files):
    """Values for the GROUPS' label templates that the sizes do not hold."""
    repo = "the bench's source tree" + (" + /usr/include" if sizes.repo_usr_include else "")
    return {"repo": repo + (f", {repo_files:,} files" if repo_files else ""), "py_packages": len(PY_PACKAGES)}


GROUPS = [
    (
        git_status,
        [
            ("git-first", "`git status` first ({repo})"),
            ("git-again", "`git status` again at once"),
            ("git-expired", "`git status` again after 2 s"),
        ],
    ),
    (
        find_walk,
        [("find-first", "find -printf %s over {find_files:,} files"), ("find-expired", "the same find after 2 s")],
    ),
    (
        python_import,
        [
            ("py-import", "python3 import of {py_packages} stdlib packages (.pyc)"),
            ("py-import-expired", "the same import after 2 s"),
        ],
    ),
    (c_build, [("make", "make -j2 of {c_files} C files"), ("make-noop", "make again after 2 s (nothing to do)")]),
    (sqlite_inserts, [("sqlite", "SQLite: {sqlite_rows:,} inserts, a transaction each (WAL)")]),
]
