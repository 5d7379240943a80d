"""Apple-shaped Swift code runs against a real mount (issue 31 item 7, SPEC
S31, S27c): an NSFilePresenter registered with
NSFileCoordinator.addFilePresenter hears presentedSubitemDidAppear,
presentedSubitem(at:didMoveTo:) and accommodatePresentedSubitemDeletion for
host changes inside its folder within a second, and nothing of its own
coordinated writes (coordinate(writingItemAt:...) and
coordinate(readingItemAt:options:writingItemAt:options:...)); ScopeFS's own
FilePresenter gets the same callbacks; NSMetadataQuery posts
NSMetadataQueryDidFinishGathering and NSMetadataQueryDidUpdate through
NotificationCenter; a UIDocumentPickerDelegate hears
documentPicker(_:didPickDocumentsAt:) and documentPickerWasCancelled. The
check program (clients_swift/AppleShapes.swift) is written with Apple's
names: that it builds is the compile check. Default mount (strict scopes),
default sandbox.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path

import pytest
from client_builds import swift_check  # noqa: F401  (fixture: the Swift check app)
from doc_scope_helpers import mount as mount_with_scopes
from pick_agent import Agent
from scopefs_harness import ALPHA, LOCAL

WITHIN = 1.0
REPORT = "docs/report.txt"


@pytest.fixture
def apple_world(env, swift_check):  # noqa: F811
    (env.backing(LOCAL) / "docs" / "inner").mkdir()
    mount_with_scopes(env, "strict")
    env.check = swift_check
    return env


class SwiftApp:
    """The check program as an app process in the default sandbox, which
    shows it its own folder (`--expose`), with pipes."""

    def __init__(self, world, *args: str):
        self.err = world.root / f"swift-{time.monotonic_ns()}.err"
        folder = str(Path(world.check).parent)
        argv = world.run_argv(ALPHA, [world.check, *args], sandbox=True, extra=("--expose", folder))
        with open(self.err, "w") as sink:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=sink,
                env=world.base_env,
                start_new_session=True,
            )
        self.buffer = b""

    def call(self, timeout: float = 10) -> dict:
        """The app's next JSON line, waiting at most `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.popen.stdout], [], [], max(0, left))
            assert ready, f"no call within {timeout} s; the app's stderr: {self.err.read_text()}"
            chunk = os.read(self.popen.stdout.fileno(), 65536)
            assert chunk, f"the app ended; its stderr: {self.err.read_text()}"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def send(self, line: str) -> None:
        self.popen.stdin.write(line.encode() + b"\n")
        self.popen.stdin.flush()

    def finish(self) -> list[dict]:
        """The calls left once the app ended (stdin closed), and its status 0."""
        self.popen.stdin.close()
        rest = self.buffer + self.popen.stdout.read()
        rest = [json.loads(line) for line in rest.splitlines() if line.strip()]
        assert self.popen.wait(timeout=30) == 0, self.err.read_text()
        return rest

    def kill(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, 9)
            self.popen.wait()


def next_call(app: SwiftApp, name: str, since: float) -> dict:
    """The next callback but presentedSubitemDidChange (a file made with
    content is written too); it must be `name`, within a second."""
    call = app.call()
    while call["call"] == "presentedSubitemDidChange":
        call = app.call()
    assert call["call"] == name, call
    assert call["at"] - since < WITHIN, (call, call["at"] - since)
    return call


@pytest.mark.parametrize("mode", ["apple-presenter", "subitem-presenter"])
def test_swift_folder_presenter_hears_subitems(apple_world, mode):
    world = apple_world
    world.cli("open", ALPHA, f"{LOCAL}:docs")
    docs = world.backing(LOCAL) / "docs"
    app = SwiftApp(world, mode, world.prov(ALPHA, LOCAL, "docs"))
    try:
        ready = app.call()
        assert ready["call"] == "ready", ready
        if mode == "apple-presenter":
            assert ready["presenters"] == 1, ready
        at = time.time()
        (docs / "new.txt").write_text("made on the host\n")
        assert next_call(app, "presentedSubitemDidAppear", at)["url"] == world.prov(ALPHA, LOCAL, "docs/new.txt")
        at = time.time()
        os.rename(docs / "new.txt", docs / "inner" / "moved.txt")
        moved = next_call(app, "presentedSubitem(at:didMoveTo:)", at)
        assert moved["old"] == world.prov(ALPHA, LOCAL, "docs/new.txt"), moved
        assert moved["url"] == world.prov(ALPHA, LOCAL, "docs/inner/moved.txt"), moved
        at = time.time()
        os.unlink(docs / "inner" / "moved.txt")
        gone = next_call(app, "accommodatePresentedSubitemDeletion", at)
        assert gone["url"] == world.prov(ALPHA, LOCAL, "docs/inner/moved.txt"), gone
        (world.backing(LOCAL) / "photos" / "beside.jpg").write_bytes(b"not granted\n")
        if mode == "apple-presenter":
            app.send("write")
            wrote = app.call()
            assert wrote == {"call": "wrote", "error": "none", "at": wrote["at"]}, wrote
            assert (docs / "copy.txt").read_text() == "written under a claim\n"
            time.sleep(1.0)  # time enough to hear an echo, if one were told
            app.send("end")
            rest = app.finish()
            assert [c["call"] for c in rest] == ["ended"] and rest[0]["presenters"] == 0, rest
        else:
            rest = app.finish()
            assert [c["call"] for c in rest] == ["ended"], rest
    finally:
        app.kill()


def test_ns_metadata_query_posts_notifications(apple_world):
    world = apple_world
    world.cli("open", ALPHA, f"{LOCAL}:{REPORT}")
    app = SwiftApp(world, "apple-query")
    try:
        gathered = app.call()
        assert gathered["call"] == "NSMetadataQueryDidFinishGathering", gathered
        assert gathered["urls"] == [world.prov(ALPHA, LOCAL, REPORT)], gathered
        world.cli("open", ALPHA, f"{LOCAL}:docs/secret.txt")
        updated = app.call()
        assert updated["call"] == "NSMetadataQueryDidUpdate", updated
        assert updated["added"] == [world.prov(ALPHA, LOCAL, "docs/secret.txt")] and updated["count"] == 2, updated
        app.send("end")
        assert app.finish() == []
    finally:
        app.kill()


def test_ui_document_picker_delegate(apple_world):
    world = apple_world
    agent = Agent(world, [{"choose": [f"{LOCAL}:{REPORT}"]}, {"cancel": True}])
    picked = SwiftApp(world, "apple-picker")
    try:
        call = picked.call()
        assert call == {
            "call": "documentPicker(_:didPickDocumentsAt:)",
            "urls": [world.prov(ALPHA, LOCAL, REPORT)],
            "at": call["at"],
        }, call
        assert picked.finish() == []
    finally:
        picked.kill()
    cancelled = SwiftApp(world, "apple-picker")
    try:
        assert cancelled.call()["call"] == "documentPickerWasCancelled"
        assert cancelled.finish() == []
    finally:
        cancelled.kill()
    agent.finish()
