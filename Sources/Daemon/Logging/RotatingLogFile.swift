import Foundation
import Glibc
import HostText
import Logging
import Policy
import Synchronization

/// The daemon's log file where there is no journal: `daemon.log`, renamed
/// to `daemon.log.1` (and older ones shifted up to `.keep`, the oldest
/// dropped) once it would grow past `maximumBytes`. The size is the file's,
/// read before each write, so what else writes to it (standard error,
/// which points here in a background daemon) counts too.
public final class RotatingLogFile: Sendable {
    public let path: String
    public let maximumBytes: Int
    public let keep: Int
    /// Whether standard output and error follow the current file, so a
    /// crash report lands in the log a person reads.
    private let ownsStandardStreams: Bool
    private let descriptor: Mutex<Int32>

    public init(path: String, maximumBytes: Int, keep: Int, ownsStandardStreams: Bool) {
        self.path = path
        self.maximumBytes = max(maximumBytes, 512)
        self.keep = max(keep, 1)
        self.ownsStandardStreams = ownsStandardStreams
        descriptor = Mutex(Self.open(path))
        if ownsStandardStreams { descriptor.withLock { Self.redirectStandardStreams(to: $0) } }
    }

    deinit { descriptor.withLock { if $0 >= 0 { close($0) } } }

    public func append(_ line: String) {
        let bytes = Array(line.utf8)
        descriptor.withLock { fd in
            var info = stat()
            if fd >= 0, fstat(fd, &info) == 0, Int(info.st_size) > 0, Int(info.st_size) + bytes.count > maximumBytes {
                fd = rotate(closing: fd)
            }
            guard fd >= 0 else { return }
            bytes.withUnsafeBytes { _ = Glibc.write(fd, $0.baseAddress, $0.count) }
        }
    }

    /// `daemon.log.(n-1)` -> `.n`, ..., `daemon.log` -> `.1`, a new `daemon.log`.
    private func rotate(closing fd: Int32) -> Int32 {
        close(fd)
        for generation in stride(from: keep - 1, through: 1, by: -1) {
            rename("\(path).\(generation)", "\(path).\(generation + 1)")
        }
        rename(path, path + ".1")
        let new = Self.open(path)
        if ownsStandardStreams { Self.redirectStandardStreams(to: new) }
        return new
    }

    private static func open(_ path: String) -> Int32 {
        Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    }

    private static func redirectStandardStreams(to fd: Int32) {
        guard fd >= 0 else { return }
        dup2(fd, STDOUT_FILENO)
        dup2(fd, STDERR_FILENO)
    }
}

/// swift-log lines into a `RotatingLogFile` (or standard error):
/// `2026-11-23T15:04:05.123Z warning scopefs: message app=... errno=1`.
public struct LineLogHandler: LogHandler {
    public enum Sink: Sendable {
        case file(RotatingLogFile)
        case standardError
    }

    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level = .info
    private let label: String
    private let sink: Sink

    public init(label: String, sink: Sink) {
        self.label = label
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = mergedMetadata(event.metadata)
        // Names and paths come from apps: escaped as in every text output
        // (SPEC S29), so a file name cannot forge a line of the log.
        let fields = merged.sorted { $0.key < $1.key }.map { " \($0.key)=\("\($0.value)".escapedForTerminal)" }.joined()
        let time = Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(Date())
        let line = "\(time) \(event.level) \(label): \("\(event.message)".escapedForTerminal)\(fields)\n"
        switch sink {
        case .file(let file): file.append(line)
        case .standardError: _ = line.withCString { Glibc.write(STDERR_FILENO, $0, strlen($0)) }
        }
    }
}
