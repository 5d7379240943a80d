import Foundation
import Synchronization

/// The code under test, running as an app process (`scopefs run --app APP
/// -- COMMAND`, SPEC S5), started by `ScopeFSMount.start`. Its standard
/// output and error go to files, so it never waits for the test to read
/// them; its standard input is /dev/null.
public final class AppProcess: Sendable {
    private let process: Subprocess
    /// The command as given to `start`.
    public let command: [String]
    /// How many lines of output `waitForLine` has consumed.
    private let consumed = Mutex(0)

    init(_ process: Subprocess, command: [String]) {
        self.process = process
        self.command = command
    }

    /// The pid of `scopefs run` (the app is its child, in its process group).
    public var pid: Int32 { process.pid }

    /// What the app printed on standard output so far.
    public var output: String { String(decoding: process.output, as: UTF8.self) }

    /// What the app (and `scopefs run`) printed on standard error so far.
    public var errorOutput: String { String(decoding: process.errorOutput, as: UTF8.self) }

    /// The exit status once it ended (`scopefs run` passes the app's on:
    /// 128+N when signal N killed it), else nil.
    public var exitStatus: Int32? { process.exitStatus }

    /// Reads the app's output, after the lines earlier calls consumed,
    /// until a line equal to `line` (surrounding white space ignored), and
    /// consumes it: like reading the app's output line by line.
    ///
    /// - Throws: `.lineNotPrinted` with the app's output, errors and exit
    ///   status when the app ends or `timeout` passes without that line.
    public func waitForLine(_ line: String, timeout: Duration = .seconds(20)) throws(ScopeFSTestingError) {
        let wanted = line.trimmingCharacters(in: .whitespaces)
        let deadline = ContinuousClock.now + timeout
        while true {
            // The status first: output read after the end is all there is.
            let ended = exitStatus != nil
            let lines = completeLines()
            let found = consumed.withLock { consumed -> Bool in
                guard let index = lines[min(consumed, lines.count)...].firstIndex(where: { $0 == wanted }) else {
                    return false
                }
                consumed = index + 1
                return true
            }
            if found { return }
            if ended || ContinuousClock.now >= deadline {
                throw .lineNotPrinted(line: line, output: output, errorOutput: errorOutput, exitStatus: exitStatus)
            }
            Subprocess.sleep(.milliseconds(10))
        }
    }

    /// Waits for the end of the app, at most `timeout`; returns its exit status.
    ///
    /// - Throws: `.timedOut` (the app keeps running; `kill()` or the
    ///   mount's `close()` ends it).
    @discardableResult
    public func wait(timeout: Duration = .seconds(20)) throws(ScopeFSTestingError) -> Int32 {
        guard let status = process.wait(timeout: timeout) else {
            throw .timedOut("\(command.joined(separator: " ")) still runs after \(timeout); it printed:\n\(output)")
        }
        return status
    }

    /// Ends the app and `scopefs run` with SIGKILL (their process group).
    public func kill() {
        process.kill()
    }

    private func completeLines() -> [String] {
        var text = output
        guard let end = text.lastIndex(of: "\n") else { return [] }
        text = String(text[..<end])
        return text.split(separator: "\n", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
    }
}

/// How an app that `ScopeFSMount.run` ran to its end did.
public struct AppResult: Sendable {
    /// Its exit status (128+N when signal N killed it).
    public let status: Int32
    public let output: String
    public let errorOutput: String
}

// Running the code under test as the app.
extension ScopeFSMount {
    /// `scopefs run` for the command: attribution only (`--no-sandbox`,
    /// no security boundary, the host visible) unless `sandbox` (SPEC S5).
    /// A sandboxed app sees its view of the mount where `path(_:)` says
    /// and, of the host, a short allow-list plus the `expose`d paths,
    /// read-only: expose the package's build folder to run its product.
    /// The sandbox starts the app with a cleared environment: each variable
    /// of `environment` is set in it with `--env NAME=VALUE`.
    public func runArguments(
        _ command: [String], app: String? = nil, sandbox: Bool = false, expose: [String] = [],
        environment: [String: String] = [:]
    ) -> [String] {
        let confinement =
            sandbox
            ? expose.flatMap { ["--expose", $0] }
                + environment.sorted { $0.key < $1.key }.flatMap { ["--env", "\($0.key)=\($0.value)"] }
            : ["--no-sandbox"]
        return [binary, "--state", stateDirectory, "run", "--app", app ?? self.app] + confinement + ["--"] + command
    }

    /// Starts the command as the app; `close()` kills it if it still runs.
    /// The app gets `environment` on top of the mount's (this process's)
    /// environment, or in the sandbox, which passes none of this
    /// process's environment on, `environment` alone (`scopefs run --env`).
    public func start(
        _ command: [String], app: String? = nil, sandbox: Bool = false, expose: [String] = [],
        environment: [String: String] = [:]
    ) throws(ScopeFSTestingError) -> AppProcess {
        let process = try spawn(
            runArguments(command, app: app, sandbox: sandbox, expose: expose, environment: environment), name: "app",
            extraEnvironment: sandbox ? [:] : environment)
        let started = AppProcess(process, command: command)
        track(started)
        return started
    }

    /// Runs the command as the app to its end, at most `timeout`.
    ///
    /// - Throws: `.timedOut` when it did not end in time (it is killed).
    public func run(
        _ command: [String], app: String? = nil, sandbox: Bool = false, expose: [String] = [],
        environment: [String: String] = [:], timeout: Duration = .seconds(60)
    ) throws(ScopeFSTestingError) -> AppResult {
        let started = try start(command, app: app, sandbox: sandbox, expose: expose, environment: environment)
        defer { started.kill() }
        let status = try started.wait(timeout: timeout)
        return AppResult(status: status, output: started.output, errorOutput: started.errorOutput)
    }

    /// The path of an executable product of the package under test (built
    /// by `swift test` next to the test bundle), to start as the app.
    ///
    ///     let reader = try ScopeFSMount.builtExecutable(named: "reader-app")
    public static func builtExecutable(named name: String) throws(ScopeFSTestingError) -> String {
        var directories: [String] = []
        if let test = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append((test as NSString).deletingLastPathComponent)
        }
        // macOS: .build/debug/NAMEPackageTests.xctest/Contents/MacOS/...
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            directories.append((bundle.bundlePath as NSString).deletingLastPathComponent)
        }
        directories.append((Bundle.main.bundlePath as NSString).deletingLastPathComponent)
        for directory in directories where access(directory + "/" + name, X_OK) == 0 {
            return directory + "/" + name
        }
        throw .productNotFound(name: name, searched: directories)
    }
}
