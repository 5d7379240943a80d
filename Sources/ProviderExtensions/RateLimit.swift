/// A token bucket: `rate` events a second sustained, bursts of `burst`.
/// Owned by one thread (no lock).
struct RateLimit {
    let rate: Double
    let burst: Double
    private var tokens: Double
    private var last: UInt64

    init(rate: Double, burst: Double? = nil) {
        self.rate = max(rate, 0.001)
        self.burst = max(burst ?? rate, 1)
        tokens = self.burst
        last = MonotonicClock.now
    }

    mutating func allow(now: UInt64 = MonotonicClock.now) -> Bool {
        tokens = min(burst, tokens + Double(now &- last) / 1e9 * rate)
        last = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// Counts what a rate limit dropped and says so at most once a second.
struct DropCounter {
    private(set) var count = 0
    private var lastReport: UInt64 = 0

    mutating func dropped() { count += 1 }

    /// The count to report now (and resets it), or nil.
    mutating func due(now: UInt64 = MonotonicClock.now, force: Bool = false) -> Int? {
        guard count > 0, force || now &- lastReport >= 1_000_000_000 else { return nil }
        defer {
            count = 0
            lastReport = now
        }
        return count
    }
}
