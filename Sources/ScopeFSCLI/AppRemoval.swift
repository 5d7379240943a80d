import CommandErrors
import Control
import Foundation
import Glibc
import Policy
import PolicyStore
import Processes

/// The running processes of one app, for `app remove` (issue 46, finding
/// 5c). Removing an app while its processes run left them reading and
/// writing its container and holding its descriptors, with no app left to
/// show in `status` or `privacy`: so `app remove` refuses while any runs
/// (exit 75, a temporary failure: stop them and try again), and `--force`
/// ends them first, SIGTERM and then SIGKILL, as a person removing an app
/// from a phone expects it to stop.
///
/// They are what the daemon attributes to the app (`status`: every live
/// process of its runs, and stranded runs of a daemon that is gone), plus
/// what the run journal names (a run's launcher, and its cgroup's
/// processes), which also covers runs when no daemon serves the state
/// directory. Each is kept with its start time, so that a pid reused by
/// another process is never signalled.
struct AppProcesses {
    struct Member: Hashable {
        var pid: Int32
        var startTime: UInt64
    }

    /// How long the processes have to end after SIGTERM, and after SIGKILL.
    static let termGrace: Double = 5
    static let killGrace: Double = 5

    static func running(_ app: AppID, state: StateDirectory) throws(CommandError) -> Set<Member> {
        var pids: Set<Int32> = []
        if let status = try ControlClient.status(state: state) {
            pids.formUnion(status.processes.filter { $0.app == app }.map(\.pid))
            pids.formUnion((status.stranded ?? []).filter { $0.app == app }.map(\.pid))
        }
        let records = RunJournal(state: state).records().filter { $0.app == app }
        for record in records where ProcFS.startTime(of: record.launcher.pid) == record.launcher.startTime {
            pids.insert(record.launcher.pid)
        }
        let leaves = Set(records.compactMap(\.cgroup))
        if !leaves.isEmpty { pids.formUnion(inCgroups(leaves)) }
        pids.remove(getpid())
        return Set(pids.compactMap { pid in alive(pid).map { Member(pid: pid, startTime: $0) } })
    }

    /// Processes whose cgroup lies in (or below) one of the run leaves.
    private static func inCgroups(_ leaves: Set<String>) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let path = ProcFS.cgroup2Path(of: "\(pid)") else { return false }
            return path.split(separator: "/").contains { leaves.contains(String($0)) }
        }
    }

    /// The start time of `pid` while it runs; nil once it is gone or a
    /// zombie (it ended; only its parent's wait is missing).
    static func alive(_ pid: Int32) -> UInt64? {
        guard let text = ProcFS.readText("/proc/\(pid)/stat"),
            let close = text.lastIndex(of: ")")
        else { return nil }
        let state = text[text.index(after: close)...].drop { $0 == " " }.first
        if state == "Z" || state == "X" { return nil }
        return ProcFS.startTime(of: pid)
    }

    private static func stillRunning(_ member: Member) -> Bool { alive(member.pid) == member.startTime }

    /// Ends `members`: SIGTERM, then SIGKILL for those left after
    /// `termGrace`. Returns those that still run after `killGrace` more.
    static func end(_ members: Set<Member>) -> Set<Member> {
        var left = members
        for signal in [SIGTERM, SIGKILL] {
            for member in left where stillRunning(member) { kill(member.pid, signal) }
            let deadline = Date(timeIntervalSinceNow: signal == SIGTERM ? termGrace : killGrace)
            repeat {
                left = left.filter(stillRunning)
                if left.isEmpty { return [] }
                usleep(CLITunables.exitPollPeriod)
            } while Date() < deadline
        }
        return left.filter(stillRunning)
    }

    static func describe(_ members: Set<Member>) -> String {
        let pids = members.map(\.pid).sorted()
        let shown = pids.prefix(8).map(String.init).joined(separator: ", ")
        let more = pids.count > 8 ? ", ..." : ""
        return "\(pids.count) running process\(pids.count == 1 ? "" : "es") (pid \(shown)\(more))"
    }
}
