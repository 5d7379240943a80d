"""No false greens, by construction (issue 48): the corpus of buggy apps
(Tests/integration/buggy_apps, docs/SCENARIOS.md "The corpus of buggy
apps"), one app per bug a revocation test exists to catch and its fixed
twin, in Python, C and Swift, is judged by the three clients an app
developer has: `scopefs test` with the pattern's scenario, the pytest
plugin and ScopeFSTesting. In the default sandbox, with default strict
scopes, every client must fail every buggy app and pass every fixed one;
the test prints the table (kept in docs/SCENARIOS.md). A client whose
check passes a buggy app fails here.

Cost: the C apps compile in a second; the Swift apps and the
ScopeFSTesting tests build once per run into REPO/.build-buggy-apps
(git-ignored); `scopefs test` runs every app on one mount; the three
clients run at the same time."""

from __future__ import annotations

import json
import os
import shutil
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from scopefs_harness import ALPHA, LOCAL, REPO_ROOT, RUNNERS, describe, mounts_under, run_bounded

sys.path.insert(0, str(Path(__file__).resolve().parent / "buggy_apps"))
import corpus  # noqa: E402

pytestmark = pytest.mark.sqlite_store(RUNNERS)

PYTHON_CLIENT = REPO_ROOT / "clients" / "python"
SWIFT_PACKAGE = corpus.HERE / "swift_apps"
SWIFT_SCRATCH = REPO_ROOT / ".build-buggy-apps"
SWIFT_BUILD_TIMEOUT = 1200  # a cold build of the client library takes minutes
TABLE_TIMEOUT = 400


def _build_env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONFAULTHANDLER", None)
    return env


def _swift() -> str:
    swift = os.environ.get("SWIFT") or shutil.which("swift")
    if not swift:
        pytest.skip("no `swift` on PATH (set SWIFT=/path/to/swift): the corpus has Swift apps and tests")
    return swift


@pytest.fixture(scope="module")
def c_apps(tmp_path_factory) -> Path:
    """The C apps of the corpus, each warning an error (no library: their
    scopes are plain extended attributes, docs/API.md)."""
    out = tmp_path_factory.mktemp("buggy-c-apps")
    os.chmod(out, 0o755)
    for pattern, language in corpus.ROWS:
        if language != "c":
            continue
        source = corpus.HERE / "c" / f"{pattern.module}.c"
        argv = [os.environ.get("CC", "cc"), "-Wall", "-Wextra", "-Werror", "-o", out / pattern.name, source]
        p = run_bounded(argv, 120, _build_env(), what=f"cc {source.name}")
        assert p.returncode == 0, describe(p)
    return out


