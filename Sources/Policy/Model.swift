/// The vocabulary of SPEC §1, as plain values. Nothing here touches the
/// file system, libfuse or SQLite, so the policy engine can be tested in memory.

public typealias AppID = String
public typealias ProviderID = String
public typealias ItemIdentifier = String
public typealias GrantID = Int64

/// A named storage location with a backing directory on the host (SPEC §1).
public struct Provider: Sendable, Hashable, Codable {
    public var id: ProviderID
    public var name: String
    public var directory: String

    public init(id: ProviderID, name: String, directory: String) {
        self.id = id
        self.name = name
        self.directory = directory
    }
}

/// An app ID (reverse-DNS) and its display name (SPEC §1).
public struct App: Sendable, Hashable, Codable {
    public var id: AppID
    public var name: String

    public init(id: AppID, name: String) {
        self.id = id
        self.name = name
    }
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
public struct Grant: Sendable, Hashable, Codable {
    public var id: GrantID
    public var app: AppID
    public var provider: ProviderID
    public var item: ItemIdentifier
    public var relativePath: String
    public var isDirectory: Bool
    public var access: Access
    public var state: GrantState
    /// Seconds since 1970, UTC.
    public var grantedAt: Double

    public init(
        id: GrantID, app: AppID, provider: ProviderID, item: ItemIdentifier,
        relativePath: String, isDirectory: Bool, access: Access, state: GrantState,
        grantedAt: Double
    ) {
        self.id = id
        self.app = app
        self.provider = provider
        self.item = item
        self.relativePath = relativePath
        self.isDirectory = isDirectory
        self.access = access
        self.state = state
        self.grantedAt = grantedAt
    }
}
