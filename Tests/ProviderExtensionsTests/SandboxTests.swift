import Foundation
import Glibc
import ProviderExtensions
import Testing

/// The extension's own bubblewrap sandbox (SPEC S41, docs/PROVIDERS.md
/// "Limits"): a probe run by the host reports what it reached, and the
/// host's side is checked for what it must not have changed.
@Suite struct SandboxTests {
    let fixture: Fixture

    init() throws {
        fixture = try Fixture()
        #expect(ExtensionSandbox.bubblewrap() != nil, "bubblewrap is a dependency (make deps)")
    }

    @Test("the probe cannot read the state directory, write outside staging, or see the host")
    func confinement() throws {
        // The daemon's layout: staging inside the state directory, which
        // itself lies in a folder the extension may write (so the mask
        // over the state directory is what hides it).
        let data = try fixture.makeFolder("data")
        let state = try fixture.makeFolder("data/state")
        try fixture.write("data/state/secret", "the policy database")
        let privateFolder = try fixture.makeFolder("private")
        try fixture.write("private/file", "not for the extension")
        let sandbox = ExtensionSandbox(enabled: true, writablePaths: [data], hiddenPaths: [state])
        var environment = ProcessInfo.processInfo.environment
        environment["SCOPEFS_TEST_TOKEN"] = "a secret of the daemon's environment"
        environment["AWS_REGION"] = "eu-test-1"
        let host = fixture.host(
            ["python3", Paths.hostile("sandbox_probe")],
            options: [
                "secret": state + "/secret", "write": privateFolder + "/escaped", "private": privateFolder,
            ],
            sandbox: sandbox, staging: state + "/staging", environment: environment)
        #expect(host.waitUntilRunning(timeout: 20), "\(fixture.recorder.logLines)")
        let file = try host.fetch("probe", version: nil, range: nil, RequestControl())
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(filePath: file.path))) as? [String: Any])
        for key in ["read_secret", "write_outside", "list_private", "read_shadow", "write_usr"] {
            #expect((report[key] as? String)?.hasPrefix("denied") == true, "\(key): \(report[key] ?? "nil")")
        }
        #expect(report["write_staging"] as? String == "allowed")
        #expect(report["cap_eff"] as? String == "0000000000000000")
        #expect(report["no_new_privs"] as? String == "1")
        #expect((report["pid"] as? Int ?? 99999) < 10, "its own pid namespace")
        #expect(report["uid"] as? Int == Int(getuid()), "the daemon's own user, mapped")
        let variables = report["environment"] as? [String] ?? []
        #expect(!variables.contains("SCOPEFS_TEST_TOKEN"))
        #expect(variables.contains("AWS_REGION"))
        // On the host: nothing written outside staging.
        #expect(!FileManager.default.fileExists(atPath: privateFolder + "/escaped"))
        #expect(try String(contentsOfFile: state + "/secret", encoding: .utf8) == "the policy database")
    }

    @Test("writing into the masked state directory reaches nothing on the host")
    func maskedStateDirectory() throws {
        let data = try fixture.makeFolder("data")
        let state = try fixture.makeFolder("data/state")
        let sandbox = ExtensionSandbox(enabled: true, writablePaths: [data], hiddenPaths: [state])
        let host = fixture.host(
            ["python3", Paths.hostile("sandbox_probe")],
            options: ["secret": state + "/none", "write": state + "/planted", "private": state],
            sandbox: sandbox, staging: state + "/staging")
        #expect(host.waitUntilRunning(timeout: 20))
        _ = try host.fetch("probe", version: nil, range: nil, RequestControl())
        #expect(!FileManager.default.fileExists(atPath: state + "/planted"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: state).sorted() == ["staging", "staging.received"])
    }

    /// The daemon may run as root or as its owner: the same sandbox tests
    /// again, in this very test binary, as uid 65534 (the integration
    /// tests' non-root owner). As non-root, the suite itself is that run.
    @Test(
        "the same confinement for a daemon that is not root (uid 65534)",
        .enabled(if: getuid() == 0, "the suite already runs as a user that is not root"))
    func nonRootOwner() throws {
        let binary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let run = Process()
        run.executableURL = URL(filePath: "/usr/bin/setpriv")
        run.arguments = [
            "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/env", "-i", "HOME=/tmp",
            "TMPDIR=/tmp", "PATH=/usr/bin:/bin", binary, "--testing-library", "swift-testing", "--filter",
            "SandboxTests",
        ]
        let output = Pipe()
        run.standardOutput = output
        run.standardError = output
        try run.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        run.waitUntilExit()
        #expect(run.terminationStatus == 0, "\(text)")
        #expect(text.contains("Test run with 4 tests") && text.contains("passed"), "\(text)")
    }

    @Test("the folder example runs sandboxed with its root writable")
    func folderExtension() throws {
        let root = try fixture.makeFolder("root")
        try fixture.write("root/hello.txt", "hello world")
        let host = fixture.folderHost(root: root, sandbox: ExtensionSandbox(enabled: true, writablePaths: [root]))
        #expect(host.waitUntilRunning(timeout: 20), "\(fixture.recorder.logLines)")
        let page = try host.list("root", page: nil, RequestControl())
        let hello = try #require(page.items.first { $0.name == "hello.txt" })
        let file = try host.fetch(hello.id, version: nil, range: ByteRange(offset: 0, length: 5), RequestControl())
        #expect(try String(contentsOfFile: file.path, encoding: .utf8) == "hello")
        let created = try host.create(
            ItemTemplate(parent: "root", name: "made.txt", kind: .file, mtime: nil, mode: nil), contents: nil,
            RequestControl())
        #expect(created.name == "made.txt" && FileManager.default.fileExists(atPath: root + "/made.txt"))
    }
}
