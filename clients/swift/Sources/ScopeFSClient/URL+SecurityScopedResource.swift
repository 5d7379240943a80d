import Foundation

// Why an extension on URL and not a separate type: swift-corelibs-foundation
// (checked with Swift 6.3.1 on Linux) defines neither
// `URL.startAccessingSecurityScopedResource()` nor
// `stopAccessingSecurityScopedResource()` (nor the NSURL methods), so the
// Apple names can be provided on URL itself and iOS/macOS code compiles
// unchanged on Linux. Should a future Foundation on Linux add them, calls
// would become ambiguous and this extension would have to move to a
// separate type.

extension URL {
    /// Starts accessing the security-scoped resource at this URL, as on
    /// iOS/macOS (SPEC S6, S31).
    ///
    /// In strict mode (the default, SPEC S9) an app process may open, read,
    /// write or list a provider item only while it (or an ancestor in the
    /// same app process tree) holds a scope on a grant covering it. Starts
    /// nest (SPEC S8): balance every `true` with one
    /// `stopAccessingSecurityScopedResource()`.
    ///
    /// - Returns: `true` when a scope was counted. `false` when none is
    ///   needed (container paths, SPEC S9 — like Apple, which returns `false`
    ///   for URLs that are not security-scoped) or when the start failed
    ///   (no active grant, revoked, budget exhausted, invisible, not inside a
    ///   ScopeFS mount). Use `ScopeFS.startAccessing(_:)` to tell these apart.
    public func startAccessingSecurityScopedResource() -> Bool {
        (try? ScopeFS.startAccessing(self))?.isCounted ?? false
    }

    /// Stops accessing the security-scoped resource at this URL, as on
    /// iOS/macOS (SPEC S7): lowers this process's counter by one, never below
    /// zero (an extra stop is recorded by the daemon as an unbalanced-stop
    /// event). Errors are ignored, like Apple's; use
    /// `ScopeFS.stopAccessing(_:)` to see them.
    ///
    /// Call it only for a start that returned `true`. Descriptors opened
    /// while in scope keep working after the last stop (SPEC S9).
    public func stopAccessingSecurityScopedResource() {
        _ = try? ScopeFS.stopAccessing(self)
    }

    /// This process's security-scope counter for this URL: its counter on the
    /// nearest active grant covering it (`user.scopefs.scope`, SPEC S12),
    /// `0` when it holds no scope there.
    ///
    /// `nil` when the URL needs no scope (container paths, SPEC S9) and when
    /// the query fails (not visible, no grant, not inside a ScopeFS mount);
    /// `ScopeFS.scopeCount(_:)` throws instead.
    public var scopeCount: Int? {
        (try? ScopeFS.scopeCount(self)) ?? nil
    }
}
