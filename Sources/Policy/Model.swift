/// The vocabulary of SPEC §1, as plain values. Nothing here touches the
/// file system, libfuse or SQLite, so the policy engine can be tested in memory.

public typealias AppID = String
public typealias ProviderID = String
public typealias ItemIdentifier = String
public typealias GrantID = Int64

/// A named storage location with a backing directory on the host (SPEC §1).
/// An extension's provider (SPEC S41) has the replica of its items as its
/// directory, under the state directory.
public struct Provider: Sendable, Hashable, Codable {
    public var id: ProviderID
    public var name: String
    public var directory: String
    /// The extension that supplies the items; nil for a local folder.
    public var `extension`: ProviderExtensionSpec?

    public init(id: ProviderID, name: String, directory: String, extension: ProviderExtensionSpec? = nil) {
        self.id = id
        self.name = name
        self.directory = directory
        self.extension = `extension`
    }
}

/// How to start a provider's extension (`scopefs provider add --extension`).
/// Never credentials: extensions read those from the usual places.
public struct ProviderExtensionSpec: Sendable, Hashable, Codable {
    /// A built-in extension's name (`s3`, `rclone`, `folder`), or nil for
    /// a command of the owner's.
    public var name: String?
    /// The owner's command (argv), when `name` is nil.
    public var command: [String]?
    /// `--option KEY=VALUE`: `initialize`'s options.
    public var options: [String: String]
    /// `--writable PATH`: host folders the extension's sandbox may write
    /// (a store that is a local folder); nil: none.
    public var writablePaths: [String]?
    /// `--cache-quota BYTES`: downloaded content kept at most (least
    /// recently used first out; never pinned, dirty or open items).
    public var cacheQuota: Int64?

    /// Why a fleet's host may not start this extension, nil when it may
    /// (decision 63): every host runs what the fleet's store names, so the
    /// store may name data for them, never code or host paths to open.
    public var refusedOnFleet: String? {
        if command != nil { return "a command of the owner's: every host of the fleet would run it" }
        if !(writablePaths ?? []).isEmpty {
            return "--writable paths: every host of the fleet would open them to the extension"
        }
        return nil
    }

    public init(
        name: String?, command: [String]?, options: [String: String], writablePaths: [String]? = nil,
        cacheQuota: Int64? = nil
    ) {
        self.name = name
        self.command = command
        self.options = options
        self.writablePaths = writablePaths
        self.cacheQuota = cacheQuota
    }
}

/// An app ID (reverse-DNS) and its display name (SPEC §1).
public struct App: Sendable, Hashable, Codable {
    public var id: AppID
    public var name: String
    /// Whether the app's reads may download an extension's dataless items
    /// (SPEC S42); nil: on demand, as every app by default.
    public var downloads: DownloadPolicy?

    public init(id: AppID, name: String, downloads: DownloadPolicy? = nil) {
        self.id = id
        self.name = name
        self.downloads = downloads
    }
}

/// An app's materialization policy, as Apple's iopolicy
/// (IOPOL_TYPE_VFS_MATERIALIZE_DATALESS_FILES): an indexer or a backup
/// tool set to `never` reads only what is already downloaded, and gets
/// EDEADLK (Apple's errno for it) for the rest, causing no traffic.
public enum DownloadPolicy: String, Sendable, Hashable, Codable, CaseIterable {
    case onDemand = "on-demand"
    case never
}

public enum Access: String, Sendable, Codable, CaseIterable {
    case read
    case readWrite = "read-write"
}

public enum GrantState: String, Sendable, Codable, CaseIterable {
    case active
    case revoked
}

/// What the user chose in the document picker for one app (SPEC §1).
/// `relativePath` is where the item was last seen inside its provider
/// ("" is the provider's root folder); the grant itself is keyed by the
/// item identifier.
///
/// A value whose fields live in one immutable box: the daemon copies the
/// grant covering an item into nearly every access decision (cached
/// coverage, the gate's target), and a copy is then one reference count
/// instead of one per string field. Changing a field (rare: the store
/// after a revoke or restore) makes a new box.
public struct Grant: Sendable, Hashable, Codable {
    private struct Fields: Sendable, Hashable, Codable {
        var id: GrantID
        var app: AppID
        var provider: ProviderID
        var item: ItemIdentifier
        var relativePath: String
        var isDirectory: Bool
        var access: Access
        var state: GrantState
        var grantedAt: Double
        var isSession: Bool
    }

    private final class Box: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private let box: Box

    public var id: GrantID { box.fields.id }
    public var app: AppID { box.fields.app }
    public var provider: ProviderID { box.fields.provider }
    public var item: ItemIdentifier { box.fields.item }
    public var relativePath: String { box.fields.relativePath }
    public var isDirectory: Bool { box.fields.isDirectory }
    public var access: Access { box.fields.access }
    public var state: GrantState { box.fields.state }
    /// Seconds since 1970, UTC.
    public var grantedAt: Double { box.fields.grantedAt }
    /// A session grant ends when the app's last process exits, like
    /// Android's non-persisted URI grants and Flatpak's `--transient`.
    public var isSession: Bool { box.fields.isSession }

    /// The same grant in another state (after a revoke or a restore).
    public func with(state: GrantState) -> Grant {
        var fields = box.fields
        fields.state = state
        return Grant(box: Box(fields))
    }

    private init(box: Box) {
        self.box = box
    }

    public init(
        id: GrantID, app: AppID, provider: ProviderID, item: ItemIdentifier,
        relativePath: String, isDirectory: Bool, access: Access, state: GrantState,
        grantedAt: Double, isSession: Bool = false
    ) {
        box = Box(
            Fields(
                id: id, app: app, provider: provider, item: item, relativePath: relativePath,
                isDirectory: isDirectory, access: access, state: state, grantedAt: grantedAt, isSession: isSession))
    }

    public static func == (a: Grant, b: Grant) -> Bool {
        a.box === b.box || a.box.fields == b.box.fields
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(box.fields)
    }

    // The same keys as the fields: JSON output is unchanged.
    public init(from decoder: any Decoder) throws {
        box = Box(try Fields(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        try box.fields.encode(to: encoder)
    }
}
