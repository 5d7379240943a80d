import CommandErrors
import Control
import Foundation
import PolicyStore
import Processes

/// The isolation layer belongs to the owner (SPEC S5): a command that
/// changes it refuses to run inside an app process, sandboxed or not.
///
/// Two signs, either enough: the process sits in a run's cgroup (which no
/// fork, exec or setsid leaves, and which the sandbox cannot write), or the
/// daemon serving the state directory names it as an app process (the same
/// answer its own attribution gives, also where runs have no cgroup). This
/// is the CLI being honest with the user, not the boundary: inside the
/// sandbox the database and key are not even visible, and the daemon's
/// control socket refuses changes from app processes itself.
public enum OwnerCheck {
    /// `daemonSeconds`: how long the daemon may take to answer; one that
    /// does not answer in time names no app (`unmount` asks briefly: the
    /// daemon it ends may be one that answers nothing, issue 50).
    public static func require(_ state: StateDirectory, to action: String, daemonSeconds: Int = 30)
        throws(CommandError)
    {
        try requireOutsideRuns(to: action)
        if let app = appNamedByDaemon(state, seconds: daemonSeconds) { throw refused(app, action) }
    }

    /// The first sign alone, read from /proc without asking the daemon: for
    /// a change that the daemon itself makes, which refuses app processes
    /// on its own (the second sign, with the same answer as `whoami`).
    public static func requireOutsideRuns(to action: String) throws(CommandError) {
        if inRunCgroup() { throw refused(nil, action) }
    }

    private static func refused(_ app: String?, _ action: String) -> CommandError {
        CommandError(
            .refused,
            "refused: this is an app process\(app.map { " of \($0)" } ?? ""); only the owner, outside `scopefs run`, can \(action) (SPEC S5)"
        )
    }

    /// The app the daemon serving `state` takes this process for (nil for
    /// the owner's processes, or when no daemon answers).
    private static func appNamedByDaemon(_ state: StateDirectory, seconds: Int) -> String? {
        guard FileManager.default.fileExists(atPath: state.controlSocketPath),
            let response = try? ControlClient.send(.whoami, state: state, timeoutSeconds: seconds)
        else { return nil }
        return response.app
    }

    /// Whether `/proc/self/cgroup` places this process in a run's cgroup.
    package static func inRunCgroup() -> Bool {
        guard let path = ProcFS.cgroup2Path(of: "self") else { return false }
        return path.split(separator: "/").contains { $0.hasPrefix(AppCgroups.leafPrefix) }
    }
}
