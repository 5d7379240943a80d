// The reader app against what a user does while it runs, with Swift
// Testing and ScopeFSTesting: each test gets a mount of its own with the
// app's document and a grant of its folder, and acts as the user would.
import Foundation
import ScopeFSTesting
import Testing

/// The world of every test here: the app, its document, its folder granted.
let reader = (app: "com.example.reader", files: ["docs/report.txt": "numbers\n"], grants: ["local:docs"])

@Suite(.serialized, .enabled(if: ScopeFSMount.isAvailable, "needs a scopefs binary (SCOPEFS_BIN) and /dev/fuse"))
struct ReaderAppTests {
    /// The app under test, built by `swift test` with the tests.
    let readerApp: String

    init() throws {
        readerApp = try ScopeFSMount.builtExecutable(named: "reader-app")
    }

    @Test("a revoke ends the app cleanly (EPERM, no crash); a restore brings access back")
    func survivesARevoke() throws {
        try withScopeFSMount(app: reader.app, files: reader.files, grants: reader.grants) { mount in
            let app = try mount.start([readerApp, mount.path("local:docs/report.txt")])
            try app.waitForLine("reading docs/report.txt")
            try mount.revoke("local:docs")
            try app.waitForLine("lost access: EPERM")
            #expect(try app.wait() == 0, "the app must end cleanly after losing access, not crash")

            try mount.restore("local:docs")
            let again = try mount.start([readerApp, mount.path("local:docs/report.txt")])
            try again.waitForLine("reading docs/report.txt")
        }  // the mount stops what it started and unmounts here
    }

    @Test("in the sandbox too, a revoke ends the app cleanly")
    func endsCleanlyOnARevokeInTheSandbox() throws {
        try withScopeFSMount(app: reader.app, files: reader.files, grants: reader.grants) { mount in
            // The sandbox shows little of the host: the app's build folder is exposed, read-only.
            let buildFolder = (readerApp as NSString).deletingLastPathComponent
            // Nor does it pass on this process's environment: what the app
            // needs is given (`scopefs run --env`), here the switch to its buggy variant.
            let app = try mount.start(
                [readerApp, mount.path("local:docs/report.txt")], sandbox: true, expose: [buildFolder],
                environment: ["READER_CACHES_DESCRIPTOR": ProcessInfo.processInfo.environment["READER_CACHES_DESCRIPTOR"] ?? "0"])
            try app.waitForLine("reading docs/report.txt")
            try mount.revoke("local:docs")
            try app.waitForLine("lost access: EPERM")
            #expect(try app.wait() == 0)
        }
    }

    @Test("the app follows its document when another program moves it")
    func followsARenameOnTheHost() throws {
        try withScopeFSMount(app: reader.app, files: reader.files, grants: reader.grants) { mount in
            let app = try mount.start([readerApp, mount.path("local:docs/report.txt")])
            try app.waitForLine("reading docs/report.txt")
            try mount.renameOnHost("local:docs/report.txt", to: "local:docs/2026/report.txt")
            try app.waitForLine("reading docs/2026/report.txt")
            try mount.revoke("local:docs")
            try app.waitForLine("lost access: EPERM")
            #expect(try app.wait() == 0)
        }
    }

    @Test("an injected EIO on open is retried, and the daemon records the fault")
    func retriesAnInjectedFault() throws {
        try withScopeFSMount(app: reader.app, files: reader.files, grants: reader.grants) { mount in
            let app = try mount.start([readerApp, mount.path("local:docs/report.txt")])
            try app.waitForLine("reading docs/report.txt")
            try mount.inject("open", .errno("EIO"), path: mount.pathInApp("local:docs") + "/*")
            try app.waitForLine("read failed: EIO")
            let faults = try mount.waitForEvents(kind: "fault", operation: "open")
            #expect(faults.allSatisfy { $0.errnoName == "EIO" })
            try mount.clearFaults()
            try mount.revoke("local:docs")
            try app.waitForLine("lost access: EPERM")
            #expect(try app.wait() == 0)
        }
    }
}
