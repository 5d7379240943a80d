"""A provider extension that only reports the sandbox it runs in
(Tests/integration/test_attacks_every_sandbox.py): what `sandbox_probe`
finds, written as JSON to the folder named by SCOPEFS_PROBE_OUT, which the
test adds with `--writable`. It answers nothing; the daemon restarts it."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sandbox_probe import probe  # noqa: E402

out = sys.argv[1]
with open(os.path.join(out, "report.tmp"), "w") as f:
    json.dump(probe(), f)
os.rename(os.path.join(out, "report.tmp"), os.path.join(out, "report.json"))
sys.stdin.read()
