"""pytest plugin for testing an app against ScopeFS (issue 18). Standard
library and pytest only.

Installed (``make install``, the Debian package, or ``pip install
clients/python`` into a virtual environment) it loads by itself: its
``pytest11`` entry point names it. From a checkout, load it with ``pytest -p
scopefs_testing`` (with ``clients/python`` on ``PYTHONPATH``), or
``pytest_plugins = ["scopefs_testing"]`` in a ``conftest.py``. Each test that asks for the ``scopefs_mount`` fixture gets
its own world in a temporary directory: a state directory, a provider
``local`` backed by a temporary folder, the app, its grants, and a mount,
unmounted at the end of the test::

    import pytest

    @pytest.mark.scopefs(app="com.example.editor", files={"docs/a.txt": "hello"}, grants=["local:docs"])
    def test_survives_a_revoke(scopefs_mount):
        app = scopefs_mount.start(["python3", "editor.py", scopefs_mount.path("local:docs/a.txt")])
        app.wait_for_line("READY")
        scopefs_mount.revoke("local:docs")
        scopefs_mount.wait_for_events("revoke")
        ...

Helpers (all run the ``scopefs`` CLI as the mount's owner):
``revoke(item)``, ``restore(item)``, ``forget(item)``,
``rename_on_host(src, dst)``, ``write_on_host(item, text)``,
``inject(op, errno=... | latency_ms=..., path=..., percent=...)``,
``clear_faults()``, ``events(kind)``, ``wait_for_events(kind, count=1,
timeout=5)``, ``settle()`` (before counting events of an app that ended),
``leaks()``, ``run(cmd)`` / ``start(cmd)`` (the command as the app,
through ``scopefs run``; ``start`` returns an ``AppProcess``, a
``subprocess.Popen`` with ``wait_for_line(line, timeout=20)``; both take
``sandbox=True``, ``expose=[paths]`` and ``env={...}``, the variables the
app gets, in the sandbox too),
``path(item)`` (the item in the app's view of the mount). Items are
``PROVIDER:RELPATH`` as ``scopefs grant`` takes them. The waits mirror the
Swift library ScopeFSTesting's ``waitForLine`` and ``waitForEvents``.

The binary is ``$SCOPEFS_BIN``, or ``scopefs`` on ``PATH``; a test asking
for a mount is skipped, saying why, when there is no binary or no
``/dev/fuse``.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

__all__ = [
    "AppProcess",
    "LineNotPrinted",
    "ScopeFSError",
    "ScopeFSTimeout",
    "ScopeFSWorld",
    "scopefs_mount",
    "scopefs_world",
]

#: The provider every world has; more with ``add_provider``.
LOCAL = "local"
CLI_TIMEOUT = 30
#: How long ``settle()`` waits: a few of the daemon's event batches (100 ms),
#: as ``scopefs test`` waits before its checks.
SETTLE_SECONDS = 0.4


class ScopeFSError(RuntimeError):
    """A ``scopefs`` command this plugin ran failed; says which and why."""


class ScopeFSTimeout(ScopeFSError):
    """What was waited for did not happen in time; says what was seen
    (ScopeFSTesting's ``.timedOut``)."""


class LineNotPrinted(ScopeFSError):
    """The app ended, or the time ran out, before it printed the line
    (ScopeFSTesting's ``.lineNotPrinted``). ``output`` holds the lines the
    wait read, ``error_output`` what the app printed on standard error so
    far, ``exit_status`` its status, or None while it runs."""

    def __init__(self, line: str, output: str, error_output: str, exit_status: int | None):
        self.line = line
        self.output = output
        self.error_output = error_output
        self.exit_status = exit_status
        ending = "the app is still running" if exit_status is None else f"the app exited {exit_status}"
        super().__init__(
            f"the app never printed {line!r} ({ending}); its output:\n{_shortened(output)}\n"
            f"its errors:\n{_shortened(error_output)}"
        )


def _checked_environment(env: Mapping[str, str] | None) -> dict:
    """``env`` as ``scopefs run --env`` takes it: names of letters, digits
    and ``_``, not starting with a digit (ValueError otherwise)."""
    checked = {}
    for name, value in (env or {}).items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or "\0" in str(value):
            raise ValueError(f"env: {name!r} is not a variable name (letters, digits and _)")
        checked[name] = str(value)
    return checked


def _shortened(text: str) -> str:
    """A process's output, shortened to its first and last lines: a crash
    says why at the top of a long traceback, a run ends with its outcome."""
    lines = text.split("\n")
    if len(lines) <= 24:
        return text
    return "\n".join(lines[:12] + [f"[{len(lines) - 20} lines]"] + lines[-8:])


class AppProcess(subprocess.Popen):
    """The code under test, started by ``ScopeFSWorld.start``: a
    ``subprocess.Popen`` (text mode, pipes on stdin, stdout and stderr)
    that can also wait for a line of its output with a timeout."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._errors = b""

    def wait_for_line(self, line: str, timeout: float = 20) -> None:
        """Reads the app's standard output, line by line, until a line equal
        to ``line`` (surrounding white space ignored), and consumes it: what
        follows stays for ``stdout.readline()`` and ``communicate()``.
        Raises ``LineNotPrinted`` with the lines read, the app's errors and
        its exit status when the app ends or ``timeout`` seconds pass first.

        It reads the pipe itself, a byte at a time, so that it never takes
        more than the lines it consumes; read the output either this way or
        through ``stdout`` before it, not both at once."""
        wanted = line.strip()
        deadline = time.monotonic() + timeout
        descriptor = self.stdout.fileno()
        seen: list = []
        current = bytearray()
        while True:
            left = deadline - time.monotonic()
            readable, _, _ = select.select([descriptor], [], [], max(left, 0))
            if not readable:
                raise self._line_not_printed(line, seen + [current.decode(errors="replace")])
            byte = os.read(descriptor, 1)
            if not byte:  # the app closed its output: it ended (or will)
                try:  # its status, if it comes soon
                    self.wait(timeout=min(max(deadline - time.monotonic(), 0.1), 1))
                except subprocess.TimeoutExpired:
                    pass
                raise self._line_not_printed(line, seen + [current.decode(errors="replace")])
            if byte != b"\n":
                current += byte
                continue
            text = current.decode(errors="replace")
            if text.strip() == wanted:
                return
            seen.append(text)
            current.clear()

    def _line_not_printed(self, line: str, seen: list) -> LineNotPrinted:
        self._errors += self._available(self.stderr.fileno())
        output = "\n".join(seen).rstrip("\n")
        return LineNotPrinted(line, output, self._errors.decode(errors="replace"), self.poll())

    @staticmethod
    def _available(descriptor: int) -> bytes:
        """What a pipe holds now, without waiting for more."""
        data = b""
        while select.select([descriptor], [], [], 0)[0]:
            chunk = os.read(descriptor, 65536)
            if not chunk:
                break
            data += chunk
        return data


class ScopeFSWorld:
    """A state directory, providers, apps, grants and (once ``mount()``
    ran) a mount, all under ``root``. ``close()`` unmounts."""

    def __init__(self, root: str | Path, binary: str, app: str = "com.example.app"):
        self.root = Path(root)
        self.binary = binary
        self.app = app
        self.state = self.root / "state"
        self.mountpoint = self.root / "mnt"
        self.providers: dict = {}
        self.mounted = False
        self.started: list = []
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ)
        self.env.pop("SCOPEFS_STATE", None)
        self.env["XDG_STATE_HOME"] = str(self.root / "xdg-state")
        self.cli("init")
        self.add_provider(LOCAL)

    # -- the CLI ----------------------------------------------------------

    def cli(self, *args, check: bool = True, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess:
        """``scopefs --state STATE ARGS...``; raises ``ScopeFSError`` on a
        nonzero exit unless ``check`` is false."""
        argv = [self.binary, "--state", str(self.state), *map(str, args)]
        p = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and p.returncode != 0:
            raise ScopeFSError(f"`scopefs {' '.join(map(str, args))}` exited {p.returncode}: {p.stderr.strip()}")
        return p

    # -- the world --------------------------------------------------------

    def add_provider(self, provider: str, files: dict | None = None) -> Path:
        """Registers a provider backed by a new folder; ``files`` maps
        relative paths to text (or bytes) to create in it."""
        directory = self.root / "providers" / provider
        directory.mkdir(parents=True, exist_ok=True)
        self.cli("provider", "add", provider, directory)
        self.providers[provider] = directory
        for relative, content in (files or {}).items():
            self.write_on_host(f"{provider}:{relative}", content)
        return directory

    def add_app(self, app: str) -> None:
        self.cli("app", "add", app)

    def grant(self, item: str, app: str | None = None, read_only: bool = False) -> int:
        """``scopefs grant``; returns the grant id."""
        p = self.cli("grant", app or self.app, item, *(["--read-only"] if read_only else []))
        return int(p.stdout.split()[-1])

    def mount(self, scopes: str = "strict", open_files: str = "revoke") -> None:
        self.cli("mount", self.mountpoint, "--scopes", scopes, "--open-files", open_files)
        self.mounted = True

    def close(self) -> None:
        """Stops the app processes ``start`` left running, unmounts (the
        daemon exits); safe to call twice."""
        for process in self.started:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the app's children too
            except ProcessLookupError:
                pass
            if process.stdin is not None and process.stdin.closed:
                process.stdin = None  # the test closed it: communicate() would fail on it
            process.communicate()
        self.started.clear()
        if not self.mounted:
            return
        p = self.cli("unmount", self.mountpoint, check=False)
        if p.returncode != 0:
            subprocess.run(["fusermount3", "-u", str(self.mountpoint)], capture_output=True, timeout=CLI_TIMEOUT)
        self.mounted = False

    # -- paths ------------------------------------------------------------

    def host_path(self, item: str) -> Path:
        """The item's file in its provider's folder (``local:docs/a.txt``)."""
        provider, _, relative = item.partition(":")
        if provider not in self.providers or not relative or os.path.isabs(relative) or ".." in Path(relative).parts:
            raise ValueError(f"{item!r}: expected PROVIDER:RELPATH of a provider of this world")
        return self.providers[provider] / relative

    def path(self, item: str, app: str | None = None) -> str:
        """The item as the app sees it: ``MOUNT/APP/Providers/PROVIDER/RELPATH``."""
        provider, _, relative = item.partition(":")
        return str(self.mountpoint / (app or self.app) / "Providers" / provider / relative)

    # -- the app ----------------------------------------------------------

    def run_argv(
        self,
        cmd: Sequence,
        app: str | None = None,
        sandbox: bool = False,
        expose: Sequence = (),
        env: Mapping[str, str] | None = None,
    ) -> list:
        """``scopefs run`` of CMD as the app: ``--no-sandbox`` unless
        ``sandbox``; in the sandbox, each path of ``expose`` is shown
        read-only (``--expose``: the app's own folder, say) and each
        variable of ``env`` is set (``--env NAME=VALUE``: the sandbox
        starts the app with a cleared environment)."""
        if expose and not sandbox:
            raise ValueError("expose: the paths are shown in the sandbox; pass sandbox=True")
        view = [arg for path in expose for arg in ("--expose", str(path))] if sandbox else ["--no-sandbox"]
        if sandbox:
            view += [arg for name, value in _checked_environment(env).items() for arg in ("--env", f"{name}={value}")]
        return [self.binary, "--state", str(self.state), "run", "--app", app or self.app, *view, "--", *map(str, cmd)]

    def _run_environment(self, sandbox: bool, env: Mapping[str, str] | None) -> dict:
        """The environment of ``scopefs run``: the world's, and without
        the sandbox (which passes ``scopefs run``'s on) ``env`` too."""
        return self.env if sandbox or not env else {**self.env, **_checked_environment(env)}

    def run(
        self,
        cmd: Sequence,
        app: str | None = None,
        sandbox: bool = False,
        timeout: float = 60,
        expose: Sequence = (),
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess:
        """Runs CMD as the app to its end (``scopefs run``); the result has
        its exit status and output. ``env``: variables the app gets, in
        the sandbox too."""
        return subprocess.run(
            self.run_argv(cmd, app, sandbox, expose, env),
            capture_output=True,
            text=True,
            env=self._run_environment(sandbox, env),
            timeout=timeout,
        )

    def start(
        self,
        cmd: Sequence,
        app: str | None = None,
        sandbox: bool = False,
        expose: Sequence = (),
        env: Mapping[str, str] | None = None,
    ) -> AppProcess:
        """Starts CMD as the app with pipes on stdin, stdout and stderr; the
        caller waits for a line (``wait_for_line``) or for its end
        (``wait``, ``communicate``). ``env``: variables the app gets, in
        the sandbox too."""
        process = AppProcess(
            self.run_argv(cmd, app, sandbox, expose, env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self._run_environment(sandbox, env),
            start_new_session=True,
        )
        self.started.append(process)
        return process

    # -- what happens to the app -------------------------------------------

    def grant_id(self, item: str, app: str | None = None) -> int:
        provider, _, relative = item.partition(":")
        relative = "" if relative in (".", "") else relative.strip("/")
        for row in json.loads(self.cli("privacy", app or self.app, "--json").stdout):
            if row["provider"] == provider and row["path"] == relative:
                return int(row["grant"])
        raise ScopeFSError(f"{app or self.app} has no grant of {item}")

    def revoke(self, item: str, app: str | None = None) -> None:
        """Revokes the app's grant of the item: in force for the app's very
        next operation (SPEC S13, S14)."""
        self.cli("revoke", app or self.app, self.grant_id(item, app))

    def restore(self, item: str, app: str | None = None) -> None:
        self.cli("restore", app or self.app, self.grant_id(item, app))

    def forget(self, item: str, app: str | None = None) -> None:
        self.cli("forget", app or self.app, self.grant_id(item, app))

    def rename_on_host(self, source: str, destination: str) -> None:
        """Renames (or moves) an item in its provider's folder, behind the
        mount's back, as another program of the user would."""
        target = self.host_path(destination)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(self.host_path(source), target)

    def write_on_host(self, item: str, content: str | bytes) -> None:
        path = self.host_path(item)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)

    def inject(
        self,
        op: str,
        errno: str | None = None,
        latency_ms: int | None = None,
        path: str | None = None,
        percent: float | None = None,
        app: str | None = None,
        seed: int | None = None,
    ) -> int:
        """Adds a fault rule for the app (``scopefs fault add``): its OP
        requests on paths matching the glob ``path`` (in the app's view,
        e.g. ``Providers/local/docs/*``) fail with ``errno`` or wait
        ``latency_ms``, in ``percent`` % of the cases. Returns the rule id."""
        if (errno is None) == (latency_ms is None):
            raise ValueError("inject: give errno or latency_ms")
        args = ["fault", "add", "--app", app or self.app, "--op", op, "--json"]
        args += ["--errno", errno] if errno is not None else ["--latency", str(latency_ms)]
        if path is not None:
            args += ["--path", path]
        if percent is not None:
            args += ["--percent", str(percent)]
        if seed is not None:
            args += ["--seed", str(seed)]
        rule = json.loads(self.cli(*args).stdout)
        return int((rule[0] if isinstance(rule, list) else rule)["id"])

    def clear_faults(self, rule: int | None = None) -> None:
        self.cli("fault", "clear", *([rule] if rule is not None else ["--all"]))

    def events(self, kind: str | None = None, app: str | None = None) -> list:
        """The app's events (``scopefs events --json``), oldest first, each a
        dict as docs/CLI.md shows it: denials, starts,
        stops, leaks, stale-bookmark, ... The daemon writes them every
        100 ms: wait a moment after the app's action before asking."""
        args = ["events", "--app", app or self.app, "--json"] + (["--kind", kind] if kind else [])
        # One JSON object per line, as every event stream prints (docs/CLI.md).
        return [json.loads(line) for line in self.cli(*args).stdout.splitlines() if line.strip()]

    def settle(self) -> None:
        """Waits until the event log holds what the app did so far: the
        daemon writes its events (denials, starts, a process's leaks at its
        exit) in batches every 100 ms, so a count read at once can miss the
        last. Call it after the app ended and before counting events (as
        ``scopefs test`` does before its checks)."""
        time.sleep(SETTLE_SECONDS)

    def leaks(self, app: str | None = None) -> list:
        """The app's leak events (SPEC S11: a process ended with scopes
        still counted), after ``settle()``: call it once the app ended.
        ``assert not scopefs_mount.leaks()`` is the plugin's
        ``no_leaked_scope``."""
        self.settle()
        return self.events("leak", app)

    def wait_for_events(
        self,
        kind: str,
        operation: str | None = None,
        count: int = 1,
        app: str | None = None,
        timeout: float = 5,
    ) -> list:
        """Waits until the app's events of ``kind`` (one kind, or several
        comma-separated; of ``operation`` too, when given) add up to
        ``count`` occurrences (a repeat coalesced into one event counts its
        ``occurrences``), at most ``timeout`` seconds; returns them. Raises
        ``ScopeFSTimeout`` naming what was missing and what was seen."""
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.events(kind, app) if operation is None or e.get("operation") == operation]
            if sum(e.get("occurrences", 1) for e in found) >= count:
                return found
            if time.monotonic() >= deadline:
                what = f"{kind} of {operation}" if operation else kind
                raise ScopeFSTimeout(f"{count} {what} event(s) of {app or self.app} within {timeout} s; saw {found}")
            time.sleep(0.05)


def _binary() -> str | None:
    return os.environ.get("SCOPEFS_BIN") or shutil.which("scopefs")


@pytest.fixture
def scopefs_world(request):
    """An unmounted world (state directory, provider ``local``, the app of
    the ``scopefs`` marker, default ``com.example.app``): add what the test
    needs, then ``mount()``. Unmounted and removed at the end."""
    binary = _binary()
    if not binary:
        pytest.skip("scopefs_testing: no scopefs binary (set SCOPEFS_BIN or put scopefs on PATH)")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("scopefs_testing: no /dev/fuse on this machine")
    marker = request.node.get_closest_marker("scopefs")
    options = dict(marker.kwargs) if marker else {}
    root = tempfile.mkdtemp(prefix="scopefs-test-")
    world = None
    try:
        world = ScopeFSWorld(root, binary, app=options.get("app", "com.example.app"))
        world.add_app(world.app)
        yield world
    finally:
        if world is not None:
            world.close()
        if not any(
            line.split()[4] == str(Path(root) / "mnt")
            for line in open("/proc/self/mountinfo", errors="surrogateescape")
        ):
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def scopefs_mount(request, scopefs_world):
    """The world of ``scopefs_world`` with the marker's ``files`` in
    provider ``local``, its ``grants`` (items; ``read_only_grants`` too)
    given to the app, mounted with its ``scopes`` (``strict`` by default)
    and ``open_files`` (``revoke``)."""
    marker = request.node.get_closest_marker("scopefs")
    options = dict(marker.kwargs) if marker else {}
    for relative, content in options.get("files", {}).items():
        scopefs_world.write_on_host(f"{LOCAL}:{relative}", content)
    for item in options.get("grants", []):
        scopefs_world.grant(item)
    for item in options.get("read_only_grants", []):
        scopefs_world.grant(item, read_only=True)
    scopefs_world.mount(scopes=options.get("scopes", "strict"), open_files=options.get("open_files", "revoke"))
    return scopefs_world


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report shows what each app it started wrote on its
    standard error (issue 50: an assertion on the app's exit status or
    output said nothing of why it failed): a section per app process."""
    report = yield
    world = getattr(item, "funcargs", {}).get("scopefs_world")
    if report.when == "call" and report.failed and isinstance(world, ScopeFSWorld):
        for process in world.started:
            if not isinstance(process, AppProcess) or process.stderr is None or process.stderr.closed:
                continue
            process._errors += process._available(process.stderr.fileno())
            text = process._errors.decode(errors="replace")
            status = process.poll()
            ended = "running" if status is None else f"exit status {status}"
            report.sections.append((f"scopefs app {process.pid} ({ended}) stderr", text or "(nothing)"))
    return report


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "scopefs(app=..., files={...}, grants=[...], read_only_grants=[...], scopes=..., open_files=...): "
        "the world of the scopefs_mount fixture",
    )
