import CommandErrors
import Control
import Foundation
import HostText
import Launcher
import PolicyStore

/// `scopefs revoke --kill` and a scenario's `revoke: {kill: true}`: every
/// process of the app is killed by the daemon, which knows them all (its
/// runs' cgroups), as Android's `pm revoke` ends the app (issue 48).
enum AppEnding {
    /// Returns the pids killed; says how many on standard error.
    @discardableResult
    static func end(_ app: String, state: StateDirectory, quiet: Bool = false) throws(CommandError) -> [Int32] {
        try OwnerCheck.require(state, to: "end an app's processes")
        let response = try ControlClient.send(.endApp(app: app), state: state)
        guard response.ok else {
            throw CommandError(
                CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                response.message ?? "cannot end \(app)'s processes")
        }
        let ended = response.ended ?? []
        if !quiet {
            FileHandle.standardError.write(
                Data(
                    "killed \(ended.count) process\(ended.count == 1 ? "" : "es") of \(app.escapedForTerminal)\n".utf8))
        }
        return ended
    }
}
