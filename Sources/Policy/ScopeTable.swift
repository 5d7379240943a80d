/// Security-scope counters per (process, grant) (SPEC S6–S11). A value
/// type with no locks and no clock, so the rules are unit-tested in memory;
/// the daemon keeps one behind a lock.
public struct ScopeTable: Sendable {
    public enum Mode: String, Sendable, Codable, CaseIterable {
        /// Content operations need an active grant and a started scope (S9).
        case strict
        /// Content operations need only the active grant; scopes still count.
        case lenient
    }

    /// One process's counters and budget.
    public struct ProcessScopes: Sendable {
        public var app: AppID
        /// Every content request of the process reads one (cheap keys).
        var counters: [NumberKey<GrantID>: Int] = [:]
        /// Where each grant was started, for leak reports.
        public var paths: [GrantID: String] = [:]
        /// Starts made for the rest of the process's life (`scopefs scope
        /// exec` starts, then becomes the command): its exit releases them
        /// without a leak. A leak is a start the process made itself and
        /// never stopped.
        var heldUntilExit: [GrantID: Int] = [:]
        /// Successful starts not yet balanced by a stop (SPEC S10).
        public var outstanding = 0
        /// Once the budget is used up, no start succeeds until the process exits.
        public var exhausted = false

        /// Drops the counters of `grants`; returns how many it held.
        mutating func end(_ grants: Set<GrantID>) -> Int {
            let ending = counters.keys.filter { grants.contains($0.number) }
            for key in ending {
                outstanding -= counters.removeValue(forKey: key) ?? 0
                paths[key.number] = nil
                heldUntilExit[key.number] = nil
            }
            return ending.count
        }

        /// The counter of each grant the process started.
        public var counts: [GrantID: Int] {
            Dictionary(uniqueKeysWithValues: counters.map { ($0.key.number, $0.value) })
        }
    }

    public enum StartOutcome: Equatable, Sendable {
        case started(count: Int)
        case budgetExhausted
    }

    public enum StopOutcome: Equatable, Sendable {
        case stopped(count: Int)
        /// Stop at zero: nothing changes, the call is recorded (SPEC S7).
        case unbalanced
    }

    /// A counter left above zero by a process that exited (SPEC S11).
    public struct Leak: Equatable, Sendable {
        public var pid: Int32
        public var app: AppID
        public var grant: GrantID
        public var path: String
        public var count: Int

        public init(pid: Int32, app: AppID, grant: GrantID, path: String, count: Int) {
            self.pid = pid
            self.app = app
            self.grant = grant
            self.path = path
            self.count = count
        }
    }

    public let budget: Int
    /// Keyed by pid (cheap keys: every content request looks one up).
    private var scopesByProcess: [NumberKey<Int32>: ProcessScopes] = [:]
    /// Grants each process was found to inherit from an ancestor (SPEC S9):
    /// its next request needs no walk of its process tree. Only positive
    /// answers are kept, and whatever could end one empties the cache.
    private var inherited: [NumberKey<Int32>: Set<NumberKey<GrantID>>] = [:]
    /// Counts the times the cache was emptied: an answer found from a
    /// lineage read before the latest one is not cached.
    public private(set) var inheritanceEpoch: UInt64 = 0

    /// Every process's counters, by pid (for `scopefs status`).
    public var processes: [Int32: ProcessScopes] {
        Dictionary(uniqueKeysWithValues: scopesByProcess.map { ($0.key.number, $0.value) })
    }

    public init(budget: Int = 4096) {
        self.budget = budget
    }

    // Both mutate the process's entry in place: copying it out and back
    // would copy its dictionaries on every call.
    public mutating func start(pid: Int32, app: AppID, grant: GrantID, path: String, untilExit: Bool = false)
        -> StartOutcome
    {
        let budget = self.budget
        return modify(pid, app: app) { scopes in
            if scopes.exhausted || scopes.outstanding >= budget {
                scopes.exhausted = true
                return .budgetExhausted
            }
            scopes.counters[NumberKey(grant), default: 0] += 1
            scopes.paths[grant] = path
            if untilExit { scopes.heldUntilExit[grant, default: 0] += 1 }
            scopes.outstanding += 1
            return .started(count: scopes.counters[grant]!)
        }
    }

