#!/usr/bin/env python3
"""The folder example that also sends ``changed`` as fast as it can (about
10,000 a second) from the moment it is initialized: a hostile extension
that must cost the daemon a pull at a time, not a busy loop.

    flooding_folder.py ROOT
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "docs" / "examples" / "extensions"))
sys.path.insert(0, str(ROOT / "clients" / "python"))

from folder import FolderExtension  # noqa: E402 - the example sits in docs/examples/extensions
from scopefs_extension import run  # noqa: E402


class FloodingFolder(FolderExtension):
    name = "flooding-folder"

    def initialize(self, provider_id, staging_directory, options):
        super().initialize(provider_id, staging_directory, options)
        threading.Thread(target=self._flood, daemon=True).start()

    def _flood(self):
        sent = 0
        start = time.monotonic()
        while True:
            self.signal_changed()
            sent += 1
            if sent % 100 == 0:
                ahead = sent / 10000 - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)


if __name__ == "__main__":
    run(FloodingFolder(sys.argv[1]))
