import CSystemShims
import Foundation
import Glibc
import Processes
import Synchronization

/// What `scopefs run` does when the mount its app runs on dies (issue 15
/// finding 7, SPEC S34): the daemon that serves it is gone, so every access
/// of the app through the mount fails with ENOTCONN from then on, and a new
/// mount does not reach the app's namespace. Unless the user asked to keep
/// it (`--keep-on-mount-loss`), the run ends its app — every process of the
/// run's cgroup, or the command where runs have no cgroup — with SIGTERM,
/// then SIGKILL after a grace period, and exits with 69 (docs/CLI.md).
package final class MountLossFollower: Sendable {
    /// How often a child's end is checked while it has its grace period.
    package static let childEndCheckPeriod: useconds_t = 50_000
    private let descriptor: Int32
    package let daemon: Int32
    private let lost = Atomic<Bool>(false)
    private let childEnded = Atomic<Bool>(false)
    package static let gracePeriod: Double = 2

    /// nil when the daemon cannot be watched (then the run behaves as
    /// before: it waits for its command). Opened before the command starts,
    /// so a daemon that dies in between is seen.
    package init?(daemon: Int32) {
        let descriptor = pidfd_open(daemon, 0)
        guard descriptor >= 0 else { return nil }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        self.descriptor = descriptor
        self.daemon = daemon
    }

    deinit { close(descriptor) }

    /// Whether the daemon ended while the command ran.
    package var mountLost: Bool { lost.load(ordering: .acquiring) }

    /// Watches from a thread of its own; `onLoss` runs once, on that thread,
    /// before the app is ended (unless `keep`).
    package func start(child: pid_t, keep: Bool, onLoss: @escaping @Sendable () -> Void) {
        Thread.detachNewThread { [self] in
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            while poll(&poller, 1, -1) < 0 && errno == EINTR {}
            guard !childEnded.load(ordering: .acquiring) else { return }
            lost.store(true, ordering: .releasing)
            onLoss()
            guard !keep else { return }
            end(child: child, signal: SIGTERM)
            let deadline = Date().addingTimeInterval(Self.gracePeriod)
            while Date() < deadline && !childEnded.load(ordering: .acquiring) { usleep(Self.childEndCheckPeriod) }
            end(child: child, signal: SIGKILL)
        }
    }

    /// Called once the command has been reaped.
    package func childDidEnd() { childEnded.store(true, ordering: .releasing) }

    /// Signals the run's processes: those of this process's run cgroup
    /// (every descendant, in or out of the sandbox) but this one, and the
    /// command itself while it is not reaped.
    private func end(child: pid_t, signal: Int32) {
        if !childEnded.load(ordering: .acquiring) { kill(child, signal) }
        for pid in Self.runCgroupMembers() where pid != getpid() { kill(pid, signal) }
    }

    private static func runCgroupMembers() -> [Int32] {
        guard let own = ProcFS.cgroup2Path(of: "self"),
            own.split(separator: "/").last?.hasPrefix(AppCgroups.leafPrefix) == true,
            let root = MountTable.firstMount(ofType: "cgroup2"),
            let text = ProcFS.readText(root + own + "/cgroup.procs")
        else { return [] }
        return text.split(separator: "\n").compactMap { Int32($0) }
    }
}
