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
///
/// A value whose fields live in one immutable box: the daemon copies the
/// grant covering an item into nearly every access decision (cached
/// coverage, the gate's target), and a copy is then one reference count
/// instead of one per string field. Changing a field (rare: the store
/// building a result) makes a new box.
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
    }

    private final class Box: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var box: Box

    private func changed(_ change: (inout Fields) -> Void) -> Box {
        var fields = box.fields
        change(&fields)
        return Box(fields)
    }

    public var id: GrantID {
        get { box.fields.id }
        set { box = changed { $0.id = newValue } }
    }
    public var app: AppID {
        get { box.fields.app }
        set { box = changed { $0.app = newValue } }
    }
    public var provider: ProviderID {
        get { box.fields.provider }
        set { box = changed { $0.provider = newValue } }
    }
    public var item: ItemIdentifier {
        get { box.fields.item }
        set { box = changed { $0.item = newValue } }
    }
    public var relativePath: String {
        get { box.fields.relativePath }
        set { box = changed { $0.relativePath = newValue } }
    }
    public var isDirectory: Bool {
        get { box.fields.isDirectory }
        set { box = changed { $0.isDirectory = newValue } }
    }
    public var access: Access {
        get { box.fields.access }
        set { box = changed { $0.access = newValue } }
    }
    public var state: GrantState {
        get { box.fields.state }
        set { box = changed { $0.state = newValue } }
    }
    /// Seconds since 1970, UTC.
    public var grantedAt: Double {
        get { box.fields.grantedAt }
        set { box = changed { $0.grantedAt = newValue } }
    }

    public init(
        id: GrantID, app: AppID, provider: ProviderID, item: ItemIdentifier,
        relativePath: String, isDirectory: Bool, access: Access, state: GrantState,
        grantedAt: Double
    ) {
        box = Box(
            Fields(
                id: id, app: app, provider: provider, item: item, relativePath: relativePath,
                isDirectory: isDirectory, access: access, state: state, grantedAt: grantedAt))
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
