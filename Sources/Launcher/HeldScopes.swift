import Policy

/// `scopefs run --hold-scopes` (issue 50, finding 3): a program that knows
/// nothing of security scopes, run in scope. Strict scopes (SPEC S9) stay
/// what the mount enforces: the run's first process starts a scope on
/// each item, as `scopefs scope exec` does (it becomes CMD, same pid), so
/// CMD and the processes it starts hold them while CMD runs (S9's choice:
/// a helper inherits the scopes its parent holds); they end with CMD,
/// without leak events (S11), and a revoke still cuts them (S14).
public struct HeldScopes: Sendable, Equatable {
    /// The items, as paths in the app's view (`Providers/local/docs`).
    public var paths: [String]

    public init(paths: [String] = []) { self.paths = paths }

    /// The view path of a provider's item (`.` or empty: its root).
    public static func viewPath(provider: ProviderID, path: String) -> String {
        MountLayout.providerPath(provider: provider, path: path == "." ? "" : path)
    }

    /// `command`, preceded by `scopefs scope exec` with a start on every
    /// path under `appDirectory` (the app's `$SCOPEFS_MOUNT`); `command`
    /// itself when there is none.
    func wrapping(_ command: [String], binary: String, appDirectory: String) -> [String] {
        guard let last = paths.last else { return command }
        var argv = [binary, "scope", "exec"]
        for path in paths.dropLast() { argv += ["--also", appDirectory + "/" + path] }
        return argv + [appDirectory + "/" + last, "--"] + command
    }
}
