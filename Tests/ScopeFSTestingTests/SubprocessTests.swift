import Foundation
import Testing

@testable import ScopeFSTesting

#if canImport(Glibc)
    import Glibc
#endif

/// The process plumbing of ScopeFSTesting with real processes (`/bin/sh`),
/// no mount: what `start`, `close()` and `waitForLine` stand on (issue 18).
@Suite final class SubprocessTests {
    /// Where each test's processes write their output; a new one per test.
    let folder: String

    init() throws {
        folder = NSTemporaryDirectory() + "/scopefs-testing-tests-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: folder)
    }

    func shell(_ script: String, name: String = "sh") throws -> Subprocess {
        try Subprocess(
            ["/bin/sh", "-c", script], environment: ProcessInfo.processInfo.environment,
            outputPath: "\(folder)/\(name).out", errorPath: "\(folder)/\(name).err")
    }

    @Test("exit status, standard output and error, each in its file")
    func statusAndOutput() throws {
        let process = try shell("echo out; echo err >&2; exit 3")
        #expect(process.wait(timeout: .seconds(10)) == 3)
        #expect(String(decoding: process.output, as: UTF8.self) == "out\n")
        #expect(String(decoding: process.errorOutput, as: UTF8.self) == "err\n")
        #expect(process.exitStatus == 3, "the status stays known after the reap")
    }

    @Test("a process killed by signal N exits 128+N, as shells say")
    func signalStatus() throws {
        #expect(try shell("kill -TERM $$").wait(timeout: .seconds(10)) == 128 + SIGTERM)
    }

    @Test("wait gives up after its timeout; kill ends the process and what it started")
    func killReachesTheGroup() throws {
        let process = try shell("sleep 60 & echo $!; wait")
        #expect(process.wait(timeout: .milliseconds(200)) == nil)
        let deadline = ContinuousClock.now + .seconds(10)
        while !String(decoding: process.output, as: UTF8.self).hasSuffix("\n") && ContinuousClock.now < deadline {
            Subprocess.sleep(.milliseconds(10))
        }
        let child = try #require(
            Int32(String(decoding: process.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        process.kill()
        #expect(process.exitStatus == 128 + SIGKILL)
        #expect(Self.isGone(child, within: .seconds(10)), "the shell's child \(child) outlived kill()")
        process.kill()  // a second kill of a reaped process signals nobody
    }

    @Test("waitForLine consumes lines in order, ignores surrounding blanks")
    func linesInOrder() throws {
        let app = AppProcess(try shell("echo READY; echo ' step 1 '; echo READY; sleep 60"), command: ["sh"])
        defer { app.kill() }
        try app.waitForLine("READY")
        try app.waitForLine("step 1")
        try app.waitForLine("READY")  // the second one: the first was consumed
        let error = #expect(throws: ScopeFSTestingError.self) {
            try app.waitForLine("READY", timeout: .milliseconds(300))
        }
        #expect(error?.description.contains("the app is still running") == true)
    }

    @Test("an app that ends without the line fails at once, with its output, errors and status")
    func endedWithoutTheLine() throws {
        let app = AppProcess(try shell("echo READY; echo 'Fatal error: boom' >&2; exit 7"), command: ["sh"])
        let started = ContinuousClock.now
        let error = #expect(throws: ScopeFSTestingError.self) {
            try app.waitForLine("lost access", timeout: .seconds(30))
        }
        #expect(ContinuousClock.now - started < .seconds(10), "it waited for the timeout although the app had ended")
        let text = error?.description ?? ""
        #expect(text.contains("the app never printed \"lost access\" (the app exited 7)"), "\(text)")
        #expect(text.contains("READY") && text.contains("Fatal error: boom"), "\(text)")
    }

    @Test("long output keeps its head (a crash's reason) and its tail")
    func shortenedOutput() {
        let lines = (1...100).map { "line \($0)" }.joined(separator: "\n")
        let short = ScopeFSTestingError.shortened(lines)
        #expect(short.hasPrefix("line 1\n") && short.hasSuffix("line 100") && short.contains("[80 lines]"))
        #expect(ScopeFSTestingError.shortened("a\nb") == "a\nb")
    }

    @Test("items split as scopefs grant takes them; mountinfo fields unescape")
    func itemsAndMountFields() {
        #expect(ScopeFSMount.split("local:docs/a.txt") == ("local", "docs/a.txt"))
        #expect(ScopeFSMount.split("local:docs/") == ("local", "docs"))
        #expect(ScopeFSMount.split("local:.") == ("local", ""))
        #expect(ScopeFSMount.split("drive:") == ("drive", ""))
        #expect(ScopeFSMount.unescapeMountField("/tmp/a\\040b\\134c") == "/tmp/a b\\c")
        #expect(ScopeFSMount.unescapeMountField("/tmp/plain\\04") == "/tmp/plain\\04")
    }

    /// Whether the process is gone or a zombie (its parent, init, may reap it late).
    static func isGone(_ pid: pid_t, within timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
            if let close = stat.lastIndex(of: ")"), stat[stat.index(after: close)...].contains(" Z ") { return true }
            Subprocess.sleep(.milliseconds(20))
        }
        return false
    }
}
