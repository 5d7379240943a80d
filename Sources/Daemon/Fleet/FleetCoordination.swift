import CommandErrors
import FleetStore
import Foundation
import Glibc
import Logging
import Policy
import Synchronization

/// This host's side of coordination across the fleet (issue 34, SPEC
/// S27b, S44). The `Coordinator` settles claims among this host's
/// processes first, in memory; a claim on a provider item granted here is
/// then taken in the shared store too, where claims of other hosts' apps
/// may make it wait — bounded by the same timeout, ending in the same
/// ETIMEDOUT. While this host holds claims it looks every `lookEvery`
/// for other hosts' waiting rows and asks its holders to save and
/// relinquish, as the single-host coordinator does.
///
/// Only coordinate requests (control-socket slow paths) reach the
/// database: the FUSE path never does (SPEC S36), claimed items or not.
/// Container items are a host's own and never leave it.
final class FleetCoordination: Sendable {
    enum Outcome: Sendable, Equatable {
        case granted
        case timedOut
        case unreachable(String)
    }

    private let claims: FleetClaims
    private let notices: NoticeBoard
    private let logger: Logger
    /// This host's rows in the store, by the local claim they belong to.
    private let rows = Mutex<[UInt64: (row: Int64, pid: Int32)]>([:])
    /// Waiting rows of other hosts whose holders were asked already
    /// (held row, waiting row): each is asked once, as on one host.
    private let asked = Mutex<Set<[Int64]>>([])
    /// Deletes go here, off the caller's thread: a process's exit must not
    /// wait for the database.
    private let removals = DispatchQueue(label: "scopefs.fleet-claims")
    private let lookEvery: Double = 0.25
    private let pollEvery: Double = 0.2

    init(configuration: FleetConfiguration, notices: NoticeBoard, logger: Logger) throws(CommandError) {
        self.claims = FleetClaims(database: try FleetDatabase(configuration))
        self.notices = notices
        self.logger = logger
    }

    /// Drops what this host left in the store before (a kill -9), then
    /// starts looking for other hosts' waiters.
    func start() {
        do throws(CommandError) { try claims.removeAllOfThisHost() } catch {
            logger.warning("cannot clear this host's old fleet claims (they end with its lease): \(error.message)")
        }
        Thread.detachNewThread { [self] in
            while true {
                Thread.sleep(forTimeInterval: lookEvery)
                dropEndedProcesses()
                askHoldersWanted()
            }
        }
    }

    /// Takes the fleet's claim for local claim `claim`, waiting for other
    /// hosts' holders until `deadline`.
    func acquire(
        item: String, intent: Coordinator.Intent, pid: Int32, app: AppID, path: String, claim: UInt64,
        until deadline: Date
    ) -> Outcome {
        var waiting: Int64?
        while true {
            let attempt: FleetClaims.Attempt
            do {
                attempt = try claims.attempt(
                    item: item, intent: intent.rawValue, app: app, pid: pid, path: path, waiting: waiting)
            } catch {
                remove(waiting.map { [$0] } ?? [])
                return .unreachable(error.message)
            }
            switch attempt {
            case .granted(let row):
                rows.withLock { $0[claim] = (row, pid) }
                // The process may have ended while it waited; its exit
                // found no row then.
                if kill(pid, 0) != 0 && errno == ESRCH { release(claim: claim) }
                return .granted
            case .blocked(let row, let holders):
                if waiting == nil { logger.debug("fleet claim on \(item) waits for \(holders)") }
                waiting = row
            }
            let left = deadline.timeIntervalSinceNow
            if left <= 0 {
                remove(waiting.map { [$0] } ?? [])
                return .timedOut
            }
            Thread.sleep(forTimeInterval: min(pollEvery, left))
        }
    }

    func release(claim: UInt64) {
        guard let row = rows.withLock({ $0.removeValue(forKey: claim) }) else { return }
        remove([row.row])
    }

    func processExited(pid: Int32) {
        let ended = rows.withLock { rows -> [Int64] in
            let mine = rows.filter { $0.value.pid == pid }
            for key in mine.keys { rows[key] = nil }
            return mine.values.map(\.row)
        }
        remove(ended)
    }

    /// Rows of processes that ended: the process tracker reports only the
    /// processes it follows, and a claim may come from one that never
    /// touched the mount (a coordinate request over the control socket).
    /// The single-host coordinator drops such claims lazily the same way.
    private func dropEndedProcesses() {
        let pids = Set(rows.withLock { $0.values.map(\.pid) })
        for pid in pids where kill(pid, 0) != 0 && errno == ESRCH { processExited(pid: pid) }
    }

    private func remove(_ ended: [Int64]) {
        guard !ended.isEmpty else { return }
        removals.async { [claims, logger] in
            do throws(CommandError) { try claims.remove(ended) } catch {
                logger.warning(
                    "cannot end fleet claims \(ended) now (they end with this host's lease): \(error.message)")
            }
        }
    }

    /// Asks this host's holders that other hosts wait for to save, then
    /// relinquish (SPEC S27a), once per waiter.
    private func askHoldersWanted() {
        let held = rows.withLock { Set($0.values.map(\.row)) }
        guard !held.isEmpty else {
            asked.withLock { $0.removeAll() }
            return
        }
        let wanted: [FleetClaims.Wanted]
        do { wanted = try claims.wanted() } catch {
            logger.debug("cannot look for other hosts' waiting claims: \(error.message)")
            return
        }
        let fresh = asked.withLock { asked in
            asked = asked.filter { held.contains($0[0]) }
            return wanted.filter { held.contains($0.held) && asked.insert([$0.held, $0.waiting]).inserted }
        }
        var told: Set<[String]> = []
        for want in fresh where !want.app.isEmpty && told.insert([want.app, want.path]).inserted {
            notices.post(
                [PresenterNotice.Kind.save, .relinquish].map {
                    PresenterNotice(kind: $0, app: want.app, grant: 0, provider: "", path: want.path)
                })
        }
    }
}
