import CommandErrors
import Foundation
import Policy
import PolicyStore
import PostgresNIO

/// Many grants in one transaction (`scopefs fleet grant --from FILE`,
/// issue 34): a fixed number of statements whatever the number of items,
/// each binding whole arrays that the server `unnest`s. A `fleet grant`
/// per item costs a process, a login and about eight round trips, and
/// 10,000 of them per app take minutes; this takes a second or two.
extension FleetRepository {
    public func grantAll(app: AppID, items: [GrantItem], access: Access, wholeProvider: Bool) throws(CommandError)
        -> [GrantChange]
    {
        let requests = try IsolationRequest.grantPaths(items, wholeProvider: wholeProvider)
        let host = self.host
        let pid = getpid()
        // One change may take `SCOPEFS_FLEET_TIMEOUT`; many rows take longer
        // (about 0.1 s per 1,000 items on a loaded 2-core machine), so
        // give them five times that.
        let extra = Double(requests.count) / 2_000
        return try database.transaction(extra: extra) { connection in
            guard try await Self.count(connection, "SELECT 1 FROM apps WHERE id = \(app)") > 0 else {
                throw CommandError.unknownApp(app)
            }
            let providers = Dictionary(
                try await Self.fetchProviders(connection, servedFrom: replicas).map { ($0.id, $0) },
                uniquingKeysWith: { first, _ in first })
            var wanted: [WantedItem] = []
            wanted.reserveCapacity(requests.count)
            for (item, path) in requests {
                let file = try IsolationRequest.naming(item) {
                    guard let provider = providers[item.provider] else {
                        throw CommandError.unknownProvider(item.provider)
                    }
                    return try ProviderItemIdentity.inspect(provider: provider, path: path)
                }
                wanted.append(WantedItem(provider: item.provider, path: path, file: file))
            }
            let itemIDs = try await Self.upsertItems(connection, wanted)
            let previous = Dictionary(
                try await Self.fetchGrants(connection, app: app, items: itemIDs).map { ($0.item, $0) },
                uniquingKeysWith: { first, _ in first })
            let now = Date().timeIntervalSince1970
            // A replacing grant: this access, persistent (GrantChange.resolved with `.replace`).
            var stored: [ItemIdentifier: (id: GrantID, grantedAt: Double)] = [:]
            for try await (id, item, grantedAt) in try await connection.query(
                """
                INSERT INTO grants (app_id, item_id, access, state, granted_at, changed_at, session)
                SELECT \(app), item, \(access.rawValue), 'active', \(now), \(now), false
                FROM unnest(\(itemIDs)::text[]) AS item
                ON CONFLICT (app_id, item_id) DO UPDATE
                SET access = excluded.access, state = 'active', changed_at = excluded.changed_at,
                    session = false, session_host = NULL
                RETURNING id, item_id, granted_at
                """, logger: FleetDatabase.logger
            ).decode((Int64, String, Double).self) {
                stored[item] = (id, grantedAt)
            }
            var changes: [GrantChange] = []
            changes.reserveCapacity(wanted.count)
            for (wanted, item) in zip(wanted, itemIDs) {
                guard let row = stored[item] else {
                    throw CommandError(
                        .internalError, "grant of \(wanted.provider):\(wanted.path) vanished in its transaction")
                }
                let grant = Grant(
                    id: row.id, app: app, provider: wanted.provider, item: item, relativePath: wanted.path,
                    isDirectory: wanted.file.isDirectory, access: access, state: .active, grantedAt: row.grantedAt)
                changes.append(GrantChange(grant: grant, previous: previous[item]))
            }
            // Every grant is an event (SPEC S29), as a `grant` writes it.
            let paths = changes.map {
                MountLayout.providerPath(app: app, provider: $0.grant.provider, path: $0.grant.relativePath)
            }
            try await connection.query(
                """
                INSERT INTO events (time, host, kind, app, pid, path, operation, grant_id)
                SELECT \(now), \(host), 'grant', \(app), \(pid), path, 'grant', grant_id
                FROM unnest(\(paths)::text[], \(changes.map(\.grant.id))::int8[]) AS e(path, grant_id)
                """, logger: FleetDatabase.logger)
            return changes
        }
    }

    /// An item a bulk grant names, as found on this host.
    struct WantedItem: Sendable {
        var provider: ProviderID
        var path: String
        var file: ProviderItemIdentity
    }

    /// `upsertItem` for many items in three statements: the identifiers of
    /// the items at these paths, recording new ones (an item whose file
    /// identity changed gets a new identifier, as one grant gives it).
    static func upsertItems(_ connection: PostgresConnection, _ wanted: [WantedItem]) async throws
        -> [ItemIdentifier]
    {
        var found: [String: (id: ItemIdentifier, file: [Int64])] = [:]
        for try await (id, provider, path, device, inode, seconds, nanoseconds) in try await connection.query(
            """
            SELECT i.id, i.provider_id, i.relative_path, i.device, i.inode, i.birth_seconds, i.birth_nanoseconds
            FROM items i JOIN unnest(\(wanted.map(\.provider))::text[], \(wanted.map(\.path))::text[]) AS w(provider, path)
                ON i.provider_id = w.provider AND i.relative_path = w.path
            FOR UPDATE OF i
            """, logger: FleetDatabase.logger
        ).decode((String, String, String, Int64, Int64, Int64, Int64).self) {
            found["\(provider):\(path)"] = (id, [device, inode, seconds, nanoseconds])
        }
        var identifiers: [ItemIdentifier] = []
        var gone: [ItemIdentifier] = []
        var new: [(id: ItemIdentifier, item: WantedItem)] = []
        for item in wanted {
            if let existing = found["\(item.provider):\(item.path)"] {
                let file = item.file
                if existing.file == [file.device, file.inode, file.birthSeconds, file.birthNanoseconds] {
                    identifiers.append(existing.id)
                    continue
                }
                // Same path, new file: the old item no longer lives here.
                gone.append(existing.id)
            }
            let id = UUID().uuidString.lowercased()
            new.append((id, item))
            identifiers.append(id)
        }
        if !gone.isEmpty {
            try await connection.query(
                "UPDATE items SET relative_path = relative_path || ' (gone ' || id || ')' WHERE id = ANY(\(gone)::text[])",
                logger: FleetDatabase.logger)
        }
        if !new.isEmpty {
            try await connection.query(
                """
                INSERT INTO items (id, provider_id, relative_path, is_directory, device, inode, birth_seconds, birth_nanoseconds)
                SELECT * FROM unnest(\(new.map(\.id))::text[], \(new.map(\.item.provider))::text[],
                    \(new.map(\.item.path))::text[], \(new.map(\.item.file.isDirectory))::bool[],
                    \(new.map(\.item.file.device))::int8[], \(new.map(\.item.file.inode))::int8[],
                    \(new.map(\.item.file.birthSeconds))::int8[], \(new.map(\.item.file.birthNanoseconds))::int8[])
                """, logger: FleetDatabase.logger)
        }
        return identifiers
    }
}
