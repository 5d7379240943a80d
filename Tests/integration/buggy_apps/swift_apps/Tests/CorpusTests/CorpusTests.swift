// The corpus of buggy apps judged by ScopeFSTesting (issue 48): each test
// is what an app developer writes with a ScopeFSMount for one bug pattern,
// run against every app of the pattern, buggy and fixed, in the default
// sandbox with strict scopes. Every buggy app must fail its test, every
// fixed one pass (Tests/integration/test_buggy_apps.py runs them and
// reads the report).
import Foundation
import ScopeFSTesting
import Testing

/// Ended with status 0, said so on standard output, no traceback.
func expectCleanEnd(_ app: AppProcess) {
    #expect(app.exitStatus == 0, "\(app.errorOutput)")
    #expect(app.output.contains("lost access"), "\(app.output)")
    #expect(!app.errorOutput.contains("Traceback"), "\(app.errorOutput)")
}

@Suite(.enabled(if: ScopeFSMount.isAvailable, "needs a scopefs binary (SCOPEFS_BIN) and /dev/fuse"))
struct CorpusTests {
    @Test(arguments: Case.of("cached-descriptor", ["python", "c", "swift"]))
    func aRevokeEndsAReaderCleanly(_ item: Case) throws {
        try Corpus.withMount { mount in
            expectCleanEnd(try Corpus.revokedWhileOpen(mount, item))
            try mount.waitForEvents(kind: "denial", operation: "read")
            #expect(try mount.leaks().isEmpty)
        }
    }

    @Test(arguments: Case.of("cached-mapping", ["python", "c", "swift"]))
    func aRevokeEndsAMappingReaderCleanly(_ item: Case) throws {
        try Corpus.withMount { mount in
            expectCleanEnd(try Corpus.revokedWhileOpen(mount, item))
            try mount.waitForEvents(kind: "denial", operation: "read")
            #expect(try mount.leaks().isEmpty)
        }
    }

    @Test(arguments: Case.of("ignores-write-error"))
    func aRefusedSaveIsTold(_ item: Case) throws {
        try Corpus.withMount { mount in
            let app = try Corpus.revokedWhileOpen(mount, item)
            #expect(app.exitStatus == 0)
            #expect(app.output.contains("could not save") && !app.output.contains("saved the document"))
            #expect(try String(contentsOfFile: mount.hostPath("local:docs/report.txt"), encoding: .utf8) == "draft\n")
        }
    }

    @Test(arguments: Case.of("scope-leak-in-loop", ["python", "c", "swift"]))
    func reloadingLeavesNoScope(_ item: Case) throws {
        try Corpus.withMount { mount in
            let app = try Corpus.start(mount, item)
            #expect(try app.wait() == 0 && app.output.contains("done"), "\(app.errorOutput)")
            #expect(try mount.leaks().isEmpty)
            #expect(try mount.events(kind: "unbalanced-stop").isEmpty)
        }
    }

    @Test(arguments: Case.of("no-stop-on-error"))
    func anErrorPathStopsTheScope(_ item: Case) throws {
        try Corpus.withMount { mount in
            let app = try Corpus.revokedWhileOpen(mount, item)
            #expect(app.exitStatus == 0 && app.output.contains("lost access"))
            #expect(try mount.leaks().isEmpty)
        }
    }

    @Test(arguments: Case.of("stale-bookmark"))
    func aStaleBookmarkIsRenewed(_ item: Case) throws {
        try Corpus.withMount { mount in
            let app = try Corpus.start(mount, item)
            try app.waitForLine("READY")
            try mount.renameOnHost("local:docs/report.txt", to: "local:docs/renamed.txt")
            #expect(try app.wait() == 0 && app.output.contains("reopened renamed.txt"), "\(app.output)")
            mount.settle()
            let stale = try mount.events(kind: "stale-bookmark")
            #expect(stale.reduce(0) { $0 + $1.occurrences } == 1, "\(stale)")
        }
    }

    @Test(arguments: Case.of("revoked-presenter"))
    func aRevokedDocumentIsNotWritten(_ item: Case) throws {
        try Corpus.withMount { mount in
            let app = try Corpus.revokedWhileOpen(mount, item)
            #expect(app.exitStatus == 0 && app.output.contains("lost access"))
            mount.settle()
            #expect(try mount.denials().isEmpty)
            #expect(
                try String(contentsOfFile: mount.hostPath("local:docs/report.txt"), encoding: .utf8) == Corpus.content)
        }
    }

    @Test(arguments: Case.of("crash-on-stderr"))
    func aRevokeIsNoCrash(_ item: Case) throws {
        try Corpus.withMount { mount in expectCleanEnd(try Corpus.revokedWhileOpen(mount, item)) }
    }

    @Test(arguments: Case.of("traceback-exit-zero"))
    func aRevokeLogsNoTraceback(_ item: Case) throws {
        try Corpus.withMount { mount in expectCleanEnd(try Corpus.revokedWhileOpen(mount, item)) }
    }

    @Test(arguments: Case.of("hangs-on-revoke"))
    func aRevokeEndsTheAppWithinSeconds(_ item: Case) throws {
        try Corpus.withMount { mount in
            expectCleanEnd(try Corpus.revokedWhileOpen(mount, item, timeout: .seconds(5)))
        }
    }
}
