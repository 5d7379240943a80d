"""The document layout answers as xdg-document-portal does (issue 49,
SPEC S45, S48): xdg-desktop-portal's own test_document_fuse.py checks
the errno of every change the layout refuses, and a Flatpak app meets
the same answers. Before, a root owner's layout said EROFS where the
reference says EPERM, a non-root owner's said the kernel's EACCES (from
the modes it shows, under `default_permissions`) where the reference
says EISDIR or EXDEV, `rmdir` of a folder document said ENOTDIR, xattr
changes EROFS, and a symbolic link in a folder document could not be
read (EINVAL). Each call runs as the owner's own process, for a root
owner and a non-root owner (uid 65534).
"""

from __future__ import annotations

import json
import subprocess

import pytest
from scopefs_harness import ALPHA, LOCAL, describe, run_bounded
from test_caller_identity import nobody_portal, root_portal  # noqa: F401 (fixtures)
from test_portal import SYSTEM_PYTHON
from test_portal_chooser import nobody_env  # noqa: F401 (a fixture)

# argv: the layout's root, a file document's id and name, a folder
# document's id and name. Prints {call: errno name or "OK"}.
PROBE = r"""
import errno, json, os, sys
root, doc, name, folder_doc, folder_name = sys.argv[1:6]
def attempt(call, *args):
    try:
        call(*args)
        return "OK"
    except OSError as error:
        return errno.errorcode[error.errno]
document = os.path.join(root, doc, name)
inside = os.path.join(root, folder_doc, folder_name)
result = {
    "mkdir root": attempt(os.mkdir, os.path.join(root, "a_dir")),
    "create in root": attempt(os.open, os.path.join(root, "a-file"), os.O_RDWR | os.O_CREAT, 0o600),
    "rename by-app": attempt(os.rename, os.path.join(root, "by-app"), os.path.join(root, "by-app2")),
    "rmdir by-app": attempt(os.rmdir, os.path.join(root, "by-app")),
    "mkdir by-app": attempt(os.mkdir, os.path.join(root, "by-app", "a_dir")),
    "rename doc folder": attempt(os.rename, os.path.join(root, doc), os.path.join(root, doc + "_renamed")),
    "rmdir doc folder": attempt(os.rmdir, os.path.join(root, doc)),
    "unlink doc folder": attempt(os.unlink, os.path.join(root, doc)),
    "rename out of doc": attempt(os.rename, document, os.path.join(root, name)),
    "rename into app": attempt(os.rename, document, os.path.join(root, "by-app", sys.argv[6], name)),
    "rmdir document": attempt(os.rmdir, document),
    "setxattr": attempt(os.setxattr, document, "user.attr", b"foo"),
    "removexattr": attempt(os.removexattr, document, "user.attr"),
    "rmdir folder document": attempt(os.rmdir, inside),
    "readlink": attempt(os.readlink, os.path.join(inside, "symlink")),
}
try:
    result["link target"] = os.readlink(os.path.join(inside, "symlink"))
except OSError as error:
    result["link target"] = errno.errorcode[error.errno]
print(json.dumps(result))
"""

EXPECTED = {
    "mkdir root": "EPERM",
    "create in root": "EPERM",
    "rename by-app": "EPERM",
    "rmdir by-app": "EPERM",
    "mkdir by-app": "EPERM",
    "rename doc folder": "EPERM",
    "rmdir doc folder": "EPERM",
    "unlink doc folder": "EISDIR",
    "rename out of doc": "EXDEV",
    "rename into app": "EXDEV",
    "rmdir document": "ENOTDIR",
    "setxattr": "EPERM",
    "removexattr": "EPERM",
    "rmdir folder document": "EPERM",
    "readlink": "OK",
    "link target": "realfile",
}


@pytest.fixture(params=["root owner", "non-root owner"])
def owner(request):
    if request.param == "root owner":
        return request.getfixturevalue("env"), request.getfixturevalue("root_portal")
    return request.getfixturevalue("nobody_env"), request.getfixturevalue("nobody_portal")


def test_refusals_are_the_reference_portals(owner):
    """SPEC S45, S48: each change the layout refuses gets the errno
    xdg-document-portal gives (its test_document_fuse.py's checks), and a
    folder document's symbolic link reads back."""
    env, portal = owner
    docs = env.backing(LOCAL) / "docs"
    tree = env.backing(LOCAL) / "tree"
    tree.mkdir()
    (tree / "realfile").write_bytes(b"real")
    (tree / "symlink").symlink_to("realfile")
    subprocess.run(["chown", "-R", f"{docs.stat().st_uid}:{docs.stat().st_gid}", tree], check=True)
    [[doc], [folder_doc]] = [
        answer["reply"][0]
        for answer in portal.calls(
            ("AddFull", "ahusas", [[{"fd": str(docs / "report.txt"), "flags": ["O_RDWR"]}], 3, ALPHA, ["read"]]),
            ("AddFull", "ahusas", [[{"fd": str(tree), "flags": ["O_PATH"]}], 11, ALPHA, ["read"]]),
            prefix=portal.prefix,
        )
    ]
    argv = [*portal.prefix, SYSTEM_PYTHON, "-c", PROBE, portal.mountpoint, doc, "report.txt", folder_doc, "tree", ALPHA]
    p = run_bounded(list(map(str, argv)), 30, portal.environ, what="layout probe")
    assert p.returncode == 0, describe(p)
    answers = json.loads(p.stdout.strip().splitlines()[-1])
    wrong = {call: (answers[call], want) for call, want in EXPECTED.items() if answers[call] != want}
    assert not wrong, f"(got, the reference's) per call: {wrong}"
    assert (docs / "report.txt").exists() and not (env.backing(LOCAL) / "report.txt").exists()
