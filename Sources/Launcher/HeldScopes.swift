import Policy

/// `scopefs run --hold-scopes` (issue 50, finding 3): a program that knows
/// nothing of security scopes, run in scope. Strict scopes (SPEC S9) stay
/// what the mount enforces: the run's first process starts a scope on
/// each item, as `scopefs scope exec` does (it becomes CMD, same pid), so
/// CMD and the processes it starts hold them while CMD runs (S9's choice:
/// a helper inherits the scopes its parent holds); they end with CMD,
/// without leak events (S11), and a revoke still cuts them (S14).
public struct HeldScopes: Sendable, Equatable {
    /// The items named (`--hold-scope`), as paths in the app's view
    /// (`Providers/local/docs`): one that cannot be started stops the run.
    public var paths: [String]
    /// The app's grants (`--hold-scopes`), as read before the run: one that
    /// ended meanwhile (a session grant of the last run, a revoke) is
    /// skipped with a warning.
    public var grantPaths: [String]

    public init(paths: [String] = [], grantPaths: [String] = []) {
        self.paths = paths
        self.grantPaths = grantPaths
    }

    /// The view path of a provider's item (`.` or empty: its root).
    public static func viewPath(provider: ProviderID, path: String) -> String {
        MountLayout.providerPath(provider: provider, path: path == "." ? "" : path)
    }

    /// `command`, preceded by `scopefs scope exec` with a start on every
    /// path under `appDirectory` (the app's `$SCOPEFS_MOUNT`); `command`
    /// itself when there is none. Without a named item, scope exec's own
    /// PATH is the container, where a start is "not needed" (SPEC S9).
    func wrapping(_ command: [String], binary: String, appDirectory: String) -> [String] {
        guard !paths.isEmpty || !grantPaths.isEmpty else { return command }
        var argv = [binary, "scope", "exec"]
        for path in grantPaths { argv += ["--also-if-granted", appDirectory + "/" + path] }
        for path in paths.dropLast() { argv += ["--also", appDirectory + "/" + path] }
        let last = paths.last ?? MountLayout.container
        return argv + [appDirectory + "/" + last, "--"] + command
    }
}
