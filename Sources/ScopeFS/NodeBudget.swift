import Dispatch
import Synchronization

/// How many nodes the daemon keeps for the kernel (`--max-nodes`). The
/// kernel holds a node for every entry in its dentry cache, and it lets
/// the cache grow until the machine runs short of memory: a walk of a
/// million folders would keep a million nodes. Past `limit`, the node
/// table picks nodes the kernel has not used for longest
/// (`NodeTable.nodesToForget`), and the daemon's pruner asks the kernel to
/// drop them (`FuseSession.prune`); its FORGETs free them here. A node
/// dropped this way is looked up again on its next use, as after the
/// kernel's own reclaim.
///
/// Requests only note the crossing (one atomic exchange, then a wake-up);
/// the pruner's own thread sends the notifications: never a FUSE worker,
/// which the kernel may be waiting on (docs/ARCHITECTURE.md).
public final class NodeBudget: Sendable {
    /// Nodes kept at most before the pruner is woken; `Int.max`: no bound.
    public let limit: Int
    /// What the pruner brings the count down to: an eighth under the limit,
    /// so that it runs once per eighth of the budget looked up, not once
    /// per node.
    public let target: Int
    /// The default budget: about 110 MiB of daemon memory at about 1 KiB
    /// per node (docs/PERFORMANCE.md, bounded memory).
    public static let defaultLimit = 100_000
    /// Under this the budget would evict the nodes of one working folder.
    public static let minimumLimit = 100

    private let woken = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)

    public init(limit: Int) {
        self.limit = limit
        target = limit == .max ? .max : limit - limit / 8
    }

    public var isBounded: Bool { limit != .max }

    /// The table holds more than the limit (called under its lock: no
    /// system call unless the pruner was asleep, and then one futex wake
    /// per batch).
    func exceeded() {
        if !woken.exchange(true, ordering: .acquiringAndReleasing) { wake.signal() }
    }

    /// Waits up to `seconds` for the table to exceed the limit; true if it
    /// did. The next crossing wakes the pruner again.
    public func waitUntilExceeded(seconds: Double) -> Bool {
        guard wake.wait(timeout: .now() + seconds) == .success else { return false }
        woken.store(false, ordering: .releasing)
        return true
    }
}

/// A node the budget chose: its number for the kernel, and the entry it
/// was looked up by, for kernels that cannot drop a node by its number.
public struct UnusedNode: Sendable {
    public let inode: UInt64
    public let parent: UInt64
    public let name: String
}

/// The order in which the budget looks at nodes: the CLOCK algorithm over
/// the inode numbers of nodes that may be forgotten, oldest first. A node
/// used since the hand last passed (`NodeTable.Record.recentlyUsed`) gets
/// another turn; others are chosen. Numbers of nodes the kernel forgot
/// meanwhile drop out as the hand passes them, so the ring holds about one
/// number per node.
struct ClockRing {
    private var numbers: [UInt64] = []
    private var hand = 0

    var isEmpty: Bool { hand == numbers.count }
    var count: Int { numbers.count - hand }

    mutating func append(_ inode: UInt64) { numbers.append(inode) }

    /// The number under the hand, taken off the ring (put it back with
    /// `append` to give it another turn).
    mutating func next() -> UInt64? {
        guard hand < numbers.count else { return nil }
        defer {
            hand += 1
            // The passed part is dropped once it is half the array: each
            // number is moved about once per turn.
            if hand >= 4096 && hand * 2 >= numbers.count {
                numbers.removeFirst(hand)
                hand = 0
            }
        }
        return numbers[hand]
    }
}
