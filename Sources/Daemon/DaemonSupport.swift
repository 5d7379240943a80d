import Foundation
import Glibc
import PolicyStore

/// One daemon per state directory (SPEC S1), enforced with an flock that the
/// kernel releases when the daemon dies, however it dies.
public struct DaemonLock {
    let descriptor: Int32

    init(_ state: StateDirectory) throws(ScopeFSError) {
        descriptor = open(state.daemonLockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw ScopeFSError(.ioError, "cannot open \(state.daemonLockPath): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            let holder = DaemonInfo.read(from: state)
            throw ScopeFSError(
                .cannotMount,
                "a ScopeFS daemon already serves \(state.path)\(holder.map { " (pid \($0.pid), mounted at \($0.mountpoint))" } ?? ""); one state directory has one mount"
            )
        }
    }

    func release() { close(descriptor) }

    /// Whether a live daemon holds the lock of the state directory (the
    /// kernel drops it with the daemon, so a stale file says nothing).
    public static func isHeld(_ state: StateDirectory) -> Bool {
        let descriptor = open(state.daemonLockPath, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return flock(descriptor, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK
    }
}

/// `<state>/daemon.json`: which daemon serves the state directory, and where.
public struct DaemonInfo: Codable, Sendable {
    public var pid: Int32
    public var mountpoint: String

    func write(to state: StateDirectory) {
        if let data = try? JSONEncoder().encode(self) {
            _ = FileManager.default.createFile(atPath: state.daemonInfoPath, contents: data)
        }
    }

    public static func read(from state: StateDirectory) -> DaemonInfo? {
        guard let data = FileManager.default.contents(atPath: state.daemonInfoPath) else { return nil }
        return try? JSONDecoder().decode(DaemonInfo.self, from: data)
    }

    static func remove(from state: StateDirectory) {
        unlink(state.daemonInfoPath)
    }
}

/// The pipe through which a daemon started in the background tells the
/// waiting `scopefs mount` that the mount is ready, or why it failed.
public enum Readiness {
    public enum Outcome {
        case ready
        case failed(ScopeFSError)
    }

    public static func report(_ descriptor: Int32?, _ outcome: Outcome) {
        guard let descriptor else { return }
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
            let ready = poll(&poller, 1, Tunables.readinessPollMilliseconds)
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
            let kind = ScopeFSError.Kind(rawValue: code) ?? .internalError
            return .failed(ScopeFSError(kind, parts.count > 2 ? String(parts[2]) : "mount failed"))
        }
        return Date() >= deadline
            ? .failed(ScopeFSError(.timedOut, "the daemon did not report readiness in \(timeoutSeconds) s")) : nil
    }
}

/// The daemon holds a descriptor per open file and per folder the kernel
/// knows, so an app that keeps a thousand files open would meet EMFILE
/// under the usual soft limit of 1,024. Raised to the hard limit at start;
/// returns the limit in force.
func raiseDescriptorLimit() -> rlim_t {
    var limit = rlimit()
    guard getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0 else { return 0 }
    if limit.rlim_cur < limit.rlim_max {
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        if setrlimit(RLIMIT_NOFILE_VALUE, &raised) == 0 { return raised.rlim_cur }
    }
    return limit.rlim_cur
}

/// The kernel grows a process's descriptor table by doubling it, and while
/// threads share the table each growth waits for an RCU grace period,
/// inside whichever request opened the descriptor that crossed 64, 128,
/// 256… (docs/PERFORMANCE.md). Growing the table once at start keeps those
/// waits off the request path for the first `Tunables.reservedDescriptors`.
func reserveDescriptorTable(limit: rlim_t) {
    let highest = Int32(min(limit, Tunables.reservedDescriptors)) - 1
    guard highest >= Tunables.initialDescriptorTable else { return }
    let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
    guard null >= 0 else { return }
    let placeholder = fcntl(null, F_DUPFD_CLOEXEC, highest)
    if placeholder >= 0 { close(placeholder) }
    close(null)
}

// Glibc imports RLIMIT_NOFILE as an enum case of __rlimit_resource.
private let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
