"""`scopefs test SCENARIO -- CMD` (issue 18): a timeline of steps (at a
time, or when the app prints a text) and expectations checked after the
run; exit 0 when all hold, 1 naming the failed one, 65 for a bad scenario;
JUnit XML for CI."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET

import pytest
from scopefs_harness import ALPHA, LOCAL, REPO_ROOT, RUNNERS, confines_by_default, describe, snippet

pytestmark = pytest.mark.sqlite_store(RUNNERS)

EXAMPLES = REPO_ROOT / "docs" / "examples" / "scenarios"
SCENARIO = EXAMPLES / "revoke-while-open.yaml"


def scopefs_test(env, scenario, *cmd, extra=()):
    view = ["--no-sandbox"] if confines_by_default() else []
    return env.cli("test", scenario, "--app", ALPHA, *view, *extra, "--", *cmd, expect=None, timeout=60)


def check_junit(path, failures: int) -> list:
    """The JUnit shape CI systems read: testsuites > testsuite > testcase,
    counts in attributes, a <failure message=...> per failed case."""
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    cases = suites[0].findall("testcase")
    assert int(suites[0].get("tests")) == len(cases) == int(root.get("tests"))
    failed = [c for c in cases if c.find("failure") is not None]
    assert int(suites[0].get("failures")) == len(failed) == failures
    for case in failed:
        assert case.find("failure").get("message"), ET.tostring(case)
    for case in cases:
        assert case.get("name") and case.get("classname")
    assert suites[0].find("system-out") is not None
    return cases


def test_the_example_scenario_fails_on_the_buggy_app_and_passes_on_the_fixed_one(env):
    """Issue 18's "done when": the app that caches a descriptor crashes on
    EPERM after the scenario revokes its grant once it printed READY:
    `scopefs test` exits 1 naming the failed expectation (exit status) and
    writes JUnit XML with that failure; the fixed app passes (0), and its
    JUnit has no failure. The grant is active again after each run."""
    gid = env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    junit = env.root / "buggy.xml"
    buggy = scopefs_test(
        env,
        SCENARIO,
        sys.executable,
        EXAMPLES / "cached_descriptor_buggy.py",
        "Providers/local/docs/report.txt",
        extra=("--junit", junit),
    )
    assert buggy.returncode == 1, describe(buggy)
    assert "FAIL exit status is 0: it was 1" in buggy.stdout, buggy.stdout
    assert "FAIL the app printed 'lost access'" in buggy.stdout, buggy.stdout
    assert "PermissionError" in buggy.stderr
    cases = check_junit(junit, failures=3)  # exit, prints, the open denial never came
    assert any(c.get("name") == "exit status is 0" and c.find("failure") is not None for c in cases)
    # Issue 31, point 5: the cases carry the run's time, and the app's
    # traceback is in the report (it explains the failure).
    assert sum(float(c.get("time")) for c in cases) > 0
    suite = ET.parse(junit).getroot().find("testsuite")
    assert "PermissionError" in suite.find("system-err").text
    states = {row["grant"]: row["state"] for row in json.loads(env.cli("privacy", ALPHA, "--json").stdout)}
    assert states[int(gid)] == "active"

    junit = env.root / "fixed.xml"
    fixed = scopefs_test(
        env,
        SCENARIO,
        sys.executable,
        EXAMPLES / "cached_descriptor_fixed.py",
        "Providers/local/docs/report.txt",
        extra=("--junit", junit, "--json"),
    )
    assert fixed.returncode == 0, describe(fixed)
    report = json.loads(fixed.stdout)
    assert report["passed"] is True and report["exitStatus"] == 0
    # Issue 31, point 5: actions and events are objects in --json.
    assert [a["action"] for a in report["actions"]] == [f"revoke grant {gid} ({LOCAL}:docs)"]
    assert report["actions"][0]["at"] > 0 and report["actions"][0]["inForceMilliseconds"] >= 0
    assert {"revoke", "denial"} <= {e["kind"] for e in report["events"]}, report["events"]
    assert "lost access" in report["output"]
    check_junit(junit, failures=0)


LEAK_SCENARIO = EXAMPLES / "scope-leak.yaml"


def test_the_scope_leak_example_fails_on_the_buggy_app_and_passes_on_the_fixed_one(env):
    """Issue 18's second example: an app that starts accessing its document
    on every pass of a loop and stops once at the end. The scenario revokes
    the grant after the app's fifth start (`after: 5 starts of grant`); both
    versions notice (EPERM) and exit 0, but the buggy one exits with scopes
    still counted, a leak (SPEC S11): `scopefs test` exits 1 naming "no
    leaked scope" with the leak in its detail. The fixed one (`with
    scopefs.accessing`) passes."""
    env.base_env["PYTHONPATH"] = str(REPO_ROOT / "clients" / "python")
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    document = "Providers/local/docs/report.txt"
    buggy = scopefs_test(
        env, LEAK_SCENARIO, sys.executable, EXAMPLES / "scope_leak_buggy.py", document, extra=("--json",)
    )
    assert buggy.returncode == 1, describe(buggy)
    report = json.loads(buggy.stdout)
    failed = [e for e in report["expectations"] if not e["passed"]]
    assert [e["name"] for e in failed] == ["no leaked scope"], report["expectations"]
    assert "docs/report.txt x" in failed[0]["detail"], failed
    assert report["exitStatus"] == 0

    fixed = scopefs_test(env, LEAK_SCENARIO, sys.executable, EXAMPLES / "scope_leak_fixed.py", document)
    assert fixed.returncode == 0, describe(fixed)
    assert "ok   no leaked scope" in fixed.stdout, fixed.stdout


WAITER = """
import signal, time
path = sys.argv[1]
start_accessing(os.path.dirname(path), sys.argv[2])  # the granted folders (SPEC S9)
def stop(*_):
    print("stopping", flush=True)
    sys.exit(3)
signal.signal(signal.SIGTERM, stop)
end = time.monotonic() + 15
while time.monotonic() < end:
    if attempt(read_bytes, path) == "OK" and read_text(path) == "hello":
        print("SEEN", flush=True)
        break
    time.sleep(0.05)
# The scenario adds its fault on SEEN: opens succeed until it is in force.
end = time.monotonic() + 10
while (opened := attempt(read_bytes, sys.argv[2])) == "OK" and time.monotonic() < end:
    time.sleep(0.05)
print("open:", opened, flush=True)
time.sleep(15)  # not a wait: the app runs until the scenario stops it
"""

TIMELINE = """
name: timeline
timeout: 20s
steps:
  - at: 300ms
    write: {path: "local:work/note.txt", content: hello}
  - when: app prints SEEN
    fault: "open:EDQUOT"
  - when: app prints "open:"
    rename: {from: "local:work/note.txt", to: "local:work/moved.txt"}
  - when: app prints "open:"
    signal: TERM
expect:
  exit: 3
  prints: [SEEN, "open: EDQUOT", stopping]
  not_prints: Traceback
  files:
    - {path: "local:work/moved.txt", content: hello}
  denials: {at_most: 0}
  no_unbalanced_stop: true
"""


def test_a_timeline_of_host_changes_faults_and_signals(env):
    """Steps at a time and on the app's output: a host write the app then
    sees, a fault rule it meets on its next open, a host rename, SIGTERM;
    every expectation kind but leaks holds, so the run passes (0). The
    same scenario with a wrong expectation fails (1) and names it."""
    env.grant(ALPHA, f"{LOCAL}:work")
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    scenario = env.root / "timeline.yaml"
    scenario.write_text(TIMELINE)
    cmd = [
        sys.executable,
        "-c",
        snippet(WAITER),
        env.prov(ALPHA, LOCAL, "work/note.txt"),
        env.prov(ALPHA, LOCAL, "docs/report.txt"),
    ]
    p = scopefs_test(env, scenario, *cmd)
    assert p.returncode == 0, describe(p)
    assert json.loads(env.cli("fault", "list", "--json").stdout) == []
    assert (env.backing(LOCAL) / "work/moved.txt").read_text() == "hello"
    (env.backing(LOCAL) / "work/moved.txt").unlink()
    scenario.write_text(TIMELINE.replace("exit: 3", "exit: 4"))
    p = scopefs_test(env, scenario, *cmd)
    assert p.returncode == 1, describe(p)
    assert "FAIL exit status is 4: it was 3" in p.stdout, p.stdout


COUNTED_READS = """
import time
start_accessing(os.path.dirname(sys.argv[1]))  # the granted folder (SPEC S9)
for index, path in enumerate(sys.argv[1:]):
    got = attempt(read_bytes, path)
    if got != "OK":
        print(f"denied at {index}: {got}", flush=True)
        break
    time.sleep(0.15)  # the pace of the reads the scenario counts, not a wait
"""

AFTER_READS = """
steps:
  - after: 5 reads of Providers/local/work/f*
    revoke: local:work
expect:
  exit: 0
  prints: "denied at"
"""


def test_a_step_after_n_reads_of_a_glob(env):
    """`after: 5 reads of GLOB` fires once the daemon served the app five
    reads of matching files (each file is new, so each read reaches the
    daemon): the app's sixth or seventh read is the first denied (EPERM),
    the counting rule is gone afterwards, and `fault list` counted hits."""
    for index in range(12):
        (env.backing(LOCAL) / f"work/f{index:02d}.txt").write_text(f"file {index}\n")
    env.grant(ALPHA, f"{LOCAL}:work")
    env.mount()
    scenario = env.root / "after.yaml"
    scenario.write_text(AFTER_READS)
    files = [env.prov(ALPHA, LOCAL, f"work/f{index:02d}.txt") for index in range(12)]
    p = scopefs_test(env, scenario, sys.executable, "-c", snippet(COUNTED_READS), *files)
    assert p.returncode == 0, describe(p)
    denied = [line for line in p.stderr.splitlines() if line.startswith("denied at ")]
    assert denied in (["denied at 5: EPERM"], ["denied at 6: EPERM"]), p.stderr
    assert json.loads(env.cli("fault", "list", "--json").stdout) == []


def test_bad_scenarios_are_refused_with_their_line(env):
    """An unknown key, an unknown step action, two triggers, a grant the
    app does not have: exit 65 with the file's line; nothing runs."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    cases = {
        "steps:\n  - at: 1s\n    revoke: local:docs\nexpect:\n  exitt: 0\n": (5, "unknown key 'exitt'"),
        "steps:\n  - at: 1s\n    explode: local:docs\n": (3, "unknown key 'explode'"),
        "steps:\n  - at: 1s\n    when: app prints X\n    revoke: local:docs\n": (2, "one trigger"),
        "steps:\n  - revoke: local:photos\n": (2, "no grant of local:photos"),
        '{"steps": [{"at": "1s", "signal": "KILLALL"}]}': (1, "signal:"),
    }
    for index, (text, (line, words)) in enumerate(cases.items()):
        path = env.root / f"bad{index}.yaml"
        path.write_text(text)
        p = scopefs_test(env, path, "true")
        assert p.returncode == 65, describe(p)
        assert f"bad{index}.yaml:{line}:" in p.stderr or f"bad{index}:{line}:" in p.stderr, (text, p.stderr)
        assert words in p.stderr, (text, p.stderr)


RUN_TEST_INSIDE = """
import subprocess
binary, state, scenario = sys.argv[1], sys.argv[2], sys.argv[3]
p = subprocess.run([binary, "--state", state, "test", scenario, "--app", sys.argv[4], "--no-sandbox", "--", "true"],
                   capture_output=True, text=True, timeout=30)
emit([p.returncode, p.stderr.strip()[-200:]])
"""


def test_an_app_process_cannot_drive_a_scenario(env):
    """SPEC S5: `scopefs test` revokes, restores and injects faults as the
    owner, so inside an app process it exits 77 and does nothing."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    code, message = env.app_json(ALPHA, RUN_TEST_INSIDE, env.bin, env.state, SCENARIO, ALPHA)
    assert code == 77 and "app process" in message, (code, message)


def test_an_unwritable_junit_path_fails_before_the_run(env):
    """Issue 31, point 5: `--junit` into a missing folder exits 74 at once,
    naming the path, and the app never runs (it would leave a marker)."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    marker = env.root / "ran"
    bad = env.root / "no-such-folder" / "report.xml"
    p = scopefs_test(env, SCENARIO, "sh", "-c", f"touch {marker}", extra=("--junit", bad))
    assert p.returncode == 74 and str(bad) in p.stderr, describe(p)
    assert not marker.exists()


def deep_scenarios(levels: int) -> dict[str, tuple[str, int]]:
    """A scenario nested LEVELS deep as a YAML list, a YAML map and JSON
    (a list and an object), with the line at which the nesting passes
    the limit (64, docs/CLI.md) in each."""
    return {
        "list.yaml": ("steps:\n" + "".join("  " * i + "-\n" for i in range(levels)) + "  " * levels + "x\n", 65),
        "inline.yaml": ("steps:\n  - " + "- " * levels + "x\n", 2),
        "map.yaml": (
            "expect:\n" + "".join("  " * (i + 1) + "k:\n" for i in range(levels)) + "  " * levels + "  x\n",
            65,
        ),
        "list.json": ('{"steps": ' + "[" * levels + "]" * levels + "}\n", 1),
        "map.json": (
            '{"expect":\n' + "".join(" " * i + '{"k":\n' for i in range(levels)) + "1" + "}" * levels + "}\n",
            64,
        ),
    }


def test_a_scenario_nested_too_deep_is_refused_before_it_is_parsed(env):
    """Issue 46, finding 5a: a scenario nested 5,000 levels deep (a YAML
    list or map, or JSON) crashed `scopefs test` with SIGSEGV in the YAML
    parser's recursion; the nesting is measured before the parse, so it
    exits 65 naming the limit and the line (SPEC S34: never a crash)."""
    wrong = {}
    for name, (text, line) in deep_scenarios(5000).items():
        path = env.root / name
        path.write_text(text)
        p = scopefs_test(env, path, "true")
        named = f"{name}:{line}:" in p.stderr and "64 levels" in p.stderr
        if p.returncode != 65 or not named or "Backtrac" in p.stderr:
            wrong[name] = (p.returncode, p.stderr[:300])
    assert not wrong, wrong


CRASHER = """
print("READY", flush=True)
raise RuntimeError("the document went away")
"""

OUTPUT_CHECKS = """
name: output-checks
timeout: 20s
expect:
{checks}
"""


def test_output_checks_read_standard_error_too(env):
    """Issue 48, finding 1: `prints` and `not_prints` read the app's
    standard output and its standard error, so a Python traceback (on
    stderr) fails `not_prints: Traceback`; `{stdout: TEXT}` and `{stderr:
    TEXT}` choose one stream. Before, the crashing app passed
    `not_prints: Traceback` ("ok the app did not print 'Traceback'")."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    scenario = env.root / "output.yaml"
    cmd = (sys.executable, "-c", CRASHER)

    def run(checks: str):
        scenario.write_text(OUTPUT_CHECKS.format(checks=checks))
        p = scopefs_test(env, scenario, *cmd, extra=("--json",))
        assert p.returncode in (0, 1), describe(p)
        report = json.loads(p.stdout)
        return p.returncode, {e["name"]: e for e in report["expectations"]}

    code, checks = run("  not_prints: Traceback")
    assert code == 1, checks
    [check] = [e for name, e in checks.items() if "Traceback" in name]
    assert check["passed"] is False and "standard error" in check["detail"], check
    assert "RuntimeError" in check["detail"] or "Traceback" in check["detail"], check

    code, checks = run(
        "  prints: [READY, {stderr: RuntimeError}, {stdout: READY}]\n"
        "  not_prints: [{stdout: Traceback}, {stderr: READY}]"
    )
    assert code == 0, checks
    assert all(e["passed"] for e in checks.values()), checks
    assert any("on standard error" in name for name in checks), checks

    code, checks = run("  prints: {stdout: RuntimeError}")
    assert code == 1, checks

    scenario.write_text(OUTPUT_CHECKS.format(checks="  prints: {stdout: a, stderr: b}"))
    p = scopefs_test(env, scenario, *cmd)
    assert p.returncode == 65 and "output.yaml:5:" in p.stderr, describe(p)


def test_report_details_match_their_outcome_and_events_are_in_time_order(env):
    """Issue 48, finding 4: in `--json`, a passing check's detail says what
    happened (not "the app still ran after 20.0 s and was killed" on a
    check that passed), events are listed by the time they happened, not
    in the order they reached the log (the daemon writes denials in
    batches, after a revoke recorded at once), and times have
    milliseconds in the text report's events as in JSON."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    document = "Providers/local/docs/report.txt"
    p = scopefs_test(
        env, SCENARIO, sys.executable, EXAMPLES / "cached_descriptor_fixed.py", document, extra=("--json",)
    )
    assert p.returncode == 0, describe(p)
    report = json.loads(p.stdout)
    bad = [e for e in report["expectations"] if not e["detail"] or (e["passed"] and "killed" in e["detail"])]
    assert not bad, report["expectations"]
    [timeout] = [e for e in report["expectations"] if "(timeout)" in e["name"]]
    assert timeout["passed"] and "ended" in timeout["detail"], timeout
    times = [e["time"] for e in report["events"]]
    assert len(times) >= 2 and times == sorted(times), report["events"]
    assert all(len(t) == len("2026-11-23T18:06:34.120Z") for t in times), times

    p = scopefs_test(env, SCENARIO, sys.executable, EXAMPLES / "cached_descriptor_buggy.py", document)
    assert p.returncode == 1, describe(p)
    lines = p.stdout.split("events of the run:\n", 1)[1].splitlines()
    stamps = [line.split()[0] for line in lines]
    assert stamps and all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", s) for s in stamps), lines
    assert stamps == sorted(stamps), lines


CACHED_READER = """
import time
import scopefs
with scopefs.accessing(sys.argv[1]):
    fd = os.open(sys.argv[1], os.O_RDONLY)
    print("READY", flush=True)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            os.pread(fd, 64, 0)
        except PermissionError:
            print("read denied", flush=True)
            break
        time.sleep(0.05)
    os.close(fd)
"""

CACHED_READ_DENIALS = """
timeout: 20s
steps:
  - when: app prints READY
    revoke: local:docs
expect:
  exit: 0
  prints: {stdout: read denied}
  denials: {at_least: 1}
  not_prints: Traceback
"""


def test_a_denied_read_on_a_cached_descriptor_is_counted(env):
    """Issue 48, finding 3: after a revoke, a read on a descriptor opened
    before it is refused (EPERM, SPEC S14) and recorded as a denial event
    (SPEC S29), so `denials: {at_least: 1}` holds for an app that never
    opens anything after the revoke; the denial names the read."""
    env.base_env["PYTHONPATH"] = str(REPO_ROOT / "clients" / "python")
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    scenario = env.root / "cached.yaml"
    scenario.write_text(CACHED_READ_DENIALS)
    cmd = (sys.executable, "-c", snippet(CACHED_READER), env.prov(ALPHA, LOCAL, "docs/report.txt"))
    p = scopefs_test(env, scenario, *cmd, extra=("--json",))
    report = json.loads(p.stdout)
    assert p.returncode == 0, (report["expectations"], report["events"], p.stderr[-2000:])
    denials = [e for e in report["events"] if e["kind"] == "denial"]
    assert denials and {e["operation"] for e in denials} == {"read"}, denials
    # The process that read is named (S29: an event carries its pid).
    assert all(isinstance(e.get("pid"), int) and e["pid"] > 0 for e in denials), denials
