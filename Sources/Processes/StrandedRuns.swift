import Foundation
import Glibc
import Policy
import Synchronization

/// App processes that a previous daemon of this state directory started and
/// that outlived it (issue 15 finding 7, SPEC S30, S34). Killed with its
/// daemon, a mount stays dead (ENOTCONN) in every namespace that holds a
/// copy of it, the sandboxes and app views among them; a new mount does not
/// reach them. They are found from the run journal: the daemon lock makes
/// any other daemon's record a dead daemon's. Their processes are those of
/// the run's cgroup (every descendant, whatever it did), or, without
/// cgroups, the registered launcher. `scopefs status` lists them; each is
/// recorded as an event once. Their cgroups are adopted, so that a request
/// one of them makes to the new mount is still its app's, never the owner's.
package final class StrandedRuns: Sendable {
    private let runs: Mutex<[RunJournal.Record]>
    private let journal: RunJournal
    private let cgroups: AppCgroups?

    package init(journal: RunJournal, cgroups: AppCgroups?) {
        self.journal = journal
        self.cgroups = cgroups
        let previous = journal.records().filter { $0.daemon != getpid() }
        for record in previous {
            if let leaf = record.cgroup { cgroups?.adopt(leaf: leaf, app: record.app) }
        }
        runs = Mutex(previous)
    }

    /// The live processes of the stranded runs, by run; runs with none left
    /// are forgotten (their records and empty cgroups removed).
    package var processes: [(record: RunJournal.Record, pids: [Int32])] {
        let current = runs.withLock { $0 }
        var live: [(record: RunJournal.Record, pids: [Int32])] = []
        var finished: Set<String> = []
        for record in current {
            let pids = Self.pids(of: record, cgroups: cgroups)
            if pids.isEmpty {
                finished.insert(record.name)
            } else {
                live.append((record, pids))
            }
        }
        if !finished.isEmpty {
            for name in finished {
                journal.remove(named: name)
                cgroups?.remove(leaf: name)
            }
            runs.withLock { $0.removeAll { finished.contains($0.name) } }
        }
        return live
    }

    private static func pids(of record: RunJournal.Record, cgroups: AppCgroups?) -> [Int32] {
        if let leaf = record.cgroup, let cgroups { return cgroups.processes(inLeaf: leaf) ?? [] }
        // No cgroup: the launcher, while it is the same process.
        guard ProcFS.startTime(of: record.launcher.pid) == record.launcher.startTime else { return [] }
        return [record.launcher.pid]
    }
}
