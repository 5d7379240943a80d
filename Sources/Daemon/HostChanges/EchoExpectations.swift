import Policy

/// The host echoes the mount's own name changes are expected to make
/// (inotify, `SubitemNotices`): each a provider path where a name comes or
/// goes, kept for `lifetime` seconds and at most `capacity` at once (S40).
/// Expecting, using one up and forgetting one cost O(1) (a count per
/// echo, and the echoes in the order they were expected for expiry): the
/// FUSE worker of every create, unlink and rename pays for it.
struct EchoExpectations {
    struct Echo: Hashable {
        var provider: ProviderID
        var path: String
        /// Whether a name came there (created, moved to), or went.
        var came: Bool
    }

    let lifetime: Double
    let capacity: Int

    /// Echoes expected and not yet used up, by echo.
    private var live: [Echo: Int] = [:]
    /// Every expectation in the order made, from `head` on; one used up
    /// before it expires is counted in `usedUp` so its expiry is not
    /// counted twice (the oldest of an echo is the one used up).
    private var order: [(echo: Echo, at: Double)] = []
    private var head = 0
    private var usedUp: [Echo: Int] = [:]

    init(lifetime: Double, capacity: Int) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    var count: Int { order.count - head }

    mutating func expect(_ echo: Echo, now: Double) {
        expire(now: now)
        if count >= capacity { dropOldest() }
        order.append((echo, now))
        live[echo, default: 0] += 1
    }

    /// Uses up one expectation of each of `echoes` if all are expected.
    mutating func useUp(_ echoes: [Echo], now: Double) -> Bool {
        expire(now: now)
        guard echoes.allSatisfy({ (live[$0] ?? 0) > 0 }) else { return false }
        for echo in echoes { forget(echo) }
        return true
    }

    /// Forgets one expectation of `echo` (its change failed).
    mutating func forget(_ echo: Echo) {
        guard let left = live[echo], left > 0 else { return }
        live[echo] = left > 1 ? left - 1 : nil
        usedUp[echo, default: 0] += 1
    }

    private mutating func expire(now: Double) {
        while head < order.count, now - order[head].at > lifetime { dropOldest() }
    }

    private mutating func dropOldest() {
        let echo = order[head].echo
        head += 1
        if let used = usedUp[echo] {
            usedUp[echo] = used > 1 ? used - 1 : nil
        } else if let left = live[echo] {
            live[echo] = left > 1 ? left - 1 : nil
        }
        // Compacted once half of the storage is spent.
        if head > 1024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
