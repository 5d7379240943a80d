import Policy
import Testing

/// Security-scope counters (SPEC S6–S11) without a mount.
@Suite struct ScopeTableTests {
    @Test("SPEC S8: starts nest; access lasts until the N-th stop")
    func nesting() {
        var table = ScopeTable()
        #expect(table.start(pid: 1, app: "a", grant: 7, path: "/p") == .started(count: 1))
        #expect(table.start(pid: 1, app: "a", grant: 7, path: "/p") == .started(count: 2))
        #expect(table.holdsChecking(lineage: [1], grant: 7))
        #expect(table.stop(pid: 1, grant: 7) == .stopped(count: 1))
        #expect(table.holdsChecking(lineage: [1], grant: 7))
        #expect(table.stop(pid: 1, grant: 7) == .stopped(count: 0))
        #expect(!table.holdsChecking(lineage: [1], grant: 7))
    }

    @Test("SPEC S7: a stop at zero changes nothing and never goes negative")
    func unbalanced() {
        var table = ScopeTable()
        #expect(table.stop(pid: 1, grant: 7) == .unbalanced)
        #expect(table.count(pid: 1, grant: 7) == 0)
        _ = table.start(pid: 1, app: "a", grant: 7, path: "/p")
        #expect(table.count(pid: 1, grant: 7) == 1)
    }

    @Test("SPEC S9: a child holds what its ancestors hold; a sibling does not")
    func inheritance() {
        var table = ScopeTable()
        _ = table.start(pid: 1, app: "a", grant: 7, path: "/p")
        #expect(table.holdsChecking(lineage: [2, 1], grant: 7))
        #expect(!table.holdsChecking(lineage: [3, 4], grant: 7))
        #expect(!table.holdsChecking(lineage: [2, 1], grant: 8))
    }

    @Test("SPEC S9, S36: an inherited scope is remembered until a stop to zero or an exit could end it")
    func inheritanceCache() {
        var table = ScopeTable()
        _ = table.start(pid: 1, app: "a", grant: 7, path: "/p")
        _ = table.start(pid: 1, app: "a", grant: 7, path: "/p")
        #expect(!table.holdsWithoutLineage(pid: 2, grant: 7))
        let inherits = table.holds(lineage: [2, 1], grant: 7)
        #expect(inherits)
        #expect(table.holdsWithoutLineage(pid: 2, grant: 7))
        #expect(!table.holdsWithoutLineage(pid: 2, grant: 8))
        // A nested stop leaves the parent holding: the child still inherits.
        _ = table.stop(pid: 1, grant: 7)
        #expect(table.holdsWithoutLineage(pid: 2, grant: 7))
        // The last stop ends it.
        _ = table.stop(pid: 1, grant: 7)
        #expect(!table.holdsWithoutLineage(pid: 2, grant: 7))
        #expect(!table.holdsChecking(lineage: [2, 1], grant: 7))

        // The holder's exit ends it too.
        _ = table.start(pid: 1, app: "a", grant: 7, path: "/p")
        let fromHolder = table.holds(lineage: [3, 1], grant: 7)
        #expect(fromHolder)
        _ = table.exited(pid: 1)
        #expect(!table.holdsWithoutLineage(pid: 3, grant: 7))

        // The inheritor's exit: its pid may come back as another process.
        _ = table.start(pid: 4, app: "a", grant: 7, path: "/p")
        let fromOther = table.holds(lineage: [5, 4], grant: 7)
        #expect(fromOther)
        #expect(table.exited(pid: 5).isEmpty)
        #expect(!table.holdsWithoutLineage(pid: 5, grant: 7))
    }

    @Test("SPEC S9: an answer from a lineage read before the cache was emptied is not kept")
    func inheritanceRace() {
        var table = ScopeTable()
        _ = table.start(pid: 1, app: "a", grant: 7, path: "/p")
        let first = table.holds(lineage: [2, 1], grant: 7)
        #expect(first)
        let epoch = table.inheritanceEpoch
        _ = table.exited(pid: 2)  // while pid 2's next lineage is being read
        let late = table.holds(lineage: [2, 1], grant: 7, readAt: epoch)
        #expect(late)
        #expect(!table.holdsWithoutLineage(pid: 2, grant: 7))
    }

