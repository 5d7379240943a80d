import Foundation
import Policy
import Synchronization

/// The daemon's security-scope counters (SPEC S6–S11) behind one lock, and
/// the events they produce. Processes that never start a scope never appear
/// here and cost nothing.
public final class ScopeRegistry: Sendable {
    public let mode: ScopeTable.Mode
    private let table: Mutex<ScopeTable>
    /// The caller's pid followed by its ancestors in its app's process tree.
    private let lineage: @Sendable (Int32) -> [Int32]
    private let events: any EventSink

    public init(
        mode: ScopeTable.Mode, budget: Int, lineage: @escaping @Sendable (Int32) -> [Int32], events: any EventSink
    ) {
        self.mode = mode
        self.table = Mutex(ScopeTable(budget: budget))
        self.lineage = lineage
        self.events = events
    }

    /// The strict-mode check of SPEC S9: the caller or an ancestor holds the grant.
    func holds(_ caller: Caller, _ grant: Grant) -> Bool {
        guard mode == .strict else { return true }
        guard case .app(_, let process) = caller else { return false }
        // The caller itself, or an ancestor it was found to inherit from
        // before, usually holds the scope: ask for its ancestors (a walk and
        // an array) only when neither does.
        let (known, epoch) = table.withLock { table in
            (table.holdsWithoutLineage(pid: process.pid, grant: grant.id), table.inheritanceEpoch)
        }
        if known { return true }
        let chain = lineage(process.pid)
        return table.withLock { $0.holds(lineage: chain, grant: grant.id, readAt: epoch) }
    }

    func start(pid: Int32, app: AppID, grant: Grant, path: String, untilExit: Bool = false) -> ScopeTable.StartOutcome {
        let outcome = table.withLock { $0.start(pid: pid, app: app, grant: grant.id, path: path, untilExit: untilExit) }
        switch outcome {
        case .started(let count):
            record(.start, app: app, pid: pid, path: path, grant: grant.id, count: count)
        case .budgetExhausted:
            record(.budgetExhausted, app: app, pid: pid, path: path, grant: grant.id, errno: EDQUOT)
        }
        return outcome
    }

    func stop(pid: Int32, app: AppID, grant: Grant, path: String) -> ScopeTable.StopOutcome {
        let outcome = table.withLock { $0.stop(pid: pid, grant: grant.id) }
        switch outcome {
        case .stopped(let count): record(.stop, app: app, pid: pid, path: path, grant: grant.id, count: count)
        case .unbalanced: record(.unbalancedStop, app: app, pid: pid, path: path, grant: grant.id, count: 0)
        }
        return outcome
    }

    func count(pid: Int32, grant: GrantID) -> Int {
        table.withLock { $0.count(pid: pid, grant: grant) }
    }

    /// Ends the scopes held on grants the policy no longer has (SPEC S11:
    /// a forgotten grant's scopes are no leak of the app's).
    func grantsRemoved(_ grants: Set<GrantID>) {
        guard !grants.isEmpty else { return }
        _ = table.withLock { $0.grantsRemoved(grants) }
    }

    /// Called when an app process exits: its counters above zero are leaks (SPEC S11).
    public func processExited(pid: Int32) {
        let leaks = table.withLock { $0.exited(pid: pid) }
        for leak in leaks {
            record(.leak, app: leak.app, pid: leak.pid, path: leak.path, grant: leak.grant, count: leak.count)
        }
    }

    /// Every process's counters, for `scopefs status`.
    public var processes: [Int32: ScopeTable.ProcessScopes] {
        table.withLock { $0.processes }
    }

    private func record(
        _ kind: Event.Kind, app: AppID, pid: Int32, path: String, grant: GrantID, count: Int? = nil, errno: Int32? = nil
    ) {
        events.record(
            Event(
                time: Date().timeIntervalSince1970, kind: kind, app: app, pid: pid, path: path,
                operation: kind == .budgetExhausted ? "start" : nil, errno: errno, grant: grant, count: count))
    }
}
