#!/usr/bin/env python3
"""Writes the .dist-info of the Python client next to its installed modules,
from clients/python/pyproject.toml: what pip would write, without pip, a
build backend or the network (`make install` and `make deb` run it).

    packaging/python-dist-info.py PYPROJECT SITE_DIR

SITE_DIR (under DESTDIR) already holds the modules pyproject.toml names.
The metadata makes `importlib.metadata` see the distribution, and its
entry_points.txt makes pytest load the plugin by itself (`pytest11`).
RECORD lists the files with their hashes, as the wheel format asks.
"""

from __future__ import annotations

import base64
import hashlib
import sys
import tomllib
from pathlib import Path


def record_line(site: Path, path: Path) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
    return f"{path.relative_to(site)},sha256={digest},{path.stat().st_size}"


def main(pyproject_path: str, site_dir: str) -> int:
    project = tomllib.loads(Path(pyproject_path).read_text())
    metadata = project["project"]
    modules = project["tool"]["setuptools"]["py-modules"]
    site = Path(site_dir)
    missing = [name for name in modules if not (site / f"{name}.py").is_file()]
    if missing:
        print(f"python-dist-info: {site} lacks {', '.join(missing)}", file=sys.stderr)
        return 66
    info = site / f"{metadata['name']}-{metadata['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\n"
        f"Name: {metadata['name']}\n"
        f"Version: {metadata['version']}\n"
        f"Summary: {metadata['description']}\n"
        f"License: {metadata['license']['text']}\n"
        f"Requires-Python: {metadata['requires-python']}\n"
    )
    groups = metadata.get("entry-points", {})
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in entries.items()) + "\n"
            for group, entries in groups.items()
        )
    )
    (info / "top_level.txt").write_text("".join(f"{name}\n" for name in modules))
    # Not pip: `pip uninstall` then says who installed it instead of removing it.
    (info / "INSTALLER").write_text("scopefs-make\n")
    files = [site / f"{name}.py" for name in modules] + sorted(p for p in info.iterdir() if p.name != "RECORD")
    (info / "RECORD").write_text(
        "".join(record_line(site, path) + "\n" for path in files) + f"{(info / 'RECORD').relative_to(site)},,\n"
    )
    for path in info.iterdir():
        path.chmod(0o644)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: packaging/python-dist-info.py PYPROJECT SITE_DIR", file=sys.stderr)
        sys.exit(64)
    sys.exit(main(sys.argv[1], sys.argv[2]))
