import CommandErrors
import FleetStore
import Foundation
import Logging
import Policy
import Synchronization

/// A fleet host's incidents of app processes (denials, leaks, conflicts)
/// go to the fleet's events too, with this host's name (issue 34: events
/// say which host an app process ran on). They are sent from the event
/// recorder's batches, on a queue of their own with its own connection:
/// never from the FUSE path (SPEC S36), never holding up the policy's
/// reloads. Each batch sends at most `perBatch`; what the fleet misses
/// is still in the host's own event log.
final class FleetEvents: Sendable {
    private let repository: FleetRepository
    private let logger: Logger
    private let queue = DispatchQueue(label: "scopefs.fleet-events")
    static let perBatch = 50
    /// Batches queued while the database is slow: beyond a few, new ones
    /// are dropped rather than queued without bound (SPEC S40).
    private let queued = Atomic<Int>(0)
    static let mostQueued = 4

    init(configuration: FleetConfiguration, logger: Logger) throws(CommandError) {
        self.repository = FleetRepository(database: try FleetDatabase(configuration))
        self.logger = logger
    }

    func tell(_ batch: [Event]) {
        let incidents = batch.filter { $0.app != nil && $0.kind.retention == .incident }.prefix(Self.perBatch)
        guard !incidents.isEmpty else { return }
        guard queued.add(1, ordering: .relaxed).newValue <= Self.mostQueued else {
            queued.subtract(1, ordering: .relaxed)
            return
        }
        queue.async { [self] in
            defer { queued.subtract(1, ordering: .relaxed) }
            for event in incidents {
                do throws(CommandError) { try repository.record(event) } catch {
                    logger.debug("the fleet's events miss an incident (kept in this host's log): \(error.message)")
                    return
                }
            }
        }
    }
}
