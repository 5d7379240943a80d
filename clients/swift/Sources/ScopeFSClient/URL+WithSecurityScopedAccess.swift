import Foundation

extension URL {
    /// Runs `body` while this process holds a security scope on this URL
    /// (SPEC S6–S9), and stops accessing on every exit path: normal return,
    /// a thrown error, or an early `return` from the closure.
    ///
    ///     let text = try url.withSecurityScopedAccess {
    ///         try String(contentsOf: url, encoding: .utf8)
    ///     }
    ///
    /// When the URL needs no scope (container paths, SPEC S9), `body` simply
    /// runs and no stop is made. Scopes nest (SPEC S8), so the helper can be
    /// used inside another scope on the same grant.
    ///
    /// - Returns: what `body` returns.
    /// - Throws: a `ScopeFSError` when the start fails (EPERM denied, EDQUOT
    ///   budget exhausted, ENOENT invisible; `body` does not run), or
    ///   whatever `body` throws (after the scope was stopped). A failing stop
    ///   is not reported: the body's outcome wins, and the daemon records
    ///   whatever imbalance remains as an event (SPEC S29).
    public func withSecurityScopedAccess<Value>(_ body: () throws -> Value) throws -> Value {
        let started = try ScopeFS.startAccessing(self)
        defer {
            if started.isCounted { _ = try? ScopeFS.stopAccessing(self) }
        }
        return try body()
    }
}
