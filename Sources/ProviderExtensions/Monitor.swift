import Glibc

/// Nanoseconds on the monotonic clock: deadlines that a change of the wall
/// clock neither shortens nor stretches.
enum MonotonicClock {
    static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// `now` plus `seconds` (a negative or absurd value is clamped).
    static func deadline(after seconds: Double) -> UInt64 {
        now &+ nanoseconds(seconds)
    }

    static func nanoseconds(_ seconds: Double) -> UInt64 {
        guard seconds > 0 else { return 0 }
        return seconds >= 1e9 ? UInt64(1e18) : UInt64(seconds * 1e9)
    }
}

/// A mutex and a condition variable on the monotonic clock, for the host's
/// waits: every wait in this module has a deadline, so none can hang.
/// (`NSCondition` waits until a wall-clock `Date`.)
final class Monitor: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits (the lock held by the caller, through `withLock`) until a
    /// broadcast or the monotonic `deadline`; spurious wake-ups happen, so
    /// callers loop on their own condition.
    func wait(until deadline: UInt64) {
        var time = timespec(
            tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        pthread_cond_timedwait(condition, mutex, &time)
    }

    func broadcast() {
        pthread_cond_broadcast(condition)
    }
}

/// State kept behind a `Monitor`: reached only inside `withLock`, and
/// waited for only through `withLock(waitingUntil:for:)`, which lets the
/// lock go between looks and never while a body holds the state. The
/// classes that keep their fields here are `Sendable` without
/// `@unchecked`: this is the one type that vouches for it (decision 90).
final class Monitored<State: Sendable>: @unchecked Sendable {
    private let monitor = Monitor()
    private var state: State

    init(_ state: State) {
        self.state = state
    }

    func withLock<T, E: Error>(_ body: (inout State) throws(E) -> T) throws(E) -> T {
        try monitor.withLock { () throws(E) -> T in try body(&state) }
    }

    /// Waits until `ready` holds or the monotonic `deadline` passed (woken
    /// by `broadcast`), then runs `body`, all under the lock.
    func withLock<T, E: Error>(
        waitingUntil deadline: UInt64, for ready: (State) -> Bool, _ body: (inout State) throws(E) -> T
    ) throws(E) -> T {
        try monitor.withLock { () throws(E) -> T in
            while !ready(state) && MonotonicClock.now < deadline { monitor.wait(until: deadline) }
            return try body(&state)
        }
    }

    /// Wakes every waiter; call it inside `withLock` after a change.
    func broadcast() {
        monitor.broadcast()
    }
}
