import CommandErrors
import Foundation
import Glibc
import PolicyStore

/// `<state>/daemon.json`: which daemon serves the state directory, and where.
public struct DaemonInfo: Codable, Sendable {
    public var pid: Int32
    public var mountpoint: String

    /// Written 0600 whatever the umask (the daemon runs with umask 0, and
    /// the file is the owner's, like the key: issue 28 finding 5, SPEC S1),
    /// to a temporary name first, so a reader never meets half a file.
    package func write(to state: StateDirectory) {
        guard let data = try? JSONEncoder().encode(self) else { return }
        let temporary = state.daemonInfoPath + ".tmp"
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        let written = data.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        if written == data.count {
            rename(temporary, state.daemonInfoPath)
        } else {
            unlink(temporary)
        }
    }

    public static func read(from state: StateDirectory) -> DaemonInfo? {
        guard let data = FileManager.default.contents(atPath: state.daemonInfoPath) else { return nil }
        return try? JSONDecoder().decode(DaemonInfo.self, from: data)
    }

    package static func remove(from state: StateDirectory) {
        unlink(state.daemonInfoPath)
    }

    package init(
        pid: Int32,
        mountpoint: String
    ) {
        self.pid = pid
        self.mountpoint = mountpoint
    }
}

/// The pipe through which a daemon started in the background tells the
/// waiting `scopefs mount` that the mount is ready, or why it failed.
public enum Readiness {
    /// How often the waiting side looks at the pipe while it waits.
    static let readinessPollMilliseconds: Int32 = 200

    public enum Outcome {
        case ready
        case failed(CommandError)
    }

    public static func report(_ descriptor: Int32?, _ outcome: Outcome) {
        guard let descriptor else { return }
        // A `mount` that stopped waiting closed its end: the report gets
        // EPIPE, and the daemon serves on (SIGPIPE's default would end it
        // and leave a dead mount, issue 50).
        signal(SIGPIPE, SIG_IGN)
        let line: String
        switch outcome {
        case .ready: line = "ready\n"
        case .failed(let error): line = "error \(error.exitCode) \(error.message)\n"
        }
        _ = line.withCString { write(descriptor, $0, strlen($0)) }
        close(descriptor)
    }

    /// Reads the daemon's report; nil when the pipe closed without one.
    public static func await(_ descriptor: Int32, timeoutSeconds: Int32) -> Outcome? {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        var text = ""
        let deadline = Date().addingTimeInterval(Double(timeoutSeconds))
        while Date() < deadline {
            let ready = poll(&poller, 1, readinessPollMilliseconds)
            if ready < 0 && errno != EINTR { return nil }
            if ready <= 0 { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = read(descriptor, &buffer, buffer.count)
            if count <= 0 { break }
            text += String(decoding: buffer[..<count], as: UTF8.self)
            if text.hasSuffix("\n") { break }
        }
        let line = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if line == "ready" { return .ready }
        if line.hasPrefix("error ") {
            let parts = line.split(separator: " ", maxSplits: 2)
            let code = parts.count > 1 ? Int32(parts[1]) ?? 70 : 70
            let kind = CommandError.Kind(rawValue: code) ?? .internalError
            return .failed(CommandError(kind, parts.count > 2 ? String(parts[2]) : "mount failed"))
        }
        return Date() >= deadline
            ? .failed(CommandError(.timedOut, "the daemon did not report readiness in \(timeoutSeconds) s")) : nil
    }
}
