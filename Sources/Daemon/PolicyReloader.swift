import Foundation
import FuseBridge
import Logging
import Policy
import PolicyStore
import ScopeFS
import Synchronization

/// Keeps the file system's policy snapshot in step with the database
/// (SPEC S13): on a CLI's reload request, and when the database changes
/// behind the daemon's back. After installing a snapshot it drops the
/// kernel's caches of revoked items — always from this (non-FUSE) thread,
/// since the kernel may be waiting on a FUSE worker (docs/ARCHITECTURE.md).
final class PolicyReloader: Sendable {
    private let repository: PolicyRepository
    private let fileSystem: ScopeFileSystem
    private let session: FuseSession
    private let logger: Logger
    /// Held for a whole reload: snapshots are installed in order.
    private let generation = Mutex<UInt64>(1)

    init(repository: PolicyRepository, fileSystem: ScopeFileSystem, session: FuseSession, logger: Logger) {
        self.repository = repository
        self.fileSystem = fileSystem
        self.session = session
        self.logger = logger
    }

    func reload() throws(ScopeFSError) {
        try generation.withLock { (generation: inout UInt64) throws(ScopeFSError) in
            let snapshot = try repository.snapshot(generation: generation + 1)
            generation += 1
            let invalidation = fileSystem.install(snapshot)
            for inode in invalidation.inodes { session.invalidateInode(inode) }
            for entry in invalidation.entries { session.invalidateEntry(parent: entry.parent, name: entry.name) }
            if !invalidation.isEmpty {
                logger.debug("policy \(generation): dropped caches of \(invalidation.inodes.count) inodes")
            }
        }
    }

    func dropEntries(_ entries: [(parent: UInt64, name: String)]) {
        for entry in entries { session.invalidateEntry(parent: entry.parent, name: entry.name) }
    }

    /// Polls for changes made without telling the daemon.
    func watch(_ watcher: ChangeWatcher, until stop: @Sendable () -> Bool) {
        while !stop() {
            usleep(250_000)
            if watcher.hasChanged() {
                do { try reload() } catch { logger.error("reload failed: \(error)") }
            }
        }
    }
}