    @Test("SPEC S10: the budget of outstanding starts; exhausted until exit; a new process has a full budget")
    func budget() {
        var table = ScopeTable(budget: 3)
        for count in 1...3 { #expect(table.start(pid: 1, app: "a", grant: 7, path: "/p") == .started(count: count)) }
        #expect(table.start(pid: 1, app: "a", grant: 8, path: "/q") == .budgetExhausted)
        _ = table.stop(pid: 1, grant: 7)
        #expect(table.start(pid: 1, app: "a", grant: 7, path: "/p") == .budgetExhausted)
        #expect(table.start(pid: 2, app: "a", grant: 7, path: "/p") == .started(count: 1))
    }

    @Test("SPEC S11: counters above zero at exit are leaks")
    func leaks() {
        var table = ScopeTable()
        _ = table.start(pid: 1, app: "a", grant: 7, path: "/p")
        _ = table.start(pid: 1, app: "a", grant: 7, path: "/p")
        _ = table.start(pid: 1, app: "a", grant: 8, path: "/q")
        _ = table.stop(pid: 1, grant: 8)
        let leaks = table.exited(pid: 1)
        #expect(leaks == [ScopeTable.Leak(pid: 1, app: "a", grant: 7, path: "/p", count: 2)])
        #expect(table.exited(pid: 1).isEmpty)
        #expect(table.exited(pid: 99).isEmpty)
    }

    @Test("SPEC S10, S11: a removed grant's scopes end with it: no outstanding start, no leak")
    func removedGrants() {
        var table = ScopeTable(budget: 3)
        _ = table.start(pid: 1, app: "a", grant: 7, path: "/p")
        _ = table.start(pid: 1, app: "a", grant: 7, path: "/p")
        _ = table.start(pid: 1, app: "a", grant: 8, path: "/q")
        _ = table.start(pid: 2, app: "a", grant: 7, path: "/p")
        #expect(table.holdsChecking(lineage: [3, 2], grant: 7))
        #expect(table.grantsRemoved([7]) == 2)
        #expect(table.count(pid: 1, grant: 7) == 0)
        #expect(!table.holdsChecking(lineage: [3, 2], grant: 7))
        #expect(table.start(pid: 1, app: "a", grant: 8, path: "/q") == .started(count: 2))
        #expect(table.exited(pid: 2).isEmpty)
        #expect(table.exited(pid: 1) == [ScopeTable.Leak(pid: 1, app: "a", grant: 8, path: "/q", count: 2)])
    }

    @Test(
        "SPEC S8, S36: thousands of processes and grants, with stops and exits, keep exact counters (cheap number keys)"
    )
    func manyProcesses() {
        var table = ScopeTable()
        var expected: [Int32: [GrantID: Int]] = [:]
        for pid in Int32(1)...3000 {
            for grant in GrantID(pid)...GrantID(pid) + 2 {
                _ = table.start(pid: pid, app: "a", grant: grant, path: "/g\(grant)")
                expected[pid, default: [:]][grant] = 1
            }
        }
        for pid in Int32(1)...3000 where pid % 2 == 0 {
            #expect(table.stop(pid: pid, grant: GrantID(pid) + 1) == .stopped(count: 0))
            expected[pid]?[GrantID(pid) + 1] = nil
        }
        for pid in Int32(1)...3000 where pid % 3 == 0 {
            #expect(table.exited(pid: pid).count == expected[pid]?.count)
            expected[pid] = nil
        }
        #expect(table.processes.mapValues(\.counts) == expected)
        #expect(
            table.count(pid: 2, grant: 2) == 1 && table.count(pid: 2, grant: 3) == 0
                && table.count(pid: 3, grant: 3) == 0)
    }

    @Test(
        "SPEC S11, S12: a start held until exit (scope exec) ends at exit without a leak; the process's own starts still leak"
    )
    func heldUntilExitIsNotALeak() {
        var table = ScopeTable()
        #expect(table.start(pid: 10, app: "a", grant: 1, path: "p", untilExit: true) == .started(count: 1))
        #expect(table.exited(pid: 10).isEmpty)

        #expect(table.start(pid: 11, app: "a", grant: 1, path: "p", untilExit: true) == .started(count: 1))
        #expect(table.start(pid: 11, app: "a", grant: 1, path: "p") == .started(count: 2))
        #expect(table.exited(pid: 11) == [ScopeTable.Leak(pid: 11, app: "a", grant: 1, path: "p", count: 1)])

        // A stop may balance the held start: what is held never exceeds the counter.
        #expect(table.start(pid: 12, app: "a", grant: 1, path: "p", untilExit: true) == .started(count: 1))
        #expect(table.stop(pid: 12, grant: 1) == .stopped(count: 0))
        #expect(table.start(pid: 12, app: "a", grant: 1, path: "p") == .started(count: 1))
        #expect(table.exited(pid: 12) == [ScopeTable.Leak(pid: 12, app: "a", grant: 1, path: "p", count: 1)])
    }
}

extension ScopeTable {
    /// `holds(lineage:grant:)` on a copy: `#expect` cannot call a mutating member.
    fileprivate func holdsChecking(lineage: [Int32], grant: GrantID, readAt epoch: UInt64? = nil) -> Bool {
        var copy = self
        return copy.holds(lineage: lineage, grant: grant, readAt: epoch)
    }
}
