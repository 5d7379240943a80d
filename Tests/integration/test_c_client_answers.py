"""The C library (clients/c) against a broken or hostile daemon (issue 30
item 5): every answer it reads from the control socket is untrusted input.

A fake daemon listens on STATE/control.sock and sends scripted answers
(truncated JSON, members of the wrong type, huge strings, deep nesting,
bytes that are not JSON); a small C program
(Tests/integration/clients_c/answer_probe.c) makes one library call and
prints what it returned. The library and the program are built with
AddressSanitizer and UndefinedBehaviorSanitizer, so a read out of bounds, a
leak or undefined behaviour fails the test even where it would not crash.
Each broken answer must give the call's documented error (EPROTO for an
answer docs/API.md does not define, scopefs.h), never a crash.

The fake daemon also records the requests: the JSON on the wire is the one
docs/API.md shows, byte for byte for ordinary strings.

No mount: this tests the client's parsing, not the daemon (the real-mount
tests of the C library are test_clients.py, test_pick_requests.py,
test_c_coordination.py, test_live_queries.py and test_names_bytes.py).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from scopefs_harness import REPO_ROOT, describe, run_bounded

C_CLIENT_DIR = REPO_ROOT / "clients" / "c"
PROBE_SOURCE = Path(__file__).resolve().parent / "clients_c" / "answer_probe.c"
SANITIZE = "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
BUILD_TIMEOUT = 180
MAX_ANSWER = 1 << 20  # control.c: a longer answer is not one the daemon sends

# Sanitizers report into the test's failure message, and a leak fails too.
SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=99",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=99",
}


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    """libscopefs.so and answer_probe, both built with the sanitizers."""
    build = tmp_path_factory.mktemp("scopefs-c-sanitized") / "build"
    env = dict(os.environ)
    p = run_bounded(
        ["make", "-C", C_CLIENT_DIR, f"BUILD={build}", f"CFLAGS=-O1 -g {SANITIZE}", f"LDFLAGS={SANITIZE}", "all"],
        BUILD_TIMEOUT,
        env,
        what="make -C clients/c (sanitized)",
    )
    assert p.returncode == 0, "building the sanitized libscopefs.so failed\n" + describe(p)
    out = build / "answer_probe"
    cc = [os.environ.get("CC", "cc"), "-std=c11", "-D_GNU_SOURCE", "-g", *SANITIZE.split(), "-Wall", "-Wextra"]
    cc += ["-Werror", "-o", out, PROBE_SOURCE, f"-I{C_CLIENT_DIR / 'include'}", f"-L{build}", "-lscopefs"]
    q = run_bounded([*cc, f"-Wl,-rpath,{build}"], BUILD_TIMEOUT, env, what="cc answer_probe.c")
    assert q.returncode == 0, describe(q)
    return out


class FakeDaemon:
    """Listens on STATE/control.sock; answers each connection's request line
    with the next scripted answer (bytes sent as they are, then the
    connection closes) and records the requests. Once the script is spent,
    a long poll gets the last answer again after its waitSeconds, as the
    daemon answers when nothing changed."""

    def __init__(self, state: Path, answers: list[bytes]):
        assert answers, "a script of at least one answer"
        self.answers = list(answers)
        self.requests: list[bytes] = []
        self.path = state / "control.sock"
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.path))
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.stopping = False
        self.spent = False  # the last answer went out once
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping:
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(10)
                request = b""
                while not request.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    request += chunk
                self.requests.append(request)
                if self.spent:
                    time.sleep(min(5.0, float(json.loads(request).get("waitSeconds", 0))))
                answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
                self.spent = self.spent or len(self.answers) == 1 and answer is self.answers[0]
                try:
                    conn.sendall(answer)
                except OSError:
                    pass  # the client stopped reading (more than it takes): fine

    def close(self) -> None:
        self.stopping = True
        self.thread.join(5)
        self.server.close()
        self.path.unlink()


@pytest.fixture
def state(tmp_path) -> Path:
    folder = tmp_path / "state"
    folder.mkdir()
    return folder


def call(probe: Path, state: Path, answers: list[bytes], *args: str, mount: str | None = None):
    """Runs the probe against a fake daemon sending `answers`; returns its
    output lines and the requests it sent. The probe must exit 0: a crash,
    a sanitizer report or a leak is a failure."""
    daemon = FakeDaemon(state, answers)
    env = {k: v for k, v in os.environ.items() if k not in ("SCOPEFS_MOUNT", "SCOPEFS_STATE")}
    env.update(SANITIZER_ENV)
    if mount:
        env["SCOPEFS_MOUNT"] = mount
    try:
        p = run_bounded([probe, state, *args], 60, env, what=f"answer_probe {' '.join(args)[:40]}")
    finally:
        daemon.close()
    assert p.returncode == 0, f"the C library crashed or misbehaved on {answers!r:.300}\n" + describe(p)
    return p.stdout.splitlines(), daemon.requests


def line(answer) -> bytes:
    return (answer if isinstance(answer, bytes) else json.dumps(answer).encode()) + b"\n"


def hexed(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return data.hex() if data else "."


def deep(depth: int) -> bytes:
    return b'{"ok":true,"path":"/x","resolution":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"


RESOLVED = {
    "ok": True,
    "path": "/m/app/Providers/local/a.txt",
    "resolution": {"pathInApp": "Providers/local/a.txt", "isStale": True},
}

# Answers to a resolve that docs/API.md does not define: each is EPROTO.
BROKEN_RESOLVE = {
    "cut short": b'{"ok":true,"path":"/m/a.txt","resolution":{"pathIn',
    "cut short with a newline": b'{"ok":true,"path":"/m/a.txt","resol\n',
    "nothing": b"",
    "an empty line": b"\n",
    "not JSON": b"hello\n",
    "an array": b'[{"ok":true}]\n',
    "a string": b'"ok"\n',
    "garbage after the object": line(RESOLVED)[:-1] + b" x\n",
    "two objects": line(RESOLVED)[:-1] + line(RESOLVED),
    "single quotes": b"{'ok':true}\n",
    "a trailing comma": b'{"ok":true,}\n',
    "ok as a string": line({**RESOLVED, "ok": "true"}),
    "ok as a number": line({**RESOLVED, "ok": 1}),
    "no ok": line({k: v for k, v in RESOLVED.items() if k != "ok"}),
    "path as a number": line({**RESOLVED, "path": 5}),
    "path as an array": line({**RESOLVED, "path": ["/a"]}),
    "no path": line({k: v for k, v in RESOLVED.items() if k != "path"}),
    "resolution as an array": line({**RESOLVED, "resolution": []}),
    "pathInApp as an object": line({**RESOLVED, "resolution": {"pathInApp": {}, "isStale": False}}),
    "isStale as a string": line({**RESOLVED, "resolution": {"pathInApp": "a", "isStale": "no"}}),
    "a NUL inside the path": line({**RESOLVED, "path": "/m/a\u0000b"}),
    "a raw control character": b'{"ok":true,"path":"/m/a\x01b","resolution":{"pathInApp":"a"}}\n',
    "a bad escape": b'{"ok":true,"path":"/m/\\x41","resolution":{"pathInApp":"a"}}\n',
    "a cut escape": b'{"ok":true,"path":"/m/\\u00',
    "nested 10000 deep": deep(10000) + b"\n",
    "nested 33 deep": deep(33) + b"\n",
    "an unclosed nest of 500000": b"[" * 500000 + b"\n",
    "longer than 1 MiB": b'{"ok":true,"path":"' + b"a" * (MAX_ANSWER + 10) + b'"}\n',
    "1 MiB without a newline": b"{" + b" " * (MAX_ANSWER + 10),
    "code as a string": line({"ok": False, "code": "65"}),
    "code as a fraction": line({"ok": False, "code": 65.5}),
    "code out of range": b'{"ok":false,"code":1' + b"0" * 40 + b"}\n",
    "an unknown code": line({"ok": False, "code": 99}),
    "no code": line({"ok": False}),
}


@pytest.mark.parametrize("case", BROKEN_RESOLVE)
def test_c_resolve_reads_a_broken_answer_as_eproto(probe, state, case):
    """scopefs_bookmark_resolve() gives NULL with EPROTO for each answer
    docs/API.md does not define (scopefs.h), and never crashes."""
    out, _ = call(probe, state, [BROKEN_RESOLVE[case]], "resolve", "TOKEN")
    assert out == ["error EPROTO"], (case, out)


def test_c_resolve_reads_a_good_answer(probe, state):
    """The answer docs/API.md defines: "path" outside `scopefs run`,
    "pathInApp" under $SCOPEFS_MOUNT inside it; isStale; members the library
    does not know, in any order and with spaces, are fine."""
    out, requests = call(probe, state, [line(RESOLVED)], "resolve", "TOKEN")
    assert out == ["path " + hexed(RESOLVED["path"]), "stale 1"]
    assert requests == [b'{"op":"resolve","bookmark":"TOKEN"}\n']
    spaced = b' { "resolution" : { "isStale" : false , "extra" : [1, {"x": null}], "pathInApp" : "P/a" } , "ok" : true, "path" : "/m/a" }  \n'
    out, _ = call(probe, state, [spaced], "resolve", "TOKEN", mount="/sandbox/mnt")
    assert out == ["path " + hexed("/sandbox/mnt/P/a"), "stale 0"]


def test_c_resolve_maps_the_daemon_codes(probe, state):
    """65 -> EBADMSG, 66 -> ENOENT, 77 -> EPERM (docs/API.md, scopefs.h)."""
    for code, name in ((65, "EBADMSG"), (66, "ENOENT"), (77, "EPERM")):
        out, _ = call(probe, state, [line({"ok": False, "code": code, "message": "x"})], "resolve", "T")
        assert out == [f"error {name}"], (code, out)


def test_c_reads_path_bytes_and_huge_strings(probe, state):
    """A path byte that is not UTF-8 arrives as "\\udcXX" and is given back
    as the byte (SPEC S33a); a surrogate pair, including one whose low half
    is in that range, is the character; an escaped backslash before "udc80"
    is text. A 900 KiB path (under the 1 MiB answer limit) is read whole."""
    text = '{"ok":true,"path":"/m/\\udcff\\u00e9\\ud800\\udc80\\\\udc80\\"\\/","resolution":{"pathInApp":"a"}}\n'
    out, _ = call(probe, state, [text.encode()], "resolve", "T")
    assert out[0] == "path " + hexed(b'/m/\xff\xc3\xa9\xf0\x90\x82\x80\\udc80"/'), out
    huge = "/" + "a" * (900 * 1024)
    out, _ = call(probe, state, [line({**RESOLVED, "path": huge})], "resolve", "T")
    assert out == ["path " + hexed(huge), "stale 1"]


def test_c_resolve_request_escapes_the_token(probe, state):
    """The token goes out as one JSON string whatever it holds: the daemon
    reads back exactly the bytes the app passed."""
    token = 'a"b\\c/d\te\x01f'
    _, requests = call(probe, state, [line({"ok": False, "code": 65})], "resolve", token)
    assert len(requests) == 1 and requests[0].endswith(b"\n") and requests[0].count(b"\n") == 1
    assert json.loads(requests[0]) == {"op": "resolve", "bookmark": token}
    assert requests[0].startswith(b'{"op":"resolve","bookmark":"a\\"b\\\\c/d'), requests[0]


PICKED = {"ok": True, "picked": {"cancelled": False, "paths": ["Providers/local/a.txt", "Providers/local/b.txt"]}}


def test_c_pick_reads_answers(probe, state):
    """scopefs_pick(): the paths (in the app's view under $SCOPEFS_MOUNT);
    cancelled -> ECANCELED; the codes 64/69/75/77 -> EINVAL/ENXIO/ETIMEDOUT/
    EPERM; broken answers -> EPROTO. The request is docs/API.md's."""
    out, requests = call(probe, state, [line(PICKED)], "pick", mount="/mnt/app")
    assert out == ["path " + hexed("/mnt/app/Providers/local/a.txt"), "path " + hexed("/mnt/app/Providers/local/b.txt")]
    assert requests == [
        b'{"op":"pick","waitSeconds":600,"pick":{"mode":"open","allowsMultipleSelection":true,'
        b'"items":[],"contentTypes":[]}}\n'
    ]
    out, _ = call(probe, state, [line({"ok": True, "picked": {"cancelled": True}})], "pick")
    assert out == ["error ECANCELED"]
    out, _ = call(probe, state, [line({"ok": True, "picked": {"cancelled": False, "paths": []}})], "pick")
    assert out == []
    for code, name in ((64, "EINVAL"), (69, "ENXIO"), (75, "ETIMEDOUT"), (77, "EPERM"), (70, "EPROTO")):
        out, _ = call(probe, state, [line({"ok": False, "code": code})], "pick")
        assert out == [f"error {name}"], (code, out)
    broken = [
        {"ok": True},
        {"ok": True, "picked": []},
        {"ok": True, "picked": {"paths": "a"}},
        {"ok": True, "picked": {"paths": ["a", 5]}},
        {"ok": True, "picked": {"paths": ["a", None]}},
        {"ok": True, "picked": {"paths": [["a"]]}},
        {"ok": True, "picked": {"cancelled": "no", "paths": []}},
        {"ok": True, "picked": {"paths": ["a\u0000b"]}},
    ]
    for answer in broken:
        out, _ = call(probe, state, [line(answer)], "pick")
        assert out == ["error EPROTO"], (answer, out)
    out, _ = call(probe, state, [b'{"ok":true,"picked":{"paths":["a",'], "pick")
    assert out == ["error EPROTO"]


def test_c_pick_items_request(probe, state):
    """scopefs_pick_items(): the items go out in order, as JSON strings."""
    out, requests = call(probe, state, [line(PICKED)], "pick-items", "Documents/a.txt", 'Documents/"b"\n.txt')
    assert len(out) == 2
    assert json.loads(requests[0]) == {
        "op": "pick",
        "waitSeconds": 600,
        "pick": {
            "mode": "export",
            "allowsMultipleSelection": False,
            "items": ["Documents/a.txt", 'Documents/"b"\n.txt'],
            "contentTypes": [],
        },
    }


def test_c_coordination_reads_answers(probe, state):
    """scopefs_coordinate(): the claim; a claim that is missing, 0,
    negative, too large or not an integer -> EPROTO; the codes -> ETIMEDOUT,
    ENOENT, EPERM, EINVAL. scopefs_release(): 67 -> ESRCH."""
    out, requests = call(probe, state, [line({"ok": True, "claim": 12})], "coordinate", "Providers/local/a.txt")
    assert out == ["claim 12"]
    assert requests == [b'{"op":"coordinate","path":"Providers/local/a.txt","intent":"write","waitSeconds":1.000}\n']
    out, _ = call(probe, state, [line({"ok": True, "claim": 2**64 - 2})], "coordinate", "a")
    assert out == [f"claim {2**64 - 2}"]
    # json-c reads any number above 2**64 - 1 as 2**64 - 1: both are refused.
    for claim in (None, 0, -1, 1.5, "12", [12], 2**64 - 1, 2**64, 10**40):
        answer = {"ok": True} if claim is None else {"ok": True, "claim": claim}
        out, _ = call(probe, state, [line(answer)], "coordinate", "a")
        assert out == ["error EPROTO"], (claim, out)
    for code, name in ((75, "ETIMEDOUT"), (66, "ENOENT"), (77, "EPERM"), (64, "EINVAL"), (1, "EPROTO")):
        out, _ = call(probe, state, [line({"ok": False, "code": code})], "coordinate", "a")
        assert out == [f"error {name}"], (code, out)

    out, requests = call(probe, state, [line({"ok": True})], "release", "12")
    assert out == ["ok"] and requests == [b'{"op":"release","claim":12}\n']
    out, _ = call(probe, state, [line({"ok": False, "code": 67})], "release", "12")
    assert out == ["error ESRCH"]
    out, _ = call(probe, state, [b'{"ok":tru\n'], "release", "12")
    assert out == ["error EPROTO"]


def test_c_watch_reads_notices(probe, state):
    """scopefs_watch(): subscribes, then polls after the cursor; each notice
    reaches the handler (kind, path and oldPath in the app's view, grant);
    an answer without notices for the whole timeout ends the watch."""
    notices = [
        {"kind": "moved", "path": "P/b.txt", "oldPath": "P/a.txt", "grant": 3},
        {"kind": "appeared", "path": "P/\udcff"},
    ]
    answers = [
        line({"ok": True, "cursor": 41, "notices": []}),
        line({"ok": True, "cursor": 43, "notices": notices}),
        line({"ok": True, "cursor": 43, "notices": []}),
    ]
    out, requests = call(probe, state, answers, "watch", "1", mount="/mnt/app")
    assert out == [
        f"notice {hexed('moved')} {hexed('/mnt/app/P/b.txt')} {hexed('/mnt/app/P/a.txt')} 3",
        f"notice {hexed('appeared')} {hexed(b'/mnt/app/P/' + bytes([0xFF]))} - 0",
        "ok",
    ], out
    assert requests == [
        b'{"op":"watch"}\n',
        b'{"op":"watch","after":41,"waitSeconds":1.000}\n',
        b'{"op":"watch","after":43,"waitSeconds":1.000}\n',
    ]


@pytest.mark.parametrize(
    "answer",
    [
        {"ok": True, "cursor": "41", "notices": []},
        {"ok": True, "cursor": -1},
        {"ok": True, "cursor": 42, "notices": {}},
        {"ok": True, "cursor": 42, "notices": ["moved"]},
        {"ok": True, "cursor": 42, "notices": [{"kind": 1, "path": "a"}]},
        {"ok": True, "cursor": 42, "notices": [{"kind": "moved", "path": ["a"]}]},
        {"ok": True, "cursor": 42, "notices": [{"kind": "moved", "path": "a", "oldPath": 7}]},
        {"ok": True, "cursor": 42, "notices": [{"kind": "moved", "path": "a", "grant": "3"}]},
        {"ok": True, "cursor": 42, "notices": [{"kind": "moved", "path": "a", "grant": 2**63}]},
        {"ok": True, "cursor": 42, "notices": [{"kind": "moved", "path": "a", "grant": -(2**63)}]},
        {"ok": True, "cursor": 42, "notices": [{"kind": "moved", "path": "a", "grant": -(10**30)}]},
        {"ok": "yes"},
    ],
)
def test_c_watch_reads_a_broken_answer_as_eproto(probe, state, answer):
    """A broken poll answer ends scopefs_watch() with -1 and EPROTO; the
    handler heard nothing of it. A refusal ({"ok": false}) is EPERM."""
    first = line({"ok": True, "cursor": 41, "notices": []})
    out, _ = call(probe, state, [first, line(answer)], "watch", "1")
    assert out == ["error EPROTO"], out
    out, _ = call(probe, state, [line({"ok": False, "code": 77})], "watch", "1")
    assert out == ["error EPERM"]


def test_c_query_reads_results(probe, state):
    """scopefs_query(): the first answer's results, finishedGathering, then
    the changes against the digest; paths in the app's view."""
    a = {
        "url": "P/a.txt",
        "urlInLocalContainer": "C/a.txt",
        "containerDisplayName": "Local",
        "isExternalDocument": True,
    }
    b = {
        "url": "P/b.txt",
        "urlInLocalContainer": "C/b.txt",
        "containerDisplayName": "Local",
        "isExternalDocument": False,
    }
    answers = [
        line({"ok": True, "digest": "d1", "results": [a]}),
        line({"ok": True, "digest": "d2", "results": [{**a, "containerDisplayName": "Other"}, b]}),
        line({"ok": True, "digest": "d2", "results": [{**a, "containerDisplayName": "Other"}, b]}),
    ]
    out, requests = call(probe, state, answers, "query", "0.5", "*.txt", mount="/m")
    assert out[:4] == [
        "query result " + " ".join([hexed("/m/P/a.txt"), hexed("/m/C/a.txt"), hexed("Local"), "1"]),
        "query finishedGathering",
        "query changed " + " ".join([hexed("/m/P/a.txt"), hexed("/m/C/a.txt"), hexed("Other"), "1"]),
        "query added " + " ".join([hexed("/m/P/b.txt"), hexed("/m/C/b.txt"), hexed("Local"), "0"]),
    ], out
    assert out[-1] == "ok"
    assert requests[0] == b'{"op":"query","scope":"all","name":"*.txt","waitSeconds":0.000}\n'
    assert requests[1] == b'{"op":"query","scope":"all","name":"*.txt","digest":"d1","waitSeconds":0.500}\n'


@pytest.mark.parametrize(
    "answer",
    [
        {"ok": True, "results": {}},
        {"ok": True, "results": ["P/a.txt"]},
        {"ok": True, "results": [{"url": 5}]},
        {"ok": True, "results": [{"url": "a", "isExternalDocument": "yes"}]},
        {"ok": True, "results": [{"url": "a"}, {"urlInLocalContainer": ["C/a"]}]},
        {"ok": True, "digest": 7, "results": []},
        {"ok": False, "code": 70},
    ],
)
def test_c_query_reads_a_broken_answer_as_eproto(probe, state, answer):
    """A broken first answer fails scopefs_query() with EPROTO before the
    handler hears anything (77 -> EPERM, 64 -> EINVAL)."""
    out, _ = call(probe, state, [line(answer)], "query", "0")
    assert out == ["error EPROTO"], out
    out, _ = call(probe, state, [line({"ok": False, "code": 64})], "query", "0")
    assert out == ["error EINVAL"]


def test_c_calls_without_a_daemon(probe, state):
    """No socket: ECONNREFUSED from every call (scopefs.h)."""
    for args in (("resolve", "T"), ("pick",), ("coordinate", "a"), ("release", "1"), ("watch", "0"), ("query", "0")):
        p = run_bounded([probe, state, *args], 60, {**os.environ, **SANITIZER_ENV}, what="answer_probe")
        assert p.returncode == 0 and p.stdout.splitlines() == ["error ECONNREFUSED"], describe(p)
