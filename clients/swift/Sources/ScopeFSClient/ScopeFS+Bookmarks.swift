import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension ScopeFS {
    /// A resolved bookmark (SPEC S26).
    public struct BookmarkResolution: Equatable, Hashable, Sendable {
        /// The item's current location in this app's view of the mount.
        public let url: URL
        /// True when the item was renamed or moved, or deleted and a new item
        /// made under the same name (SPEC S26): make a new bookmark.
        public let isStale: Bool
        /// `"read-write"` or `"read"`: what the bookmark grants.
        public let access: String
        /// The provider ID (`local`, `com.example.drive`, …).
        public let provider: String
        /// The item's path inside its provider.
        public let providerPath: String
    }

    /// A bookmark of the item at `url` (`user.scopefs.bookmark`, SPEC S25):
    /// an opaque ASCII token bound to this app, the item and the grant's
    /// access (`readOnly`: read access only), authenticated by the daemon.
    /// A reference document is followed to its original.
    ///
    /// - Throws: `ScopeFSError` — EPERM, ENOENT as for start; EINVAL for a
    ///   container path (it needs no bookmark: its path never changes).
    public static func bookmark(for url: URL, readOnly: Bool = false) throws(ScopeFSError) -> String {
        let path = try url.scopeFSPath(for: .createBookmark)
        let name = readOnly ? "user.scopefs.bookmark-read-only" : "user.scopefs.bookmark"
        let token: String
        do {
            token = try readAttributeText(name, of: path, for: .createBookmark)
        } catch  where error.errno == ENODATA {
            token = "not-needed"  // the daemon answers ENODATA outside provider views
        }
        if token == "not-needed" {
            throw ScopeFSError(
                errno: EINVAL, operation: .createBookmark, path: path,
                message: "a container item needs no bookmark; keep its path")
        }
        return token
    }

    /// Resolves a bookmark made by this app (SPEC S26, S27) through the
    /// daemon's control socket. Resolving does not start a scope: call
    /// `startAccessing` on the returned URL.
    ///
    /// - Parameter stateDirectory: the daemon's state directory; default:
    ///   `$SCOPEFS_STATE`, else `$XDG_STATE_HOME/scopefs`, else
    ///   `~/.local/state/scopefs` (like the CLI).
    /// - Throws: `ScopeFSError` — `.invalidBookmark` (EBADMSG: tampered with,
    ///   truncated, not a bookmark), ENOENT (the item no longer exists),
    ///   `.denied` (EPERM: another app's bookmark, the grant is revoked or no
    ///   longer covers the item, or the caller is not an app process), or the
    ///   errno of connecting to the socket (ENOENT, ECONNREFUSED: no daemon).
    ///   `message` carries the daemon's explanation.
    public static func resolveBookmark(_ bookmark: String, stateDirectory: String? = nil)
        throws(ScopeFSError) -> BookmarkResolution
    {
        let socketPath = ControlSocket.stateDirectory(explicit: stateDirectory) + "/control.sock"
        struct Request: Encodable {
            let op = "resolve"
            let bookmark: String
        }
        struct Response: Decodable {
            struct Resolution: Decodable {
                let path: String
                let pathInApp: String
                let isStale: Bool
                let access: String
                let provider: String
            }
            let ok: Bool
            let code: Int32?
            let message: String?
            let path: String?
            let resolution: Resolution?
        }
        guard let request = try? JSONEncoder().encode(Request(bookmark: bookmark)) else {
            throw ScopeFSError(errno: EINVAL, operation: .resolveBookmark, path: socketPath)
        }
        let line = try ControlSocket.exchange(request, socketPath: socketPath)
        guard let response = try? JSONDecoder().decode(Response.self, from: line) else {
            throw ScopeFSError(errno: EPROTO, operation: .resolveBookmark, path: socketPath)
        }
        guard response.ok, let resolution = response.resolution, let path = response.path else {
            // The daemon's codes are the CLI's exit codes (docs/API.md, docs/CLI.md).
            let code: Int32 =
                switch response.code {
                case 65: EBADMSG
                case 66: ENOENT
                case 77: EPERM
                default: EPROTO
                }
            throw ScopeFSError(
                errno: code, operation: .resolveBookmark, path: socketPath,
                message: response.message)
        }
        // Inside `scopefs run` the app's view of the mount is $SCOPEFS_MOUNT
        // (MOUNT/APP, or the sandbox's fixed path, SPEC S5); `path` is the
        // path as seen outside a sandbox.
        let location: String
        if let appRoot = ProcessInfo.processInfo.environment["SCOPEFS_MOUNT"], appRoot.hasPrefix("/") {
            location = appRoot + "/" + resolution.pathInApp
        } else {
            location = path
        }
        return BookmarkResolution(
            url: URL(fileURLWithPath: location), isStale: resolution.isStale, access: resolution.access,
            provider: resolution.provider, providerPath: resolution.path)
    }
}
