import FuseBridge
import Glibc
import ScopeFS

/// Keeps the kernel's nodes within the budget (`--max-nodes`,
/// `NodeBudget`): woken when the node table crosses its limit, it asks the
/// kernel to drop the least recently used nodes, whose FORGETs free them.
/// Runs on its own thread, never a FUSE worker: an entry invalidation
/// takes the folder's inode lock in the kernel, which a request in that
/// folder holds while the kernel waits for the daemon's reply.
enum NodePruner {
    static func run(_ fileSystem: ScopeFileSystem, session: FuseSession, until stop: @Sendable () -> Bool) {
        let budget = fileSystem.nodeBudget
        guard budget.isBounded else { return }
        var prunes = true
        while !stop() {
            guard budget.waitUntilExceeded(seconds: 1) || fileSystem.inodeCount > budget.limit else { continue }
            var asked = 0
            var passes = 0
            while !stop(), passes < maximumPasses,
                let unused = fileSystem.nodesToForget(batch: FuseSession.pruneBatch)
            {
                passes += 1
                guard !unused.isEmpty else { continue }
                asked += unused.count
                if prunes { prunes = session.prune(unused.map(\.inode)) }
                if !prunes {
                    // Before Linux 6.16: dropping the entry drops the node
                    // with it, even one in use (it is looked up again).
                    for node in unused { session.invalidateEntry(parent: node.parent, name: node.name) }
                }
            }
            // Nothing could be asked (every node open or just used):
            // not again at once, or each new node would wake a full pass.
            if asked == 0 { usleep(DaemonTunables.nodePrunerBackoff) }
        }
    }

    /// Batches per wake-up at most, so that a table of pinned nodes is not
    /// swept without end: 256 × 16 × 512 steps of the hand.
    static let maximumPasses = 256
}
