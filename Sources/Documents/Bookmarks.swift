import CommandErrors
import Crypto
import Foundation
import Policy
import PolicyStore

/// Bookmarks (SPEC S25–S27): an opaque token bound to an app, a provider
/// item and an access, authenticated with HMAC-SHA256 under a key kept in
/// the state directory (mode 0600). Any changed byte makes it invalid.
///
/// Token: base64url(payload JSON) "." base64url(HMAC(key, payload)).
public struct Bookmark: Codable, Sendable, Equatable {
    public var version = 1
    public var app: AppID
    public var provider: ProviderID
    public var item: ItemIdentifier
    public var access: Access
    /// Where the item was when the bookmark was made (stale detection).
    public var path: String

    public init(app: AppID, provider: ProviderID, item: ItemIdentifier, access: Access, path: String) {
        self.app = app
        self.provider = provider
        self.item = item
        self.access = access
        self.path = path
    }
}

public struct BookmarkCodec: Sendable {
    // Kept as bytes: SymmetricKey is not Sendable in this swift-crypto.
    private let keyBytes: Data
    private var key: SymmetricKey { SymmetricKey(data: keyBytes) }

    /// Loads the state directory's key, creating it (0600) on first use.
    public init(state: StateDirectory) throws(CommandError) {
        let path = state.path + "/bookmark.key"
        if let data = FileManager.default.contents(atPath: path), data.count == 32 {
            keyBytes = data
            return
        }
        let fresh = SymmetricKey(size: .bits256)
        let data = fresh.withUnsafeBytes { Data($0) }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor < 0 {
            // Another process created it first: use theirs.
            guard let existing = FileManager.default.contents(atPath: path), existing.count == 32 else {
                throw CommandError(
                    .ioError, "cannot create the bookmark key \(path): \(String(cString: strerror(errno)))")
            }
            keyBytes = existing
            return
        }
        defer { close(descriptor) }
        let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(descriptor) == 0 else {
            throw CommandError(.ioError, "cannot write the bookmark key \(path)")
        }
        keyBytes = data
    }

    public init(key: Data) {
        self.keyBytes = key
    }

    public func encode(_ bookmark: Bookmark) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let payload = (try? encoder.encode(bookmark)) ?? Data()
        let mac = Data(HMAC<SHA256>.authenticationCode(for: payload, using: key))
        return payload.base64URL + "." + mac.base64URL
    }

    /// Verifies and decodes a token; tampering of any byte is rejected.
    public func decode(_ token: String) throws(CommandError) -> Bookmark {
        let invalid = CommandError(.badData, "bookmark is invalid: tampered with, truncated, or not a ScopeFS bookmark")
        let parts = token.trimmingCharacters(in: .whitespacesAndNewlines).split(
            separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let payload = Data(base64URL: String(parts[0])),
            let mac = Data(base64URL: String(parts[1])),
            payload.base64URL == parts[0], mac.base64URL == parts[1],
            HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: payload, using: key),
            let bookmark = try? JSONDecoder().decode(Bookmark.self, from: payload), bookmark.version == 1,
            // ScopeFS writes only plain provider-relative paths; one with
            // `..` or a leading "/" was forged with the key (SPEC S33).
            RelativePath.normalize(bookmark.path) == bookmark.path
        else { throw invalid }
        return bookmark
    }
}

extension Data {
    var base64URL: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    init?(base64URL text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        self.init(base64Encoded: base64)
    }
}

/// The outcome of resolving a bookmark (SPEC S26).
public struct BookmarkResolution: Codable, Sendable {
    public var provider: ProviderID
    /// The item's path inside its provider now.
    public var path: String
    /// The same, inside the app's directory of the mount (`Providers/<p>/<path>`).
    public var pathInApp: String
    public var isStale: Bool
    public var access: Access
}

public struct BookmarkService: Sendable {
    public let codec: BookmarkCodec
    /// Where a bookmark's item identifier is read, or recorded.
    public let repository: any IsolationStore

    public init(codec: BookmarkCodec, repository: any IsolationStore) {
        self.codec = codec
        self.repository = repository
    }

    /// A bookmark for an item the app can access (the caller checked that).
    public func create(app: AppID, provider: ProviderID, path: String, access: Access) throws(CommandError) -> String {
        let item = try repository.itemIdentifier(provider: provider, path: path)
        return codec.encode(Bookmark(app: app, provider: provider, item: item, access: access, path: path))
    }

    /// Resolves a bookmark presented by a process of `app`. It answers only
    /// where the app's grants reach: a refusal names no other app and no
    /// path the bookmark did not hold, and what lies outside the app's
    /// grants is never looked at, so even a bookmark forged with the key is
    /// no oracle of another app or of the host (issue 28 findings 3, 5).
    ///
    /// It decides by `snapshot` — the daemon's served one, with items
    /// located — and never reads the policy from the store: an app's
    /// resolutions must not queue in front of the policy's reloads (a
    /// revoke's way to EPERM), and a revoke the daemon holds in memory
    /// (S34) or a fail-closed daemon (S44) refuses them as it refuses the
    /// app's reads.
    public func resolve(_ token: String, by app: AppID, in snapshot: PolicySnapshot) throws(CommandError)
        -> BookmarkResolution
    {
        let bookmark = try codec.decode(token)
        guard bookmark.app == app else {
            throw CommandError(.refused, "this bookmark was made for another app; \(app) cannot resolve it")
        }
        let notCovered = CommandError(
            .refused, "\(app) no longer has a grant covering the bookmarked item \(bookmark.provider):\(bookmark.path)")
        // An item recorded for the bookmark inside a folder grant is in the
        // store, not necessarily in the served policy: one row is read.
        var location = snapshot.items[bookmark.item]
        if location == nil { location = try repository.itemLocation(bookmark.item) }
        let located = location.flatMap {
            $0.exists && $0.provider == bookmark.provider ? $0.path : nil
        }
        let path: String
        if let located {
            path = located
        } else {
            // The item is gone: whatever is at its old path now is looked
            // for only inside the app's own grants.
            guard case .granted = snapshot.coverage(app: app, provider: bookmark.provider, path: bookmark.path) else {
                throw notCovered
            }
            guard
                ItemLocator.exists(
                    at: snapshot.providers[bookmark.provider]?.directory ?? "/nonexistent", bookmark.path)
            else {
                throw CommandError(
                    .noInput,
                    "file doesn't exist: the bookmarked item \(bookmark.provider):\(bookmark.path) was deleted")
            }
            path = bookmark.path  // deleted, and a new item made under the same name
        }
        let stale = path != bookmark.path || located == nil
        // Any active grant covering the item resolves it (SPEC S9), as the
        // one access rule says for a read of its metadata (no scope: the
        // app starts one on the resolved URL).
        let coverage = snapshot.coverage(app: app, provider: bookmark.provider, path: path)
        guard case .granted = coverage else {
            throw notCovered  // names the bookmark's path, never where the item is now
        }
        let decision = Decision.permit(
            .metadata, coverage: coverage, caller: .anyProcess(of: app),
            enclosing: { snapshot.enclosingGrants(of: $0.id) })
        guard case .success = decision else {
            throw CommandError(.refused, "the grant for this bookmark is revoked; restore it with `scopefs restore`")
        }
        return BookmarkResolution(
            provider: bookmark.provider, path: path,
            pathInApp: MountLayout.providerPath(provider: bookmark.provider, path: path), isStale: stale,
            access: bookmark.access)
    }
}
