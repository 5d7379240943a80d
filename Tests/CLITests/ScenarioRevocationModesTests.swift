import Policy
import Testing

@testable import ScopeFSCLI

/// The scenario steps of issue 48 (docs/SCENARIOS.md, "Revocation as other
/// systems do it", "Cloud storage that misbehaves on cue"), without a mount.
@Suite struct ScenarioRevocationModesTests {
    func steps(_ text: String) throws -> [Scenario.Step] { try Scenario.parse(text, name: "s").steps }

    func problem(_ text: String) -> ScenarioError? {
        do {
            _ = try Scenario.parse(text, name: "s")
            return nil
        } catch {
            return error as? ScenarioError
        }
    }

    @Test("revoke takes a kill, relaunch and lose_unsynced mode; a plain mapping is a plain revoke")
    func revokeModes() throws {
        let parsed = try steps(
            """
            steps:
              - revoke: {item: "local:docs", kill: true}
              - revoke: {item: "local:docs", kill: true, relaunch: false, lose_unsynced: true}
              - revoke: {item: "local:docs"}
              - lose-unsynced: true
            """)
        var killed = Scenario.Step.RevokeMode()
        killed.kill = true
        #expect(parsed[0].action == .revokeAs("local:docs", killed))
        killed.relaunch = false
        killed.loseUnsynced = true
        #expect(parsed[1].action == .revokeAs("local:docs", killed))
        #expect(parsed[2].action == .revoke("local:docs"))
        #expect(parsed[3].action == .loseUnsynced)
        #expect(parsed.map(\.losesUnsynced) == [false, true, false, true])
        #expect(problem("steps:\n  - revoke: {item: \"local:x\", relaunch: false}\n")?.line == 2)
        #expect(problem("steps:\n  - revoke: {kill: true}\n")?.message.contains("needs item") == true)
        #expect(problem("steps:\n  - lose-unsynced: false\n") != nil)
    }

    @Test("remote steps: rules with a share or an nth, offline and online, edits of an item")
    func remoteSteps() throws {
        let parsed = try steps(
            """
            steps:
              - at: 0
                remote-fault: "cloud:fetch:unreachable:#2"
              - remote-latency: "cloud:*:500ms:50%"
              - offline: cloud
              - online: cloud
              - remote-change: "cloud:docs/a.txt"
              - remote-delete: "cloud:docs/a.txt"
            """)
        #expect(
            parsed[0].action
                == .remote(.rule(FaultRule(operation: "fetch", nth: 2, provider: "cloud", remoteError: "unreachable"))))
        #expect(parsed[0].addsRuleAtStart)
        #expect(
            parsed[1].action
                == .remote(.rule(FaultRule(operation: "*", latencyMilliseconds: 500, percent: 50, provider: "cloud"))))
        #expect(parsed[1].addsRuleAtStart, "a step without a trigger is at 0")
        #expect(!parsed[4].addsRuleAtStart, "an edit is no rule")
        #expect(parsed[2].action == .remote(.offline("cloud")))
        #expect(parsed[3].action == .remote(.online("cloud")))
        #expect(parsed[4].action == .remote(.change("cloud:docs/a.txt")))
        #expect(parsed[5].action == .remote(.delete("cloud:docs/a.txt")))
        let bad = problem("steps:\n  - remote-fault: \"cloud:fetch:frob\"\n")
        #expect(bad?.line == 2 && bad?.message.contains("unknown protocol error") == true)
        #expect(
            problem("steps:\n  - remote-fault: \"cloud:read:unreachable\"\n")?.message.contains("extension call")
                == true)
        #expect(problem("steps:\n  - offline: \"cloud:x\"\n") != nil)
        #expect(problem("steps:\n  - fault: \"read:EIO:#0\"\n")?.message.contains("counts from 1") == true)
        #expect(
            try steps("steps:\n  - at: 0\n    fault: \"read:EIO:#3\"\n")[0].action
                == .fault(FaultRule(operation: "read", errno: 5, nth: 3)))
    }
}
