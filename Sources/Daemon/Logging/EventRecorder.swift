import Foundation
import Glibc
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
    /// On a fleet, where each batch is also told (FleetEvents.swift).
    private let forward = Mutex<(@Sendable ([Event]) -> Void)?>(nil)

    func forwardBatches(_ body: @escaping @Sendable ([Event]) -> Void) {
        forward.withLock { $0 = body }
    }

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
        forward.withLock { $0 }?(batch)
        batch.forEach(log)
        let lost = dropped.exchange(0, ordering: .relaxed)
        if lost > 0 { logger.warning("\(lost) events dropped: the event log could not keep up") }
    }

    /// Each event also goes to the daemon's log (the journal, with the
    /// event's fields as journal fields): scope bookkeeping at debug level,
    /// the rest at info or above.
    private func log(_ event: Event) {
        var metadata: Logger.Metadata = ["event": .string(event.kind.rawValue)]
        if let app = event.app { metadata["app"] = .string(app) }
        if let grant = event.grant { metadata["grant"] = .stringConvertible(grant) }
        if let errno = event.errno { metadata["errno"] = .stringConvertible(errno) }
        if let pid = event.pid { metadata["pid"] = .stringConvertible(pid) }
        if let path = event.path { metadata["path"] = .string(path) }
        if let operation = event.operation { metadata["operation"] = .string(operation) }
        if let count = event.count { metadata["count"] = .stringConvertible(count) }
        if event.occurrences > 1 { metadata["occurrences"] = .stringConvertible(event.occurrences) }
        let level: Logger.Level =
            switch event.kind.retention {
            case .routine: .debug
            case .policyChange: .info
            case .incident: .notice
            }
        logger.log(level: level, "\(Self.summary(event))", metadata: metadata)
    }

    /// `denial com.example.editor open /com.example.editor/Providers/local/a.txt: EPERM`
    static func summary(_ event: Event) -> String {
        var words = [event.kind.rawValue]
        if let app = event.app { words.append(app) }
        if let operation = event.operation { words.append(operation) }
        if let path = event.path { words.append(path) }
        var text = words.joined(separator: " ")
        if let errno = event.errno { text += ": " + String(cString: strerror(errno)) }
        return text
    }

    func run(until stop: @Sendable () -> Bool) {
        while !stop() {
            usleep(DaemonTunables.eventFlushPeriod)
            flush()
        }
        flush()
    }
}
