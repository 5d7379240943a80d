"""The version lives in Sources/ScopeFSCLI/Version.swift; the Python client's
distribution (clients/python/pyproject.toml, which pip and `make install`
read) must say the same.

Runs anywhere (no FUSE, no root): `make test-unit` runs it.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_python_client_has_the_package_version():
    swift = re.search(r'static let package = "([^"]+)"', (ROOT / "Sources/ScopeFSCLI/Version.swift").read_text())
    project = tomllib.loads((ROOT / "clients/python/pyproject.toml").read_text())["project"]
    assert project["version"] == swift.group(1), "bump clients/python/pyproject.toml with Version.swift"
