// The same library from XCTest: a mount made in the test, closed by defer.
import ScopeFSTesting
import XCTest

final class ReaderAppXCTests: XCTestCase {
    func testSurvivesARevoke() throws {
        try XCTSkipUnless(ScopeFSMount.isAvailable, ScopeFSMount.unavailableReason ?? "")
        let readerApp = try ScopeFSMount.builtExecutable(named: "reader-app")
        let mount = try ScopeFSMount(
            app: "com.example.reader", files: ["docs/report.txt": "numbers\n"], grants: ["local:docs"])
        defer { mount.close() }

        let app = try mount.start([readerApp, mount.path("local:docs/report.txt")])
        try app.waitForLine("reading docs/report.txt")
        try mount.revoke("local:docs")
        try app.waitForLine("lost access: EPERM")
        XCTAssertEqual(try app.wait(), 0, "the app must end cleanly after losing access, not crash")
    }
}
