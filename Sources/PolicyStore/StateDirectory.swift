import CommandErrors
import Foundation
import Policy

/// The state directory of SPEC S1: database, containers, control socket.
/// One daemon serves one state directory.
public struct StateDirectory: Sendable {
    public let path: String

    public init(path: String) {
        self.path = (path as NSString).standardizingPath
    }

    /// `--state`, else `$SCOPEFS_STATE`, else `$XDG_STATE_HOME/scopefs`, else
    /// `~/.local/state/scopefs` (SPEC S1).
    public static func resolve(explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment)
        -> StateDirectory
    {
        if let explicit, !explicit.isEmpty { return StateDirectory(path: absolute(explicit)) }
        if let fromEnv = environment["SCOPEFS_STATE"], !fromEnv.isEmpty {
            return StateDirectory(path: absolute(fromEnv))
        }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") {
            return StateDirectory(path: xdg + "/scopefs")
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return StateDirectory(path: home + "/.local/state/scopefs")
    }

    private static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }

    public var databasePath: String { path + "/scopefs.sqlite" }
    public var containersPath: String { path + "/containers" }
    public var controlSocketPath: String { path + "/control.sock" }
    /// The app endpoint: bookmark resolution for app processes only; each
    /// sandbox shows it as its `STATE/control.sock` (SPEC S5, S27).
    public var appSocketPath: String { path + "/app.sock" }
    public var daemonInfoPath: String { path + "/daemon.json" }
    public var daemonLockPath: String { path + "/daemon.lock" }
    /// The daemon's log where there is no journal; older parts are
    /// `daemon.log.1`, `.2`, ... (size-rotated).
    public var daemonLogPath: String { path + "/daemon.log" }
    /// The copies of files changed and not fsynced while an `unsynced`
    /// fault rule was in force, lost at the next mount after a daemon
    /// killed with them (issue 48).
    public var unsyncedPath: String { path + "/unsynced" }

    public func containerPath(of app: String) -> String { containersPath + "/" + app }

    public func inboxPath(of app: String) -> String { containerPath(of: app) + "/" + MountLayout.inbox(of: app) }

    /// The folders every container has (SPEC S2).
    public static let containerFolders = ["Documents", "Library", "tmp"]

    /// Creates the directory tree (idempotent), private to its owner.
    public func create() throws(CommandError) {
        do {
            try FileManager.default.createDirectory(
                atPath: containersPath, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: path)
        } catch {
            throw CommandError(.ioError, "cannot create state directory \(path): \(error.localizedDescription)")
        }
    }

    public func createContainer(for app: String) throws(CommandError) {
        do {
            for folder in Self.containerFolders {
                try FileManager.default.createDirectory(
                    atPath: containerPath(of: app) + "/" + folder, withIntermediateDirectories: true)
            }
        } catch {
            throw CommandError(.ioError, "cannot create the container of \(app): \(error.localizedDescription)")
        }
    }
}