@pytest.fixture(scope="module")
def swift_apps() -> Path:
    """`swift build --build-tests` of buggy_apps/swift_apps, once: the
    Swift apps and the ScopeFSTesting tests. Returns the products' folder."""
    argv = [_swift(), "build", "--build-tests", "--package-path", SWIFT_PACKAGE, "--scratch-path", SWIFT_SCRATCH]
    p = run_bounded(argv, SWIFT_BUILD_TIMEOUT, _build_env(), what="swift build of buggy_apps/swift_apps")
    assert p.returncode == 0, describe(p)
    q = run_bounded(argv + ["--show-bin-path"], 120, _build_env(), what="swift build --show-bin-path")
    return Path(q.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------
# the runner: `scopefs test SCENARIO -- APP`, every app on one mount


def reset_documents(env) -> None:
    """The document as every app expects it (a run may write or rename it)."""
    docs = env.backing(LOCAL) / "docs"
    (docs / "renamed.txt").unlink(missing_ok=True)
    (docs / "report.txt").write_text(corpus.CONTENT)


def run_with_runner(env, c_apps: Path, swift_apps: Path) -> dict:
    """Every app through `scopefs test --json` in the default sandbox: the
    outcome of each case (passed, and the names of the failed checks)."""
    env.grant(ALPHA, f"{LOCAL}:docs")
    env.mount()
    sandbox = [arg for path in corpus.exposed(c_apps, swift_apps, PYTHON_CLIENT) for arg in ("--expose", path)]
    sandbox += ["--env", f"PYTHONPATH={PYTHON_CLIENT}"]
    outcomes = {}
    for pattern, language in corpus.ROWS:
        for variant in corpus.VARIANTS:
            reset_documents(env)
            app = corpus.command(pattern, language, variant, c_apps, swift_apps)
            p = env.cli("test", pattern.scenario, "--app", ALPHA, *sandbox, "--json", "--", *app, expect=None)
            if p.returncode not in (0, 1):  # 65: a check of the scenario this binary does not have
                outcomes[corpus.case_id(pattern, language, variant)] = (False, [p.stderr.strip()], None)
                continue
            report = json.loads(p.stdout)
            failed = [e["name"] for e in report["expectations"] if not e["passed"]]
            outcomes[corpus.case_id(pattern, language, variant)] = (report["passed"], failed, report)
    return outcomes


# ---------------------------------------------------------------------------
# the pytest plugin: buggy_apps/plugin_tests.py, each case a test of its own


def run_with_plugin(env, c_apps: Path, swift_apps: Path) -> dict:
    """plugin_tests.py under `pytest -p scopefs_testing` in its own
    process (its worlds under the test's root): passed or not, per case,
    from its JUnit report."""
    junit = env.root / "plugin-corpus.xml"
    run_env = dict(
        env.base_env,
        PYTHONPATH=f"{PYTHON_CLIENT}:{corpus.HERE}",
        SCOPEFS_BIN=str(env.bin),
        TMPDIR=str(env.root),
        CORPUS_C_APPS=str(c_apps),
        CORPUS_SWIFT_APPS=str(swift_apps),
    )
    argv = [sys.executable, "-m", "pytest", "-p", "scopefs_testing", "-p", "no:cacheprovider", "-q"]
    argv += ["--rootdir", str(corpus.HERE), "--junitxml", str(junit), str(corpus.HERE / "plugin_tests.py")]
    p = run_bounded(argv, TABLE_TIMEOUT, run_env, out_dir=env.root, what="pytest of buggy_apps/plugin_tests.py")
    assert p.returncode in (0, 1) and junit.is_file(), describe(p)
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name")
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped") is not None
        why = None if problem is None else (problem.text or problem.get("message") or "")[-1500:]
        outcomes[name[name.index("[") + 1 : -1]] = (problem is None and not skipped, why, p)
    return outcomes


# ---------------------------------------------------------------------------
# ScopeFSTesting: swift_apps/Tests, each case an argument of a Swift Testing test


def run_with_swift_testing(env, c_apps: Path) -> dict:
    """`swift test` of the corpus package, as built: passed or not, per
    case, from Swift Testing's report (a case that recorded an issue failed;
    every case must have started)."""
    out = env.root / "swift-test-output"
    out.mkdir(exist_ok=True)
    run_env = dict(_build_env(), SCOPEFS_BIN=str(env.bin), TMPDIR=str(env.root), CORPUS_C_APPS=str(c_apps))
    argv = [_swift(), "test", "--skip-build", "--package-path", SWIFT_PACKAGE, "--scratch-path", SWIFT_SCRATCH]
    p = run_bounded(argv, TABLE_TIMEOUT, run_env, out_dir=out, what="swift test of buggy_apps/swift_apps")
    output = p.stdout + p.stderr
    outcomes = {}
    for line in output.splitlines():
        if "Test case passing 1 argument item → " in line and line.endswith("started."):
            outcomes.setdefault(line.split("item → ")[1].split()[0], (True, None, p))
    for line in output.splitlines():
        if "recorded an issue with 1 argument item → " in line:
            outcomes[line.split("item → ")[1].split()[0]] = (False, line, p)
    return outcomes


CLIENTS = ("scopefs test", "pytest plugin", "ScopeFSTesting")


def table(results: dict) -> str:
    """The corpus table of docs/SCENARIOS.md: per app, each client's
    verdict on the buggy app and on its fixed twin."""
    head = "| bug | language | " + " | ".join(f"{c}: buggy | fixed" for c in CLIENTS) + " | caught by (scopefs test) |"
    lines = [head, "|" + "---|" * (3 + 2 * len(CLIENTS))]
    for pattern, language in corpus.ROWS:
        cells = []
        for client in CLIENTS:
            for variant in corpus.VARIANTS:
                found = results[client].get(corpus.case_id(pattern, language, variant))
                cells.append("?" if found is None else "passes" if found[0] else "FAILS")
        buggy = results[CLIENTS[0]].get(corpus.case_id(pattern, language, "buggy"))
        caught = ", ".join(buggy[1]) if buggy else "?"
        lines.append(f"| {pattern.bug} | {language} | " + " | ".join(cells) + f" | {caught} |")
    return "\n".join(lines)


@pytest.mark.scopefs_timeout(TABLE_TIMEOUT + 60)
def test_every_client_fails_every_buggy_app_and_passes_every_fixed_one(env, c_apps, swift_apps):
    """Issue 48's "no false greens": each client runs every app of the
    corpus, buggy and fixed, in the default sandbox with strict scopes (the
    three at once: `scopefs test` on this test's mount, the pytest plugin
    and ScopeFSTesting each in a mount per test of their own). Every buggy
    app must fail, for `scopefs test` with the checks its pattern names;
    every fixed app must pass. The buggy descriptor and mapping readers'
    refused reads are denial events all the same (SPEC S14, S29, S47).
    Prints the table of docs/SCENARIOS.md."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = {
            CLIENTS[0]: pool.submit(run_with_runner, env, c_apps, swift_apps),
            CLIENTS[1]: pool.submit(run_with_plugin, env, c_apps, swift_apps),
            CLIENTS[2]: pool.submit(run_with_swift_testing, env, c_apps),
        }
        results = {client: run.result() for client, run in runs.items()}
    print("\n" + table(results))
    wrong = []
    for pattern, language in corpus.ROWS:
        for variant in corpus.VARIANTS:
            case = corpus.case_id(pattern, language, variant)
            for client in CLIENTS:
                found = results[client].get(case)
                if found is None:
                    wrong.append(f"{client}: {case} did not run")
                elif found[0] != (variant == "fixed"):
                    wrong.append(f"{client}: {case} {'passed' if found[0] else 'failed'}: {found[1]}")
            if variant == "buggy" and case in results[CLIENTS[0]]:
                failed = results[CLIENTS[0]][case][1]
                missing = [check for check in pattern.caught_by if check not in failed]
                if missing:
                    wrong.append(f"{CLIENTS[0]}: {case} passed {missing}")
                unseen = [check for check in pattern.holds if check in failed]
                if unseen:
                    wrong.append(f"{CLIENTS[0]}: {case} failed {unseen}: the daemon did not record it")
    assert not wrong, "\n".join(wrong) + "\n" + table(results)
    assert [m for m in mounts_under(env.root) if m != str(env.mnt)] == []


def test_the_corpus_and_its_table_are_kept_in_scenarios_md():
    """Every app of the corpus has its sources (a Python program per
    pattern, the C and Swift ones its languages name) and its scenario, and
    docs/SCENARIOS.md lists each pattern and shows the table the test
    above prints, each client failing the buggy app and passing the fixed."""
    text = (REPO_ROOT / "docs" / "SCENARIOS.md").read_text()
    missing = []
    for pattern, language in corpus.ROWS:
        source = {
            "python": corpus.HERE / "python" / f"{pattern.module}.py",
            "c": corpus.HERE / "c" / f"{pattern.module}.c",
            "swift": SWIFT_PACKAGE / "Sources" / pattern.name.title().replace("-", "") / "main.swift",
        }[language]
        row = f"| {pattern.bug} | {language} | " + " | ".join(["FAILS", "passes"] * len(CLIENTS)) + " |"
        missing += [str(path) for path in (source, pattern.scenario) if not path.is_file()]
        missing += [row] if row not in text else []
        missing += [pattern.name] if f"| `{pattern.name}` |" not in text else []
    assert not missing, missing
