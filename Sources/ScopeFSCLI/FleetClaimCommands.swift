import ArgumentParser
import CommandErrors
import FleetStore
import Foundation
import HostText

/// `scopefs fleet processes` and `scopefs fleet claims` (issue 34): what
/// runs where and who holds which item, read from the shared store; each
/// host publishes its live app processes with its heartbeat.
extension FleetCommand {
    struct Processes: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apps' live processes per host, as each host last reported them.")
        @OptionGroup var options: StateOptions
        @Option(help: "Only this app's.") var app: String?
        @Flag(help: "Print JSON.") var json = false

        struct Listed: Codable {
            var host: String
            var app: String
            var pid: Int32
            /// False once the host's lease ran out since its last report.
            var current: Bool
        }

        static func listed(_ options: StateOptions, app: String?) throws(CommandError) -> [Listed] {
            var listed: [Listed] = []
            for host in try fleetRepository(options, nil).hosts() {
                let current = host.secondsSinceSeen <= host.lease
                for process in host.processes where app == nil || process.app == app {
                    listed.append(Listed(host: host.name, app: process.app, pid: process.pid, current: current))
                }
            }
            return listed
        }

        /// `privacy` on a fleet state: which host each app's live processes
        /// run on (issue 34). Nothing on a state of its own; a line saying
        /// why when the store cannot be read.
        static func printWhereAppsRun(_ options: StateOptions, app: String?) {
            guard (try? options.backend().isFleet) == true else { return }
            do throws(CommandError) {
                for process in try listed(options, app: app) where process.current {
                    print(
                        "live: \(process.app.escapedForTerminal) pid \(process.pid) on host \(process.host.escapedForTerminal)"
                    )
                }
            } catch {
                print("live processes per host: unknown (\(error.message.escapedForTerminal))")
            }
        }

        func run() throws {
            try report { () throws(CommandError) in
                let listed = try Self.listed(options, app: app)
                if json { return printJSON(listed) }
                for process in listed {
                    let note = process.current ? "" : "\t(host silent beyond its lease)"
                    print(
                        "\(process.host.escapedForTerminal)\t\(process.app.escapedForTerminal)\tpid \(process.pid)\(note)"
                    )
                }
            }
        }
    }

    struct Claims: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "File-coordination claims held or waited for across hosts.")
        @OptionGroup var options: StateOptions
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let claims = try options.backend().fleetClaims().list()
                if json { return printJSON(claims) }
                for claim in claims {
                    let note = claim.live ? "" : "\t(expired with its host's lease)"
                    print(
                        "\(claim.host.escapedForTerminal)\t\(claim.app.escapedForTerminal)\tpid \(claim.pid)\t\(claim.state) \(claim.intent)\t\(claim.item.escapedForTerminal)\(note)"
                    )
                }
            }
        }
    }
}
