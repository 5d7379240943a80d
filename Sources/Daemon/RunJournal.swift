import Foundation
import Glibc
import Policy
import PolicyStore

/// `STATE/runs/`: one small file per live `scopefs run`, written when the
/// run registers and removed when it is over. A daemon knows its runs in
/// memory; the journal is for the next daemon of the state directory, after
/// a crash, to find the app processes still running on the dead mount
/// (issue 15 finding 7, `StrandedRuns`).
struct RunJournal: Sendable {
    struct Record: Codable, Sendable {
        /// The daemon the run registered with.
        var daemon: Int32
        var app: AppID
        /// The registered process (`scopefs run`) and its start time.
        var launcher: ProcessKey
        /// The run's cgroup leaf, where runs have cgroups (`AppCgroups`).
        var cgroup: String?
        var mountpoint: String

        /// The file's name: the cgroup leaf, or the launcher's pid.
        var name: String { cgroup ?? "run-\(daemon)-\(launcher.pid)" }
    }

    let directory: String

    init(state: StateDirectory) {
        directory = state.path + "/runs"
        mkdir(directory, 0o700)
    }

    func write(_ record: Record) {
        guard let data = try? JSONEncoder().encode(record) else { return }
        _ = FileManager.default.createFile(atPath: directory + "/" + record.name, contents: data)
    }

    func remove(named name: String) {
        unlink(directory + "/" + name)
    }

    /// Every record, including those of daemons that are gone.
    func records() -> [Record] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { name in
            FileManager.default.contents(atPath: directory + "/" + name).flatMap {
                try? JSONDecoder().decode(Record.self, from: $0)
            }
        }
    }
}