    public mutating func stop(pid: Int32, grant: GrantID) -> StopOutcome {
        let count = self.count(pid: pid, grant: grant)
        guard count > 0 else { return .unbalanced }
        if count == 1 { forgetInheritance() }
        return modify(pid, app: "") { scopes in
            scopes.outstanding -= 1
            if count == 1 {
                scopes.counters[grant] = nil
                scopes.paths[grant] = nil
            } else {
                scopes.counters[grant] = count - 1
            }
            // A stop may balance a start held until exit: what is left held
            // is never more than the counter.
            if let held = scopes.heldUntilExit[grant], held > count - 1 {
                scopes.heldUntilExit[grant] = count - 1 > 0 ? count - 1 : nil
            }
            return .stopped(count: count - 1)
        }
    }

    private mutating func modify<T>(_ pid: Int32, app: AppID, _ body: (inout ProcessScopes) -> T) -> T {
        body(&scopesByProcess[NumberKey(pid), default: ProcessScopes(app: app)])
    }

    /// The process's own counter on a grant.
    public func count(pid: Int32, grant: GrantID) -> Int {
        scopesByProcess[pid]?.counters[grant] ?? 0
    }

    /// Whether the process holds the grant itself, or was found to inherit
    /// it since the cache was last emptied: no process tree needed.
    public func holdsWithoutLineage(pid: Int32, grant: GrantID) -> Bool {
        count(pid: pid, grant: grant) > 0 || inherited[pid]?.contains(NumberKey(grant)) == true
    }

    /// Whether any process of `lineage` (the caller first, then its
    /// ancestors in the app's process tree) holds the grant (SPEC S9).
    /// A yes is cached for the caller, unless the cache was emptied after
    /// `epoch` (when the lineage was read).
    public mutating func holds(lineage: [Int32], grant: GrantID, readAt epoch: UInt64? = nil) -> Bool {
        guard lineage.contains(where: { count(pid: $0, grant: grant) > 0 }) else { return false }
        if let caller = lineage.first, (epoch ?? inheritanceEpoch) == inheritanceEpoch {
            inherited[NumberKey(caller), default: []].insert(NumberKey(grant))
        }
        return true
    }

    /// A stop to zero or an exit may end what descendants inherited.
    private mutating func forgetInheritance() {
        guard !inherited.isEmpty else { return }
        inherited.removeAll()
        inheritanceEpoch &+= 1
    }

    /// Ends every process's scopes on grants that no longer exist (`forget`,
    /// a session grant's end). Their items left the app's view, so no stop
    /// can reach them: they are neither outstanding starts (S10) nor, at
    /// the process's exit, leaks (S11). Returns how many counters ended.
    public mutating func grantsRemoved(_ grants: Set<GrantID>) -> Int {
        guard !grants.isEmpty else { return 0 }
        var ended = 0
        // Through the values' indices: changing a value in place keeps them.
        for index in scopesByProcess.values.indices {
            ended += scopesByProcess.values[index].end(grants)
        }
        if ended > 0 { forgetInheritance() }
        return ended
    }

    /// Forgets an exited process; its counters above zero, less the starts
    /// held until exit, are leaks.
    public mutating func exited(pid: Int32) -> [Leak] {
        // Descendants no longer inherit what it held, and its pid may come
        // back as a process that inherits nothing.
        if scopesByProcess[pid]?.counters.isEmpty == false {
            forgetInheritance()
        } else if inherited.removeValue(forKey: NumberKey(pid)) != nil {
            inheritanceEpoch &+= 1
        }
        guard let scopes = scopesByProcess.removeValue(forKey: NumberKey(pid)) else { return [] }
        return scopes.counts.map { grant, count in (grant, count - (scopes.heldUntilExit[grant] ?? 0)) }
            .filter { $0.1 > 0 }.sorted { $0.0 < $1.0 }
            .map { grant, count in
                Leak(pid: pid, app: scopes.app, grant: grant, path: scopes.paths[grant] ?? "", count: count)
            }
    }
}
