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
}
