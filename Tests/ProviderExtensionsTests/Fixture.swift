import Foundation
import Glibc
import Logging
import ProviderExtensions
import Testing

/// Where the test's extensions live in the checkout.
enum Paths {
    static let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let folderExtension = root + "/docs/examples/extensions/folder.py"
    static let slowExtension = root + "/Tests/extensions/slow_extension.py"
    static func hostile(_ name: String) -> String { root + "/Tests/ProviderExtensionsTests/hostile/\(name).py" }
}

/// Everything the host tells: its events and its log lines.
final class Recorder: @unchecked Sendable {
    private let lock = NSCondition()
    private var recorded: [ExtensionEvent] = []
    private var lines: [(message: String, metadata: Logger.Metadata)] = []

    var events: [ExtensionEvent] { lock.withLock { recorded } }
    var logLines: [String] { lock.withLock { lines.map(\.message) } }

    func record(_ event: ExtensionEvent) {
        lock.withLock {
            recorded.append(event)
            lock.broadcast()
        }
    }

    func log(_ message: String, _ metadata: Logger.Metadata) {
        lock.withLock {
            lines.append((message, metadata))
            lock.broadcast()
        }
    }

    func count(_ predicate: (ExtensionEvent) -> Bool) -> Int { events.filter(predicate).count }

    /// Waits until `predicate` holds of the events so far.
    @discardableResult
    func wait(timeout: Double = 10, until predicate: ([ExtensionEvent]) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        return lock.withLock {
            while !predicate(recorded) {
                if !lock.wait(until: deadline) { return predicate(recorded) }
            }
            return true
        }
    }

    func waitForLog(timeout: Double = 10, containing text: String) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        return lock.withLock {
            while !lines.contains(where: { $0.message.contains(text) }) {
                if !lock.wait(until: deadline) { return false }
            }
            return true
        }
    }

    var logger: Logger {
        Logger(label: "test") { _ in RecordingHandler(recorder: self) }
    }
}

struct RecordingHandler: LogHandler {
    let recorder: Recorder
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        recorder.log("\(event.message)", metadata.merging(event.metadata ?? [:]) { $1 })
    }
}

/// A temporary folder per test, removed after it; hosts made here are
/// stopped at the end.
final class Fixture: @unchecked Sendable {
    let folder: String
    let recorder = Recorder()
    private var hosts: [ExtensionHost] = []

    init() throws {
        folder = NSTemporaryDirectory() + "scopefs-exthost-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    deinit {
        for host in hosts { host.stop() }
        try? FileManager.default.removeItem(atPath: folder)
    }

    func path(_ name: String) -> String { folder + "/" + name }

    @discardableResult
    func makeFolder(_ name: String) throws -> String {
        try FileManager.default.createDirectory(atPath: path(name), withIntermediateDirectories: true)
        return path(name)
    }

    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        try Data(text.utf8).write(to: URL(filePath: path(name)))
        return path(name)
    }

    func host(
        _ command: [String], options: [String: String] = [:], tunables: ExtensionTunables = .fast,
        sandbox: ExtensionSandbox = ExtensionSandbox(enabled: false), staging: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment, start: Bool = true
    ) -> ExtensionHost {
        let recorder = recorder
        let host = ExtensionHost(
            providerID: "test", command: command, options: options, stagingDirectory: staging ?? path("staging"),
            sandbox: sandbox, environment: environment, tunables: tunables, logger: recorder.logger,
            events: { recorder.record($0) })
        hosts.append(host)
        if start { host.start() }
        return host
    }

    /// A replica of the provider `host` serves, in the folder `replica`,
    /// with small blocks (1 MiB whole-file limit, 256 KiB blocks) so that
    /// tests read by range with small files; pulled once.
    func replica(of host: ExtensionHost, in replica: String, staging: String) throws -> ExtensionProvider {
        var tunables = ReplicaTunables()
        tunables.wholeFileLimit = 1 << 20
        tunables.block = 256 << 10
        let provider = try ExtensionProvider(
            providerID: "cloud", calls: host, folder: ReplicaFolder(root: replica),
            writer: ReplicaFolder(root: replica), store: ReplicaStore(), staging: staging, tunables: tunables,
            logger: recorder.logger, events: { _ in })
        try provider.pull()
        return provider
    }

    /// The folder example over a fresh folder `root`, running.
    func folderHost(root: String, sandbox: ExtensionSandbox = ExtensionSandbox(enabled: false)) -> ExtensionHost {
        host(["python3", Paths.folderExtension, root], sandbox: sandbox)
    }

    func hostile(_ name: String, options: [String: String] = [:], tunables: ExtensionTunables = .fast) -> ExtensionHost
    {
        host(["python3", Paths.hostile(name)], options: options, tunables: tunables)
    }
}

extension ExtensionEvent {
    var isStarted: Bool {
        if case .started = self { return true }
        return false
    }
    var isViolation: Bool {
        if case .protocolViolation = self { return true }
        return false
    }
}

/// Seconds taken by `body`.
func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = Date()
    try body()
    return Date().timeIntervalSince(start)
}

/// The failure `body` throws, or nil if it returns.
func failure<T>(_ body: () throws -> T) -> ExtensionFailure? {
    do {
        _ = try body()
        return nil
    } catch let error as ExtensionFailure {
        return error
    } catch {
        Issue.record("not an ExtensionFailure: \(error)")
        return nil
    }
}
