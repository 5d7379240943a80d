import Testing

@testable import ScopeFSCLI

/// "Did you mean" for a mistyped command (issue 50, finding 4).
@Suite struct UsageHintsTests {
    @Test("A swap of neighbours is one edit")
    func distance() {
        #expect(UsageHints.distance("grnat", "grant") == 1)
        #expect(UsageHints.distance("grant", "grant") == 0)
        #expect(UsageHints.distance("", "add") == 3)
        #expect(UsageHints.distance("mount", "unmount") == 2)
    }

    @Test("The first word that is no command is named, with the nearest ones")
    func unknownCommand() {
        let root = UsageHints.unknownCommand(in: ["--state", "/tmp/s", "grnat", "x"])
        #expect(root?.contains("unknown command 'grnat' for 'scopefs'; did you mean 'grant'?") == true)
        let nested = UsageHints.unknownCommand(in: ["provider", "ad", "x"])
        #expect(nested?.contains("for 'scopefs provider'; did you mean 'add'?") == true)
        #expect(UsageHints.unknownCommand(in: ["grant", "app", "local:docs"]) == nil)
        #expect(UsageHints.unknownCommand(in: ["help", "grant"]) == nil)
        #expect(UsageHints.unknownCommand(in: ["--version"]) == nil)
        #expect(UsageHints.unknownCommand(in: ["replica-writer", "/x"]) == nil)
    }
}
