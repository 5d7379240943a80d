"""One sandbox profile (issue 46, SPEC S5, S41; docs/SECURITY.md
"Sandboxes"): every bubblewrap command line ScopeFS starts is built by
Sources/SandboxProfile, and each consumer states only its mounts.

Last round's hardening landed in the app's sandbox only, and a root
owner's provider extension stayed host root: the sandbox was built three
times. These checks fail when a source outside the profile writes a
bubblewrap option, looks bubblewrap up, or loads a seccomp filter of its
own, and when a kind of sandbox has no consumer that builds it through
the profile."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "Sources"
PROFILE = SOURCES / "SandboxProfile"

# bubblewrap's options as string literals ("--ro-bind", "--unshare-user", ...).
BUBBLEWRAP_OPTION = re.compile(
    r'"--(?:ro-bind(?:-try|-data)?|bind(?:-try|-data)?|dev-bind(?:-try)?|unshare-[a-z]+|'
    r"disable-userns|cap-add|cap-drop|seccomp|add-seccomp-fd|proc|dev|tmpfs|mqueue|dir|symlink|perms|"
    r'die-with-parent|new-session|clearenv|setenv|unsetenv|chdir|hostname|args|remount-ro|uid|gid|as-pid-1)"'
)
# Where bubblewrap is found or named as a program to run.
BUBBLEWRAP_PROGRAM = re.compile(r'"/?(?:usr/bin/)?bwrap"|"/bwrap"|\\\(\$0\)/bwrap')

# Reading, not starting: the daemon recognises a run's bubblewrap among
# its processes by the program's name.
READERS = {SOURCES / "Processes" / "ProcFS.swift"}

# The consumers, each with the kind it builds.
CONSUMERS = {
    SOURCES / "Launcher" / "Sandbox.swift": ".app",
    SOURCES / "ProviderExtensions" / "ExtensionSandbox.swift": ".providerExtension",
    SOURCES / "Launcher" / "PortalBusProxy.swift": ".busProxy",
}


def sources() -> list[Path]:
    return [p for p in SOURCES.rglob("*") if p.suffix in (".swift", ".c", ".h") and PROFILE not in p.parents]


def test_no_source_outside_the_profile_writes_a_bubblewrap_option():
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in sources()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if BUBBLEWRAP_OPTION.search(line) and not line.strip().startswith("//")
    ]
    assert not found, "bubblewrap options outside Sources/SandboxProfile:\n" + "\n".join(found)


def test_no_source_outside_the_profile_finds_bubblewrap_or_builds_a_filter():
    found = []
    for path in sources():
        if path in READERS:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip().startswith("//"):
                continue
            if BUBBLEWRAP_PROGRAM.search(line) or re.search(r"\bseccomp_(?:init|load|export_bpf)\b", line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "bubblewrap or a seccomp filter outside Sources/SandboxProfile:\n" + "\n".join(found)


def test_every_kind_of_sandbox_is_built_through_the_profile_by_its_consumer():
    profile = (PROFILE / "SandboxProfile.swift").read_text()
    kinds = set(re.findall(r"^\s*case (\w+)(?: =|$)", profile.split("public enum Kind")[1].split("}")[0], re.M))
    assert {kind.lstrip(".") for kind in CONSUMERS.values()} == kinds, kinds
    for path, kind in CONSUMERS.items():
        text = path.read_text()
        assert re.search(r"SandboxProfile\(\s*kind: " + re.escape(kind), text), f"{path.name} builds no {kind} profile"
        assert "commandLine(" in text or "profile(" in text, f"{path.name} does not start its sandbox from the profile"
