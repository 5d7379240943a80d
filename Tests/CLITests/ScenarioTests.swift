import Foundation
import Glibc
import Policy
import Testing

@testable import ScopeFSCLI

/// `scopefs test`'s scenario files and JUnit output (issue 18), without a mount.
@Suite struct ScenarioTests {
    func error(_ text: String) -> ScenarioError? {
        do {
            _ = try Scenario.parse(text, name: "s")
            return nil
        } catch let error as ScenarioError {
            return error
        } catch {
            return ScenarioError(line: nil, message: "\(error)")
        }
    }

    @Test("every step and expectation kind parses, from YAML")
    func yaml() throws {
        let scenario = try Scenario.parse(
            """
            name: all
            app: a
            timeout: 30s
            steps:
              - at: 500ms
                revoke: local:docs
              - when: 'app prints "ready: yes"'
                restore: local:docs
              - at: 1
                rename: {from: "local:a", to: "local:b"}
              - delete: local:b
              - write: {path: "local:c", content: hi}
              - fault: read:EIO:5%
              - latency: open:20ms
              - signal: SIGTERM
              - after: 100 reads of Providers/local/docs/*
                revoke: local:docs
              - after: 1 open of x
                revoke: local:docs
            expect:
              exit: 3
              no_leaked_scope: true
              no_unbalanced_stop: true
              denials: {at_least: 1, at_most: 4, op: read}
              prints: [x, y]
              not_prints: Traceback
              files: [{path: "local:c", content: hi}]
              within: 2m
            """, name: "file")
        #expect(scenario.name == "all" && scenario.app == "a" && scenario.timeout == 30)
        #expect(
            scenario.steps.map(\.trigger) == [
                .at(0.5), .prints("ready: yes"), .at(1), .at(0), .at(0), .at(0), .at(0), .at(0),
                .after(count: 100, operation: "read", glob: "Providers/local/docs/*"),
                .after(count: 1, operation: "open", glob: "x"),
            ])
        #expect(scenario.steps.map(\.line) == [5, 7, 9, 11, 12, 13, 14, 15, 16, 18])
        #expect(scenario.steps[2].action == .rename(from: "local:a", to: "local:b"))
        #expect(scenario.steps[5].action == .fault(FaultRule(operation: "read", errno: EIO, percent: 5)))
        #expect(scenario.steps[7].action == .signal(SIGTERM, "TERM"))
        #expect(scenario.expect.exit == 3 && scenario.expect.noLeakedScope && scenario.expect.noUnbalancedStop)
        #expect(scenario.expect.denials == .init(atLeast: 1, atMost: 4, operation: "read"))
        #expect(scenario.expect.prints == ["x", "y"] && scenario.expect.notPrints == ["Traceback"])
        #expect(scenario.expect.files.map(\.content) == ["hi"] && scenario.expect.within == 120)
    }

    @Test("prints and not_prints take a text for both streams, or stdout: / stderr: (issue 48)")
    func outputChecks() throws {
        let scenario = try Scenario.parse(
            """
            expect:
              prints: [a, {stdout: b}, {stderr: [c, d]}]
              not_prints: {stderr: Traceback}
            """, name: "file")
        #expect(
            scenario.expect.prints == [
                "a", .init(text: "b", stream: .stdout), .init(text: "c", stream: .stderr),
                .init(text: "d", stream: .stderr),
            ])
        #expect(scenario.expect.notPrints == [.init(text: "Traceback", stream: .stderr)])
        for bad in ["{stdout: a, stderr: b}", "{stdin: a}", "[{}]"] {
            #expect(throws: ScenarioError.self) { try Scenario.parse("expect:\n  prints: \(bad)\n", name: "f") }
        }
        let traceback = ScenarioRunner.find(
            "Traceback", output: "READY\n", errors: "x\nTraceback (most recent call last):\n")
        #expect(traceback == "standard error: \"Traceback (most recent call last):\"")
        #expect(ScenarioRunner.find(.init(text: "Traceback", stream: .stdout), output: "", errors: "Traceback") == nil)
        #expect(ScenarioRunner.find(.init(text: "READY", stream: .stdout), output: "READY\n", errors: "") != nil)
    }

    @Test("the report lists events by the time they happened, to the millisecond (issue 48)")
    func eventOrder() {
        // As the log holds them: the revoke first, the daemon's batch of denials after.
        let logged = [
            Event(time: 1_800_000_000.372, kind: .revoke, app: "a", grant: 1),
            Event(time: 1_800_000_000.346, kind: .denial, app: "a", path: "x", operation: "read", errno: EPERM),
            Event(time: 1_800_000_000.346, kind: .start, app: "a"),
        ]
        let ordered = ScenarioRunner.inTimeOrder(logged)
        #expect(ordered.map(\.kind) == [.denial, .start, .revoke], "by time; a tie keeps the log's order")
        let line = EventsCommand.line(ordered[0], names: .none, milliseconds: true)
        #expect(line.hasPrefix("2027-01-15T08:00:00.346Z\t"), "\(line)")
        #expect(EventsCommand.line(ordered[0], names: .none).hasPrefix("2027-01-15T08:00:00Z\t"))
    }

    @Test("JSON is read too, with its lines")
    func json() throws {
        let scenario = try Scenario.parse(
            "{\"steps\": [\n{\"at\": \"1s\", \"revoke\": \"local:x\"}\n], \"expect\": {\"exit\": 0}}", name: "j")
        #expect(scenario.steps.first?.action == .revoke("local:x"))
        #expect(error("{\"steps\": [\n{\"at\": \"1s\",\n \"revok\": \"local:x\"}]}")?.line == 3)
    }

    @Test("mistakes name their line and what is allowed")
    func mistakes() {
        let unknown = error("steps:\n  - at: 1s\n    revoke: local:x\nexpect:\n  exitt: 0\n")
        #expect(unknown?.line == 5)
        #expect(unknown?.message.contains("unknown key 'exitt'") == true)
        #expect(unknown?.message.contains("no_leaked_scope") == true)
        #expect(
            error("steps:\n  - at: 1s\n    when: app prints X\n    revoke: local:x\n")?.message.contains("one trigger")
                == true)
        #expect(error("steps:\n  - at: 1s\n")?.message.contains("none") == true)
        #expect(error("steps:\n  - at: soon\n    revoke: local:x\n")?.line == 2)
        #expect(
            error("steps:\n  - after: 3 reads x\n    revoke: local:x\n")?.message.contains("N OPERATIONs of GLOB")
                == true)
        #expect(error("steps:\n  - after: 3 frobs of x\n    revoke: local:x\n")?.line == 2)
        #expect(error("steps:\n  - revoke: docs\n")?.message.contains("PROVIDER:RELPATH") == true)
        #expect(error("steps:\n  - fault: read:EWHAT\n")?.line == 2)
        #expect(error("steps:\n  - signal: KILL\n")?.line == 2)
        #expect(error("bogus: 1\n")?.line == 1)
        #expect(error("")?.message == "the scenario is empty")
    }

    @Test("start triggers, forget, answer-pick, recreate and the stale-bookmark expectation parse")
    func newerSteps() throws {
        let scenario = try Scenario.parse(
            """
            steps:
              - after: first start of grant local:docs
                forget: local:docs
              - after: 3 starts of grant local:.
                recreate: local:docs/a.txt
              - answer-pick: {choose: local:docs/a.txt, read_only: true, wait: 200ms}
              - answer-pick: {choose: [local:a, local:b]}
              - answer-pick: cancel
            expect:
              stale_bookmark_resolved: true
            """, name: "s")
        #expect(
            scenario.steps.map(\.trigger) == [
                .starts(count: 1, grant: "local:docs"), .starts(count: 3, grant: "local:."), .at(0), .at(0), .at(0),
            ])
        #expect(
            scenario.steps.map(\.action) == [
                .forget("local:docs"), .recreate("local:docs/a.txt"),
                .answerPick(AgentScript.Step(choose: ["local:docs/a.txt"], readOnly: true, waitMs: 200)),
                .answerPick(AgentScript.Step(choose: ["local:a", "local:b"])),
                .answerPick(AgentScript.Step(cancel: true)),
            ])
        #expect(scenario.expect.staleBookmarkResolved == true)
        for (text, line, words) in [
            ("steps:\n  - answer-pick: {choose: local:a, app: other}\n", 2, "unknown key 'app'"),
            ("steps:\n  - answer-pick: {}\n", 2, "either choose items or cancel"),
            ("steps:\n  - answer-pick: {choose: local:a, cancel: true}\n", 2, "either choose items or cancel"),
            ("steps:\n  - answer-pick: later\n", 2, "'cancel' or a mapping"),
            ("\nsteps:\n  - after: second start of grant local:a\n    revoke: local:a\n", 3, "after:"),
            ("steps:\n  - after: 2 starts of local:a\n    revoke: local:a\n", 2, "after:"),
            ("steps:\n  - after: 2 starts of grant docs\n    revoke: local:a\n", 2, "after:"),
        ] {
            let failure = error(text)
            #expect(failure?.line == line, "\(text)")
            #expect(failure?.message.contains(words) == true, "\(text): \(failure?.message ?? "no error")")
        }
    }

    @Test("JUnit XML escapes names and counts failures")
    func junit() {
        let report = TestCommand.Report(
            scenario: "a<b", passed: false, seconds: 1.5, exitStatus: 1,
            expectations: [
                .init(name: "exit status is 0", passed: false, detail: "it was \"1\" & \u{1b}"),
                .init(name: "no leaked scope", passed: true, detail: ""),
            ],
            actions: [.init(at: 0.1, action: "revoke grant 1 (local:x)")], events: [],
            output: "READY <1>", errorOutput: "Traceback & more", eventLines: ["event <x>"])
        let xml = JUnitReport.xml(report)
        #expect(xml.contains("failures=\"1\""))
        #expect(xml.contains("name=\"a&lt;b\""))
        #expect(xml.contains("message=\"it was &quot;1&quot; &amp; \u{FFFD}\""))
        // Two cases share the run's 1.5 s (issue 31).
        #expect(xml.contains("<testcase classname=\"scopefs.a&lt;b\" name=\"no leaked scope\" time=\"0.750\"/>"))
        #expect(xml.contains("event &lt;x&gt;"))
        #expect(xml.contains("action +0.100s revoke grant 1 (local:x)"))
        #expect(xml.contains("READY &lt;1&gt;"))
        #expect(xml.contains("<system-err>Traceback &amp; more</system-err>"))
        #expect(xml.components(separatedBy: "<testcase ").count == 3)
        #expect(xml.components(separatedBy: "<failure ").count == 2)
    }

    /// Issue 46, 5a: the nesting is measured before Yams recurses.
    func depthError(_ text: String) -> ScenarioError? {
        do {
            try ScenarioDepth.check(text)
            return nil
        } catch {
            return error
        }
    }

    @Test("nesting past the limit is refused at its line, before the parse; the limit itself passes")
    func depthLimit() {
        let limit = ScenarioDepth.limit
        func map(_ levels: Int) -> String {
            (0..<levels).map { String(repeating: "  ", count: $0) + "k:\n" }.joined()
        }
        #expect(depthError(map(limit)) == nil)
        #expect(depthError(map(limit + 1))?.line == limit + 1)
        #expect(depthError(map(limit + 1))?.message.contains("\(limit) levels") == true)
        // Flow collections, and JSON, on one line.
        #expect(depthError(String(repeating: "[", count: limit - 1))?.line == nil)
        #expect(depthError(String(repeating: "[", count: limit + 1))?.line == 1)
        #expect(depthError("{\"a\":" + String(repeating: "{\"k\":", count: limit) + "1}")?.line == 1)
        // `- - - x`: sequences in sequences on one line.
        #expect(depthError("- " + String(repeating: "- ", count: limit) + "x\n")?.line == 1)
        // An indentless sequence under each key is a level of its own.
        let indentless = (0..<(limit / 2 + 1)).map {
            String(repeating: "  ", count: $0) + "- k:\n"
        }.joined()
        #expect(depthError("top:\n" + indentless) != nil)
        // The error surfaces through parse, before Yams sees the text.
        do {
            _ = try Scenario.parse(map(5000), name: "s")
            Issue.record("a 5,000-deep scenario parsed")
        } catch let error as ScenarioError {
            #expect(error.line == limit + 1)
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test("what hides brackets and indentation is not nesting: quotes, comments, text, block scalars")
    func depthNotFooled() {
        let deepText = String(repeating: "[{", count: 200)
        #expect(depthError("name: '\(deepText)'\n") == nil)
        #expect(depthError("name: \"\(deepText)\\\" \(deepText)\"\n") == nil)
        #expect(depthError("name: x # \(deepText)\n") == nil)
        #expect(depthError("name: a\(deepText)\n") == nil)
        #expect(depthError("name: don't \(deepText)\n") == nil)
        let stairs = (0..<200).map { String(repeating: " ", count: 8 + $0) + "text\n" }.joined()
        let write = "steps:\n  - write:\n      path: x\n      content: |\n"
        #expect(depthError(write + stairs + "expect:\n  exit: 0\n") == nil)
        // A quote that spans lines hides what is inside it, and ends.
        #expect(depthError("name: \"a\n \(deepText)\n b\"\napp: x\n") == nil)
        #expect(depthError("name: \"a\n b\"\napp: \(String(repeating: "[", count: 100))\n") != nil)
        // But a quote inside a plain scalar does not hide what follows it.
        #expect(depthError("name: it's\napp: \(String(repeating: "[", count: 100))\n") != nil)
        // After a block scalar, structure counts again.
        #expect(depthError("name: |\n  text\napp: \(String(repeating: "[", count: 100))\n") != nil)
    }

    @Test("the example scenarios are far from the limit")
    func examplesWithinDepth() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/examples/scenarios").standardized
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".yaml") }
        #expect(!names.isEmpty)
        for name in names {
            let text = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
            #expect(depthError(text) == nil, "\(name)")
            #expect(depthError(text, limit: 8) == nil, "\(name)")
        }
    }

    /// Issue 48: `stale_bookmark_resolved` holds for an app that keeps a
    /// stale bookmark; `renews_stale_bookmarks` fails it (SPEC S26).
    @Test func aBookmarkResolvedStaleTwiceWasNotRenewed() throws {
        let scenario = try Scenario.parse("expect:\n  renews_stale_bookmarks: true\n", name: "s")
        #expect(scenario.expect.renewsStaleBookmarks)
        func stale(_ path: String, _ times: Int) -> Event {
            Event(time: 1, kind: .staleBookmark, app: "a", path: path, operation: "resolve", occurrences: times)
        }
        let renewed = ScenarioRunner.renewedStaleBookmarks([stale("/a/x", 1), stale("/a/y", 1)])
        #expect(renewed.passed && renewed.detail == "2 stale resolutions, none twice of one item")
        let kept = ScenarioRunner.renewedStaleBookmarks([stale("/a/x", 1), stale("/a/y", 1), stale("/a/x", 1)])
        #expect(!kept.passed && kept.detail == "/a/x resolved stale 2 times: the bookmark was not renewed")
        #expect(!ScenarioRunner.renewedStaleBookmarks([stale("/a/x", 3)]).passed)
        #expect(ScenarioRunner.renewedStaleBookmarks([]).passed)
    }

    func depthError(_ text: String, limit: Int) -> ScenarioError? {
        do {
            try ScenarioDepth.check(text, limit: limit)
            return nil
        } catch {
            return error
        }
    }
}
