import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The throwing API of ScopeFS security scopes (SPEC S6–S12).
///
/// `URL.startAccessingSecurityScopedResource()` follows Apple and folds every
/// outcome into a `Bool`; these functions tell the outcomes apart and throw
/// a `ScopeFSError` carrying errno when the call fails. Each call is one
/// getxattr(2) on the path (docs/API.md), made by the calling process: the
/// counter belongs to this process, and a child process that the app spawns
/// inherits the scopes its parent holds while the parent holds them (SPEC S9).
public enum ScopeFS {
    /// The outcome of a successful start (SPEC S6, S9).
    public enum StartResult: Equatable, Hashable, Sendable {
        /// The caller's counter on the nearest covering grant was raised;
        /// `count` is its new value (1 after the first start; starts nest,
        /// SPEC S8). Balance it with exactly one stop.
        case started(count: Int)
        /// The path needs no scope (a container path, SPEC S9): nothing was
        /// counted and no stop is needed.
        case notNeeded

        /// Whether a scope was counted (what `startAccessingSecurityScopedResource()` returns).
        public var isCounted: Bool {
            if case .started = self { return true }
            return false
        }
    }

    /// The outcome of a successful stop (SPEC S7).
    public enum StopResult: Equatable, Hashable, Sendable {
        /// The counter was lowered; `count` is its new value. At zero, the
        /// next content operation fails with EPERM in strict mode (SPEC S8),
        /// although descriptors opened in scope keep working (SPEC S9).
        case stopped(count: Int)
        /// The counter was already zero: nothing changed; the daemon records
        /// an "unbalanced stop" event (SPEC S7, S29).
        case unbalanced
        /// The path needs no scope (SPEC S9).
        case notNeeded
    }

    /// Starts accessing `url` (SPEC S6): raises this process's counter on the
    /// nearest active grant of its app that covers the item. A reference
    /// document is followed to its original.
    ///
    /// - Returns: `.started(count:)`, or `.notNeeded` for container paths.
    /// - Throws: `ScopeFSError` — `.denied` (EPERM: no active grant, revoked,
    ///   not an app process), `.budgetExhausted` (EDQUOT, SPEC S10),
    ///   `.notVisible` (ENOENT, SPEC S2/S3), `.notScopeFS` outside a mount.
    @discardableResult
    public static func startAccessing(_ url: URL) throws(ScopeFSError) -> StartResult {
        let path = try url.scopeFSPath(for: .start)
        switch try readControlAttribute(.start, of: path, for: .start) {
        case .counter(let count): return .started(count: count)
        case .notNeeded: return .notNeeded
        case .unbalanced: throw ScopeFSError(errno: EPROTO, operation: .start, path: path)
        }
    }

    /// Stops accessing `url` (SPEC S7): lowers this process's counter by one,
    /// never below zero. Call it once for every start that returned
    /// `.started`.
    ///
    /// - Returns: `.stopped(count:)`, `.unbalanced` or `.notNeeded`; an
    ///   unbalanced stop is not an error (docs/API.md).
    /// - Throws: `ScopeFSError` (EPERM, ENOENT, … as for start).
    @discardableResult
    public static func stopAccessing(_ url: URL) throws(ScopeFSError) -> StopResult {
        let path = try url.scopeFSPath(for: .stop)
        switch try readControlAttribute(.stop, of: path, for: .stop) {
        case .counter(let count): return .stopped(count: count)
        case .unbalanced: return .unbalanced
        case .notNeeded: return .notNeeded
        }
    }

    /// This process's own counter on the nearest active grant covering `url`
    /// (`user.scopefs.scope`, SPEC S12).
    ///
    /// - Returns: the counter (0 when this process holds no scope there), or
    ///   nil when the path needs no scope (container paths, SPEC S9).
    /// - Throws: `ScopeFSError` (EPERM, ENOENT, … as for start).
    public static func scopeCount(_ url: URL) throws(ScopeFSError) -> Int? {
        let path = try url.scopeFSPath(for: .scopeCount)
        switch try readControlAttribute(.scope, of: path, for: .scopeCount) {
        case .counter(let count): return count
        case .notNeeded: return nil
        case .unbalanced: throw ScopeFSError(errno: EPROTO, operation: .scopeCount, path: path)
        }
    }
}
