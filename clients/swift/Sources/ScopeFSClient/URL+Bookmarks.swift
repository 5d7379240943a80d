import Foundation

// swift-corelibs-foundation (Swift 6.3.1 on Linux) has no bookmark API on
// URL or NSURL (no `bookmarkData(options:…)`, no `BookmarkCreationOptions`),
// so Apple's names are provided here, backed by ScopeFS bookmarks
// (SPEC S25–S27, S31). `ScopeFS.bookmark(for:readOnly:)` and
// `ScopeFS.resolveBookmark(_:stateDirectory:)` are the same with typed errors.

extension URL {
    /// Options for `bookmarkData(options:includingResourceValuesForKeys:relativeTo:)`,
    /// with Apple's names and raw values. Every ScopeFS bookmark is
    /// security-scoped; only `securityScopeAllowOnlyReadAccess` changes it.
    public struct BookmarkCreationOptions: OptionSet, Hashable, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        /// Accepted and ignored.
        public static let minimalBookmark = BookmarkCreationOptions(rawValue: 1 << 9)
        /// Accepted and ignored.
        public static let suitableForBookmarkFile = BookmarkCreationOptions(rawValue: 1 << 10)
        /// A security-scoped bookmark: what every ScopeFS bookmark is.
        public static let withSecurityScope = BookmarkCreationOptions(rawValue: 1 << 11)
        /// A read-only bookmark (`user.scopefs.bookmark-read-only`, SPEC S25).
        public static let securityScopeAllowOnlyReadAccess = BookmarkCreationOptions(rawValue: 1 << 12)
    }

    /// Options for `init(resolvingBookmarkData:options:relativeTo:bookmarkDataIsStale:)`,
    /// with Apple's names and raw values; all are accepted and have no
    /// effect (resolution never shows UI, never mounts, and never starts a
    /// scope: call `startAccessingSecurityScopedResource()` on the result).
    public struct BookmarkResolutionOptions: OptionSet, Hashable, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        public static let withoutUI = BookmarkResolutionOptions(rawValue: 1 << 8)
        public static let withoutMounting = BookmarkResolutionOptions(rawValue: 1 << 9)
        public static let withSecurityScope = BookmarkResolutionOptions(rawValue: 1 << 10)
        public static let withoutImplicitStartAccessing = BookmarkResolutionOptions(rawValue: 1 << 15)
    }

    /// Bookmark data for the item at this URL, as on iOS/macOS (SPEC S25):
    /// bound to this app, the provider item (not its path) and the grant's
    /// access, and authenticated by the daemon, so it survives renames,
    /// moves and daemon restarts, and any changed byte makes it invalid.
    ///
    /// `keys` and `relativeURL` are accepted for source compatibility and
    /// ignored.
    ///
    /// - Throws: `ScopeFSError` — `.denied` (EPERM: no active grant covers
    ///   the item), `.notVisible` (ENOENT), EINVAL for container paths (they
    ///   need no bookmark: their path does not change).
    public func bookmarkData(
        options: BookmarkCreationOptions = [],
        includingResourceValuesForKeys keys: Set<URLResourceKey>? = nil,
        relativeTo relativeURL: URL? = nil
    ) throws -> Data {
        let readOnly = options.contains(.securityScopeAllowOnlyReadAccess)
        return Data(try ScopeFS.bookmark(for: self, readOnly: readOnly).utf8)
    }

    /// Resolves bookmark data made by this app, as on iOS/macOS (SPEC S26):
    /// the item's current location, and `bookmarkDataIsStale` set to true
    /// when it was renamed or moved (or replaced by a new item of the same
    /// name) — then make a new bookmark. The daemon is found through
    /// `$SCOPEFS_STATE` like the CLI; see `ScopeFS.resolveBookmark` to name
    /// the state directory.
    ///
    /// - Throws: `ScopeFSError` — `.invalidBookmark` (tampered with or not a
    ///   bookmark), ENOENT (the file doesn't exist any more), `.denied`
    ///   (another app's bookmark, a revoked grant, not an app process).
    public init(
        resolvingBookmarkData data: Data,
        options: BookmarkResolutionOptions = [],
        relativeTo relativeURL: URL? = nil,
        bookmarkDataIsStale: inout Bool
    ) throws {
        let resolution = try ScopeFS.resolveBookmark(String(decoding: data, as: UTF8.self))
        bookmarkDataIsStale = resolution.isStale
        self = resolution.url
    }
}
