import Foundation
import Glibc
import Policy
import PolicyStore

/// `STATE/runs/`: one small file per live `scopefs run`, written when the
/// run registers and removed when it is over. A daemon knows its runs in
/// memory; the journal is for the next daemon of the state directory, after
/// a crash, to find the app processes still running on the dead mount
/// (issue 15 finding 7, `StrandedRuns`).
package struct RunJournal: Sendable {
    package struct Record: Codable, Sendable {
        /// The daemon the run registered with.
        package var daemon: Int32
        package var app: AppID
        /// The registered process (`scopefs run`) and its start time.
        package var launcher: ProcessKey
        /// The run's cgroup leaf, where runs have cgroups (`AppCgroups`).
        package var cgroup: String?
        package var mountpoint: String

        /// The file's name: the cgroup leaf, or the launcher's pid.
        package var name: String { cgroup ?? "run-\(daemon)-\(launcher.pid)" }

        package init(daemon: Int32, app: AppID, launcher: ProcessKey, cgroup: String?, mountpoint: String) {
            self.daemon = daemon
            self.app = app
            self.launcher = launcher
            self.cgroup = cgroup
            self.mountpoint = mountpoint
        }
    }

    package let directory: String

    package init(state: StateDirectory) {
        directory = state.path + "/runs"
        mkdir(directory, 0o700)
    }

    package func write(_ record: Record) {
        guard let data = try? JSONEncoder().encode(record) else { return }
        _ = FileManager.default.createFile(atPath: directory + "/" + record.name, contents: data)
    }

    package func remove(named name: String) {
        unlink(directory + "/" + name)
    }

    /// Every record, including those of daemons that are gone.
    package func records() -> [Record] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { name in
            FileManager.default.contents(atPath: directory + "/" + name).flatMap {
                try? JSONDecoder().decode(Record.self, from: $0)
            }
        }
    }
}
