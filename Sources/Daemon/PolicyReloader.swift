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
    /// The installed snapshot's generation and the policy version it
    /// reflects; held for a whole reload, so snapshots are installed in order.
    private let installed: Mutex<(generation: UInt64, version: Int64)>

    /// `version`: the policy version of the snapshot the file system started with.
    init(repository: PolicyRepository, fileSystem: ScopeFileSystem, session: FuseSession, version: Int64, logger: Logger) {
        self.repository = repository
        self.fileSystem = fileSystem
        self.session = session
        self.installed = Mutex((fileSystem.snapshot.generation, version))
        self.logger = logger
    }

    /// Installs the policy as the database has it now, unless the installed
    /// snapshot already reflects its version: a change is loaded once, by
    /// whichever of the CLI's request and the watch sees it first.
    func reload() throws(ScopeFSError) {
        try installed.withLock { installed throws(ScopeFSError) in
            guard try repository.policyVersion() != installed.version else { return }
            let generation = installed.generation + 1
            let (snapshot, version) = try repository.versionedSnapshot(generation: generation)
            installed = (generation, version)
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

    /// Polls for policy changes made without telling the daemon (a CLI
    /// that could not reach it, another tool writing the database).
    func watch(until stop: @Sendable () -> Bool) {
        while !stop() {
            usleep(250_000)
            do { try reload() } catch { logger.error("reload failed: \(error)") }
        }
    }
}
