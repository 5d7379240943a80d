import CommandErrors
import Control
import Foundation
import Glibc
import PolicyStore

/// One daemon per state directory (SPEC S1), enforced with an flock that the
/// kernel releases when the daemon dies, however it dies.
public struct DaemonLock {
    let descriptor: Int32

    init(_ state: StateDirectory) throws(CommandError) {
        descriptor = open(state.daemonLockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw CommandError(.ioError, "cannot open \(state.daemonLockPath): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            let holder = DaemonInfo.read(from: state)
            throw CommandError(
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
/// waits off the request path for the first `DaemonTunables.reservedDescriptors`.
func reserveDescriptorTable(limit: rlim_t) {
    let highest = Int32(min(limit, DaemonTunables.reservedDescriptors)) - 1
    guard highest >= DaemonTunables.initialDescriptorTable else { return }
    let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
    guard null >= 0 else { return }
    let placeholder = fcntl(null, F_DUPFD_CLOEXEC, highest)
    if placeholder >= 0 { close(placeholder) }
    close(null)
}

// Glibc imports RLIMIT_NOFILE as an enum case of __rlimit_resource.
private let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)

/// How the daemon's descriptor limit is shared (SPEC S40,
/// docs/DECISIONS.md, decision 45): `DaemonTunables.daemonReservedDescriptors`
/// stay with the daemon itself — control sockets and their reserve, the
/// database, the host-change channel, /dev/fuse clones, splice pipes,
/// folders evicted while a request uses them — `folders` go to the cache
/// of folder descriptors (asked for, else 4,096; at most an eighth of the
/// limit), and apps share the rest, each at most `perApp` (asked for,
/// else 4,096 or a quarter of the apps' share, whichever is smaller).
struct DescriptorLimits {
    let forApps: Int
    let perApp: Int
    let folders: Int

    init(limit: rlim_t, perApp asked: Int?, folders askedFolders: Int? = nil) {
        let limit = Int(clamping: limit == 0 ? 1024 : limit)
        folders = max(min(askedFolders ?? DaemonTunables.folderDescriptors, limit / 8), 1)
        forApps = max(limit - DaemonTunables.daemonReservedDescriptors - folders, limit / 2)
        perApp = min(asked ?? min(DaemonTunables.defaultDescriptorsPerApp, forApps / 4), forApps)
    }
}
