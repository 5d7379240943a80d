import Foundation
import Logging
import Policy
import PolicyStore
import Synchronization

/// Buffers events from the file system and writes them to the database in
/// batches from its own thread, so a denial costs the hot path one append
/// under a lock, never a database write (SPEC S29, S36).
final class EventRecorder: EventSink {
    private let store: EventStore
    private let pending = Mutex<[Event]>([])
    private let dropped = Atomic<Int>(0)
    private let logger: Logger
    private static let maximumPending = 50_000

    init(store: EventStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    func record(_ event: Event) {
        let accepted = pending.withLock { events in
            // A flood of one event (an app's loop of stops) takes one slot,
            // so it cannot crowd other events out of the buffer; the store
            // coalesces across batches (SPEC S29). A few compares, no copy.
            if let last = events.indices.last, event.isRepeat(of: events[last]) {
                events[last].occurrences += 1
                events[last].lastTime = event.time
                return true
            }
            guard events.count < Self.maximumPending else { return false }
            events.append(event)
            return true
        }
        if !accepted { dropped.add(1, ordering: .relaxed) }
    }

    /// Writes what is pending.
    func flush() {
        let batch = pending.withLock { events in
            defer { events.removeAll(keepingCapacity: true) }
            return events
        }
        guard !batch.isEmpty else { return }
        do { try store.append(batch) } catch { logger.error("events not stored: \(error)") }
        let lost = dropped.exchange(0, ordering: .relaxed)
        if lost > 0 { logger.warning("\(lost) events dropped: the event log could not keep up") }
    }

    func run(until stop: @Sendable () -> Bool) {
        while !stop() {
            usleep(100_000)
            flush()
        }
        flush()
    }
}
