import Foundation
import Policy
import PolicyStore

/// Grant and item rows as the fleet's reads send them in JSON: arrays, not
/// objects, so that a key is not repeated in every row.
enum FleetRows {
    /// An item row: `[id, provider, path, directory, missing]`.
    ///
    /// Without the file identity the owner's host recorded (device and
    /// inode): that is a fact of one host's view of the shared storage.
    /// Another host sees the same file with another device number (every
    /// NFS client does), and no fleet daemon relocates items, so after an
    /// editor's save on the host (a new file renamed over the name) the
    /// identity would name a file gone for good. Compared, either hid the
    /// granted item (ENOENT) on every host. On a fleet a grant's path alone
    /// decides what it covers, as for an item marked missing (decision 62).
    static let itemColumns = "json_build_array(id, provider_id, relative_path, is_directory, missing)"

    /// A grant row: `[id, app, item, access, state, granted, session]`,
    /// then its item's `provider, path, directory` when `joined` (`g` is the
    /// grant, `i` its item).
    static func grantColumns(joined: Bool) -> String {
        "json_build_array(g.id, g.app_id, g.item_id, g.access, g.state, g.granted_at, g.session"
            + (joined ? ", i.provider_id, i.relative_path, i.is_directory)" : ")")
    }

    struct ItemRow: Decodable {
        var id: String
        var provider: String
        var path: String
        var directory: Bool
        var missing: Bool

        init(from decoder: any Decoder) throws {
            var row = try decoder.unkeyedContainer()
            id = try row.decode(String.self)
            provider = try row.decode(String.self)
            path = try row.decode(String.self)
            directory = try row.decode(Bool.self)
            missing = try row.decode(Bool.self)
        }

        func location(_ pool: inout StringPool) -> ItemLocation {
            ItemLocation(provider: pool(provider), path: pool(path), isDirectory: directory, exists: !missing)
        }
    }

    struct GrantRow: Decodable {
        var id: Int64
        var app: String
        var item: String
        var access: String
        var state: String
        var granted: Double
        var session: Bool
        /// The item's provider, path and kind, when the row carries them.
        var provider: String?
        var path: String?
        var directory: Bool?

        init(from decoder: any Decoder) throws {
            var row = try decoder.unkeyedContainer()
            id = try row.decode(Int64.self)
            app = try row.decode(String.self)
            item = try row.decode(String.self)
            access = try row.decode(String.self)
            state = try row.decode(String.self)
            granted = try row.decode(Double.self)
            session = try row.decode(Bool.self)
            if !row.isAtEnd {
                provider = try row.decode(String.self)
                path = try row.decode(String.self)
                directory = try row.decode(Bool.self)
            }
        }

        /// The grant, its item's fields from the row or else from `items`;
        /// nil for an item neither has (the store's foreign key forbids it).
        func grant(items: [ItemIdentifier: ItemLocation], _ pool: inout StringPool) -> Grant? {
            FleetRows.grant(
                id: id, app: app, item: item, access: access, state: state, granted: granted, session: session,
                located: provider.map { ($0, path ?? "", directory ?? false) }, items: items, &pool)
        }
    }

    /// A grant from its row's fields; its item's provider, path and kind
    /// from `located` or else from `items`.
    static func grant(
        id: Int64, app: String, item: String, access: String, state: String, granted: Double, session: Bool,
        located: (provider: String, path: String, directory: Bool)?, items: [ItemIdentifier: ItemLocation],
        _ pool: inout StringPool
    ) -> Grant? {
        guard let place = located ?? items[item].map({ ($0.provider, $0.path, $0.isDirectory) }) else { return nil }
        return Grant(
            id: id, app: pool(app), provider: pool(place.provider), item: pool(item),
            relativePath: pool(place.path), isDirectory: place.directory,
            access: Access(rawValue: access) ?? .read, state: GrantState(rawValue: state) ?? .revoked,
            grantedAt: granted, isSession: session)
    }
}
