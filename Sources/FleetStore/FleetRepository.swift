import CommandErrors
import Foundation
import Policy
import PolicyStore
import PostgresNIO

/// The fleet's isolation layer (SPEC S44): the same model as the SQLite
/// store (`PolicyRepository`), in PostgreSQL, shared by every host. Each
/// method is one transaction; grants, revokes and restores write their
/// event in the same transaction, naming the host that made them.
public struct FleetRepository: IsolationStore {
    public let database: FleetDatabase
    /// The state directory whose replicas serve extensions' providers on
    /// this host (decision 63): the store names the replica of the host
    /// that added the provider, a path no other host has.
    public let replicas: StateDirectory?
    /// The channel each change is notified on (LISTEN).
    public static let channel = FleetSchema.channel
    var host: String { database.configuration.hostName }

    public init(database: FleetDatabase, replicas: StateDirectory? = nil) {
        self.database = database
        self.replicas = replicas
    }

    /// Creates or upgrades the schema (the owner's `scopefs init --database`).
    public func migrate() throws(CommandError) { try FleetSchema.migrate(database) }

    /// Checks the schema without changing it (a daemon's role cannot).
    public func checkSchema() throws(CommandError) { try FleetSchema.check(database) }

    // MARK: Snapshot

    /// The snapshot and the version it reflects, read in one read-only
    /// transaction that sees one state of the tables (REPEATABLE READ): a
    /// change committed later has a later version. A daemon reads it at
    /// start and when `changes(since:)` cannot answer; a first read may
    /// take `firstReadAllowance` seconds more than a call.
    public func versionedSnapshot(generation: UInt64) throws(CommandError) -> (snapshot: PolicySnapshot, version: Int64)
    {
        try versionedSnapshot(generation: generation, allowance: Self.firstReadAllowance)
    }

    /// How much longer than a call a daemon's first read may take (s).
    public static let firstReadAllowance = 60.0

    /// `versionedSnapshot`, waiting `allowance` seconds more than one call:
    /// a million grants take seconds to read (about 3 s on a 2-core machine).
    /// Apps, providers and items come as one JSON document; grants, a
    /// million rows at scale, as rows streamed into grants one by one
    /// (a million-row document took 9 s to build and 16 s to read in all).
    public func versionedSnapshot(generation: UInt64, allowance: Double) throws(CommandError)
        -> (snapshot: PolicySnapshot, version: Int64)
    {
        let read = try database.transaction(extra: allowance, snapshot: true) { connection in
            var header: (version: Int64, document: String) = (0, "{}")
            for try await row in try await connection.query(
                PostgresQuery(unsafeSQL: Self.snapshotQuery), logger: FleetDatabase.logger
            ).decode((Int64, String).self) {
                header = row
            }
            let rows: SnapshotRows
            do {
                rows = try JSONDecoder().decode(SnapshotRows.self, from: Data(header.document.utf8))
            } catch {
                throw CommandError(
                    .badState, "fleet database \(database.endpoint.description): unreadable policy (\(error))")
            }
            var pool = StringPool()
            let items = Dictionary(
                rows.items.map { ($0.id, $0.location(&pool)) }, uniquingKeysWith: { first, _ in first })
            var grants: [Grant] = []
            // Another host's session grants are that host's alone (decision 64).
            for try await (id, app, item, access, state, granted, session) in try await connection.query(
                "SELECT id, app_id, item_id, access, state, granted_at, session FROM grants WHERE NOT session OR session_host = \(host)",
                logger: FleetDatabase.logger
            ).decode((Int64, String, String, String, String, Double, Bool).self) {
                guard
                    let grant = FleetRows.grant(
                        id: id, app: app, item: item, access: access, state: state, granted: granted,
                        session: session, located: nil, items: items, &pool)
                else { continue }
                grants.append(grant)
            }
            return SnapshotRead(version: header.version, rows: rows, grants: grants, items: items)
        }
        let snapshot = PolicySnapshot(
            generation: generation,
            apps: read.rows.apps.map {
                App(id: $0.id, name: $0.name, downloads: $0.downloads.flatMap(DownloadPolicy.init))
            },
            providers: read.rows.providers.map {
                Provider(
                    id: $0.id, name: $0.name, directory: $0.directory, extension: Self.decodeExtension($0.extension)
                ).served(from: replicas)
            },
            grants: read.grants, items: read.items)
        return (snapshot, read.version)
    }

    static let snapshotQuery = """
        SELECT (SELECT version FROM policy_version), json_build_object(
            'apps', (SELECT coalesce(json_agg(json_build_object(
                'id', id, 'name', name, 'downloads', downloads) ORDER BY id), '[]') FROM apps),
            'providers', (SELECT coalesce(json_agg(json_build_object(
                'id', id, 'name', name, 'directory', directory, 'extension', extension) ORDER BY id), '[]')
                FROM providers),
            'items', (SELECT coalesce(json_agg(\(FleetRows.itemColumns)), '[]') FROM items))::text
        """

    /// What one snapshot read brings back.
    private struct SnapshotRead: Sendable {
        var version: Int64
        var rows: SnapshotRows
        var grants: [Grant]
        var items: [ItemIdentifier: ItemLocation]
    }

    /// The document of `snapshotQuery`.
    private struct SnapshotRows: Decodable, Sendable {
        struct AppRow: Decodable, Sendable {
            var id: String
            var name: String
            var downloads: String?
        }
        struct ProviderRow: Decodable, Sendable {
            var id: String
            var name: String
            var directory: String
            var `extension`: String?
        }
        var apps: [AppRow]
        var providers: [ProviderRow]
        var items: [FleetRows.ItemRow]
    }

    public func policyVersion() throws(CommandError) -> Int64 {
        try database.run { connection in try await Self.version(connection) }
    }

    // MARK: Apps and providers

    public func addApp(id: AppID, name: String?) throws(CommandError) -> App {
        try Identifier.validate(id, what: "app")
        let app = App(id: id, name: name ?? id)
        let inserted = try database.run { connection in
            try await Self.count(
                connection,
                "INSERT INTO apps (id, name, created_at) VALUES (\(app.id), \(app.name), extract(epoch from now())) ON CONFLICT DO NOTHING RETURNING 1"
            )
        }
        if inserted == 0 { throw IsolationRequest.appExists(id) }
        return app
    }

    public func apps() throws(CommandError) -> [App] {
        try database.run { connection in try await Self.fetchApps(connection) }
    }

    public func setDownloads(_ policy: DownloadPolicy, of id: AppID) throws(CommandError) {
        let value: String? = policy == .onDemand ? nil : policy.rawValue
        let changed = try database.run { connection in
            try await Self.count(connection, "UPDATE apps SET downloads = \(value) WHERE id = \(id) RETURNING 1")
        }
        if changed == 0 { throw CommandError.unknownApp(id) }
    }

    /// Removes an app with its grants (ON DELETE CASCADE), on every host.
    public func removeApp(id: AppID) throws(CommandError) {
        let removed = try database.run { connection in
            try await Self.count(connection, "DELETE FROM apps WHERE id = \(id) RETURNING 1")
        }
        if removed == 0 { throw CommandError.unknownApp(id) }
    }

    /// A provider is a folder at the same path on every host (shared
    /// storage, or a copy of it): grants name items by path and identity.
    public func addProvider(id: ProviderID, directory: String, name: String?, extension spec: ProviderExtensionSpec?)
        throws(CommandError) -> Provider
    {
        try Identifier.validate(id, what: "provider")
        let resolved = try IsolationRequest.providerDirectory(directory)
        let provider = Provider(id: id, name: name ?? id, directory: resolved, extension: spec)
        let encoded = spec.flatMap { try? JSONEncoder().encode($0) }.map { String(decoding: $0, as: UTF8.self) }
        let inserted = try database.run { connection in
            try await Self.count(
                connection,
                """
                INSERT INTO providers (id, name, directory, extension, created_at)
                VALUES (\(provider.id), \(provider.name), \(provider.directory), \(encoded), extract(epoch from now()))
                ON CONFLICT DO NOTHING RETURNING 1
                """)
        }
        if inserted == 0 { throw IsolationRequest.providerExists(id) }
        return provider
    }

    public func providers() throws(CommandError) -> [Provider] {
        let replicas = self.replicas
        return try database.run { connection in try await Self.fetchProviders(connection, servedFrom: replicas) }
    }

    public func removeProvider(id: ProviderID) throws(CommandError) {
        let removed = try database.run { connection in
            try await Self.count(connection, "DELETE FROM providers WHERE id = \(id) RETURNING 1")
        }
        if removed == 0 { throw CommandError.unknownProvider(id) }
    }

    // MARK: Grants

    /// Grants an item, or updates the app's grant of it as `update` says
    /// (SPEC S17): the same rules as the SQLite store's, one transaction.
    public func grant(
        app: AppID, provider providerID: ProviderID, path rawPath: String, access: Access, session: Bool,
        update: GrantUpdate, wholeProvider: Bool
    ) throws(CommandError) -> GrantChange {
        let path = try IsolationRequest.grantPath(rawPath, provider: providerID, wholeProvider: wholeProvider)
        let host = self.host
        return try database.transaction { connection in
            guard try await Self.count(connection, "SELECT 1 FROM apps WHERE id = \(app)") > 0 else {
                throw CommandError.unknownApp(app)
            }
            guard
                let provider = try await Self.fetchProviders(connection, servedFrom: replicas).first(where: {
                    $0.id == providerID
                })
            else {
                throw CommandError.unknownProvider(providerID)
            }
            let file = try ProviderItemIdentity.inspect(provider: provider, path: path)
            let item = try await Self.upsertItem(connection, provider: providerID, path: path, file: file)
            let previous = try await Self.fetchGrants(connection, app: app, items: [item]).first
            let (access, session) = GrantChange.resolved(
                asked: access, session: session, existing: previous, update: update)
            let now = Date().timeIntervalSince1970
            try await connection.query(
                """
                INSERT INTO grants (app_id, item_id, access, state, granted_at, changed_at, session, session_host)
                VALUES (\(app), \(item), \(access.rawValue), 'active', \(now), \(now), \(session),
                    \(session ? host : nil))
                ON CONFLICT (app_id, item_id) DO UPDATE
                SET access = excluded.access, state = 'active', changed_at = excluded.changed_at,
                    session = excluded.session, session_host = excluded.session_host
                """, logger: FleetDatabase.logger)
            guard let grant = try await Self.fetchGrants(connection, app: app, items: [item]).first else {
                throw CommandError(.internalError, "grant of \(providerID):\(path) vanished in its transaction")
            }
            try await Self.recordChange(connection, .grant, grant, host: host)
            return GrantChange(grant: grant, previous: previous)
        }
    }

    /// Removes one grant or all of an app's for good, on every host: one
    /// statement for the grants and one for their events, however many.
    /// `sessionOnly` (an app's last process on this host ended) removes
    /// only this host's session grants (decision 64).
    @discardableResult
    public func forget(app: AppID, grant grantID: GrantID?, sessionOnly: Bool, reason: String)
        throws(CommandError) -> [Grant]
    {
        let host = self.host
        let pid = getpid()
        return try database.transaction(extra: grantID == nil ? Self.allGrantsExtra : 0) { connection in
            guard try await Self.count(connection, "SELECT 1 FROM apps WHERE id = \(app)") > 0 else {
                throw CommandError.unknownApp(app)
            }
            let forgotten = try await Self.grantRows(
                connection,
                """
                DELETE FROM grants g USING items i
                WHERE i.id = g.item_id AND g.app_id = \(app) AND (\(grantID)::int8 IS NULL OR g.id = \(grantID))
                    AND (NOT \(sessionOnly) OR (g.session AND g.session_host = \(host)))
                RETURNING \(unescaped: Self.grantColumns)
                """)
            if let grantID, forgotten.isEmpty,
                try await Self.count(connection, "SELECT 1 FROM grants WHERE id = \(grantID) AND app_id = \(app)") == 0
            {
                throw IsolationRequest.noSuchGrant(grantID, of: app)
            }
            try await Self.recordChanges(connection, .forget, forgotten, host: host, operation: reason, pid: pid)
            return forgotten
        }
    }

    /// Sets the state of one grant or all of an app's; returns those that
    /// changed. Committed when this returns, or an error: never local only.
    /// One statement for the grants and one for their events, however many:
    /// a statement each made revoking an app's 10,000 grants outlast the
    /// call's timeout, and the revoke fail (exit 74).
    @discardableResult
    public func setState(_ state: GrantState, app: AppID, grant grantID: GrantID?, requester: Int32)
        throws(CommandError) -> [Grant]
    {
        let host = self.host
        return try database.transaction(extra: grantID == nil ? Self.allGrantsExtra : 0) { connection in
            guard try await Self.count(connection, "SELECT 1 FROM apps WHERE id = \(app)") > 0 else {
                throw CommandError.unknownApp(app)
            }
            let now = Date().timeIntervalSince1970
            let changed = try await Self.grantRows(
                connection,
                """
                UPDATE grants g SET state = \(state.rawValue), changed_at = \(now) FROM items i
                WHERE i.id = g.item_id AND g.app_id = \(app) AND (\(grantID)::int8 IS NULL OR g.id = \(grantID))
                    AND g.state <> \(state.rawValue)
                RETURNING \(unescaped: Self.grantColumns)
                """)
            if let grantID, changed.isEmpty,
                try await Self.count(connection, "SELECT 1 FROM grants WHERE id = \(grantID) AND app_id = \(app)") == 0
            {
                throw IsolationRequest.noSuchGrant(grantID, of: app)
            }
            try await Self.recordChanges(
                connection, state == .active ? .restore : .revoke, changed, host: host, pid: requester)
            return changed
        }
    }

    /// How much longer than one change a change of all of an app's grants
    /// may take (seconds): 10,000 rows take a fraction of a second in a
    /// release build, more in a debug build on a busy machine.
    static let allGrantsExtra = 30.0

    /// An app's grants or every app's: as many rows as there are, so with
    /// the allowance of a change of all of an app's grants.
    public func grants(app: AppID?) throws(CommandError) -> [Grant] {
        try database.run(extra: Self.allGrantsExtra) { connection in
            if let app, try await Self.count(connection, "SELECT 1 FROM apps WHERE id = \(app)") == 0 {
                throw CommandError.unknownApp(app)
            }
            return try await Self.fetchGrants(connection, app: app)
        }
    }

    /// The item's identifier: read first, so that a host's role, which may
    /// read items but not record them, gets those the owner recorded (a
    /// granted item's, for a bookmark); recorded now otherwise.
    public func itemIdentifier(provider providerID: ProviderID, path: String) throws(CommandError) -> ItemIdentifier {
        try database.transaction { connection in
            guard
                let provider = try await Self.fetchProviders(connection, servedFrom: replicas).first(where: {
                    $0.id == providerID
                })
            else {
                throw CommandError.unknownProvider(providerID)
            }
            let file = try ProviderItemIdentity.inspect(provider: provider, path: path)
            for try await id in try await connection.query(
                """
                SELECT id FROM items WHERE provider_id = \(providerID) AND relative_path = \(path)
                AND device = \(file.device) AND inode = \(file.inode)
                AND birth_seconds = \(file.birthSeconds) AND birth_nanoseconds = \(file.birthNanoseconds)
                """, logger: FleetDatabase.logger
            ).decode(String.self) {
                return id
            }
            return try await Self.upsertItem(connection, provider: providerID, path: path, file: file)
        }
    }

    public func itemLocation(_ item: ItemIdentifier) throws(CommandError) -> ItemLocation? {
        let text: String? = try database.run { connection -> String? in
            for try await row in try await connection.query(
                "SELECT \(unescaped: FleetRows.itemColumns)::text FROM items WHERE id = \(item)",
                logger: FleetDatabase.logger
            ).decode(String.self) {
                return row
            }
            return nil
        }
        guard let text else { return nil }
        guard let row = try? JSONDecoder().decode(FleetRows.ItemRow.self, from: Data(text.utf8)) else {
            throw CommandError(.ioError, "the fleet's store sent an item row it cannot read: \(text)")
        }
        var pool = StringPool()
        return row.location(&pool)
    }

    /// Finds the item at `path`, or records a new one: an item whose file
    /// identity changed (deleted and re-created) gets a new identifier.
    /// This is the only reader of an item's device and inode on a fleet:
    /// what a grant covers is decided by its path on each host (decision
    /// 62), so the numbers, as the granting host saw them, only tell a new
    /// file at an old path from the old one.
    static func upsertItem(
        _ connection: PostgresConnection, provider: ProviderID, path: String, file: ProviderItemIdentity
    ) async throws -> ItemIdentifier {
        for try await (id, device, inode, seconds, nanoseconds) in try await connection.query(
            "SELECT id, device, inode, birth_seconds, birth_nanoseconds FROM items WHERE provider_id = \(provider) AND relative_path = \(path) FOR UPDATE",
            logger: FleetDatabase.logger
        ).decode((String, Int64, Int64, Int64, Int64).self) {
            if device == file.device && inode == file.inode && seconds == file.birthSeconds
                && nanoseconds == file.birthNanoseconds
            {
                return id
            }
            // Same path, new file: the old item no longer lives here.
            try await connection.query(
                "UPDATE items SET relative_path = relative_path || ' (gone ' || id || ')' WHERE id = \(id)",
                logger: FleetDatabase.logger)
        }
        let id = UUID().uuidString.lowercased()
        try await connection.query(
            """
            INSERT INTO items (id, provider_id, relative_path, is_directory, device, inode, birth_seconds, birth_nanoseconds)
            VALUES (\(id), \(provider), \(path), \(file.isDirectory), \(file.device), \(file.inode), \(file.birthSeconds), \(file.birthNanoseconds))
            """, logger: FleetDatabase.logger)
        return id
    }

    // MARK: Events and hosts

    /// Records an event of this host (a daemon's fail-closed, say).
    public func record(_ event: Event) throws(CommandError) {
        let host = self.host
        try database.run { connection in
            try await Self.insert(connection, event, host: host)
        }
    }

    /// The newest events of every host, oldest first (many: with the
    /// allowance of a listing of many grants).
    public func events(app: AppID?, limit: Int) throws(CommandError) -> [FleetEvent] {
        try database.run(extra: limit > 1_000 ? Self.allGrantsExtra : 0) { connection in
            var events: [FleetEvent] = []
            let rows = try await connection.query(
                """
                SELECT id, time, host, db_role, kind, app, pid, path, operation, errno, grant_id FROM events
                WHERE (\(app)::text IS NULL OR app = \(app)) ORDER BY id DESC LIMIT \(limit)
                """, logger: FleetDatabase.logger)
            for try await row in rows.decode(
                (Int64, Double, String, String, String, String?, Int32?, String?, String?, Int32?, Int64?).self)
            {
                events.append(
                    FleetEvent(
                        id: row.0, time: row.1, host: row.2, role: row.3, kind: row.4, app: row.5, pid: row.6,
                        path: row.7, operation: row.8, errno: row.9, grant: row.10))
            }
            return events.reversed()
        }
    }

    /// Tells the fleet this host serves `version` (or why it does not),
    /// and which app processes run on it.
    public func heartbeat(version: Int64?, failure: String?, lease: Double, processes: [FleetProcess])
        throws(CommandError)
    {
        let host = self.host
        let listed = String(decoding: (try? JSONEncoder().encode(processes)) ?? Data("[]".utf8), as: UTF8.self)
        try database.run { connection in
            _ = try await connection.query(
                """
                INSERT INTO hosts (name, last_seen, version, failure, lease, processes)
                VALUES (\(host), extract(epoch from now()), \(version ?? -1), \(failure), \(lease), \(listed))
                ON CONFLICT (name) DO UPDATE SET last_seen = excluded.last_seen, version = excluded.version,
                    failure = excluded.failure, lease = excluded.lease, processes = excluded.processes
                """, logger: FleetDatabase.logger)
        }
    }

    public func hosts() throws(CommandError) -> [FleetHost] {
        try database.run { connection in
            var hosts: [FleetHost] = []
            for try await row in try await connection.query(
                "SELECT name, db_role, last_seen, version, failure, lease, extract(epoch from now())::float8, processes FROM hosts ORDER BY name",
                logger: FleetDatabase.logger
            ).decode((String, String, Double, Int64, String?, Double, Double, String).self) {
                let processes = (try? JSONDecoder().decode([FleetProcess].self, from: Data(row.7.utf8))) ?? []
                hosts.append(
                    FleetHost(
                        name: row.0, role: row.1, lastSeen: row.2, version: row.3, failure: row.4, lease: row.5,
                        secondsSinceSeen: row.6 - row.2, processes: processes))
            }
            return hosts
        }
    }

    // MARK: Rows

    static func count(_ connection: PostgresConnection, _ query: PostgresQuery) async throws -> Int {
        var rows = 0
        for try await _ in try await connection.query(query, logger: FleetDatabase.logger) { rows += 1 }
        return rows
    }

    static func version(_ connection: PostgresConnection) async throws -> Int64 {
        for try await version in try await connection.query(
            "SELECT version FROM policy_version", logger: FleetDatabase.logger
        ).decode(Int64.self) {
            return version
        }
        return 0
    }

    /// The grants of `app` (nil: every app's), only the one with `id` or
    /// only those of `items` when given, in the order they were made.
    static func fetchGrants(
        _ connection: PostgresConnection, app: AppID?, id: GrantID? = nil, items: [ItemIdentifier]? = nil
    ) async throws -> [Grant] {
        try await grantRows(
            connection,
            """
            SELECT \(unescaped: grantColumns) FROM grants g JOIN items i ON i.id = g.item_id
            WHERE (\(app)::text IS NULL OR g.app_id = \(app)) AND (\(id)::int8 IS NULL OR g.id = \(id))
                AND (\(items)::text[] IS NULL OR g.item_id = ANY(\(items)::text[]))
            """)
    }

    /// What a grant row is made of, `g` being the grant and `i` its item.
    static let grantColumns = """
        g.id, g.app_id, i.provider_id, g.item_id, i.relative_path, i.is_directory,
        g.access, g.state, g.granted_at, g.session
        """

    /// The grants `query` returns as `grantColumns`, in the order they were made.
    static func grantRows(_ connection: PostgresConnection, _ query: PostgresQuery) async throws -> [Grant] {
        var grants: [Grant] = []
        let rows = try await connection.query(query, logger: FleetDatabase.logger)
        for try await row in rows.decode(
            (Int64, String, String, String, String, Bool, String, String, Double, Bool).self)
        {
            grants.append(
                Grant(
                    id: row.0, app: row.1, provider: row.2, item: row.3, relativePath: row.4, isDirectory: row.5,
                    access: Access(rawValue: row.6) ?? .read, state: GrantState(rawValue: row.7) ?? .revoked,
                    grantedAt: row.8, isSession: row.9))
        }
        return grants.sorted { $0.id < $1.id }
    }

    /// `recordChange` for many grants, in one statement.
    static func recordChanges(
        _ connection: PostgresConnection, _ kind: Event.Kind, _ grants: [Grant], host: String,
        operation: String? = nil, pid: Int32
    ) async throws {
        guard !grants.isEmpty else { return }
        let paths = grants.map { MountLayout.providerPath(app: $0.app, provider: $0.provider, path: $0.relativePath) }
        let time = Date().timeIntervalSince1970
        try await connection.query(
            """
            INSERT INTO events (time, host, kind, app, pid, path, operation, grant_id)
            SELECT \(time), \(host), \(kind.rawValue), app, \(pid), path, \(operation ?? kind.rawValue), grant_id
            FROM unnest(\(grants.map(\.app))::text[], \(paths)::text[], \(grants.map(\.id))::int8[])
                WITH ORDINALITY AS e(app, path, grant_id, n)
            ORDER BY n
            """, logger: FleetDatabase.logger)
    }

    static func recordChange(
        _ connection: PostgresConnection, _ kind: Event.Kind, _ grant: Grant, host: String, operation: String? = nil,
        pid: Int32 = getpid()
    ) async throws {
        try await insert(connection, Event.change(kind, grant, operation: operation, pid: pid), host: host)
    }

    static func fetchApps(_ connection: PostgresConnection) async throws -> [App] {
        var apps: [App] = []
        for try await (id, name, downloads) in try await connection.query(
            "SELECT id, name, downloads FROM apps ORDER BY id", logger: FleetDatabase.logger
        ).decode((String, String, String?).self) {
            apps.append(App(id: id, name: name, downloads: downloads.flatMap(DownloadPolicy.init)))
        }
        return apps
    }

    /// The providers, each as this host serves it (`replicas`).
    static func fetchProviders(_ connection: PostgresConnection, servedFrom replicas: StateDirectory?) async throws
        -> [Provider]
    {
        var providers: [Provider] = []
        for try await (id, name, directory, spec) in try await connection.query(
            "SELECT id, name, directory, extension FROM providers ORDER BY id", logger: FleetDatabase.logger
        ).decode((String, String, String, String?).self) {
            providers.append(
                Provider(id: id, name: name, directory: directory, extension: decodeExtension(spec)).served(
                    from: replicas))
        }
        return providers
    }

    static func decodeExtension(_ spec: String?) -> ProviderExtensionSpec? {
        spec.flatMap { try? JSONDecoder().decode(ProviderExtensionSpec.self, from: Data($0.utf8)) }
    }

    static func insert(_ connection: PostgresConnection, _ event: Event, host: String) async throws {
        try await connection.query(
            """
            INSERT INTO events (time, host, kind, app, pid, path, operation, errno, grant_id)
            VALUES (\(event.time), \(host), \(event.kind.rawValue), \(event.app), \(event.pid), \(event.path),
                    \(event.operation), \(event.errno), \(event.grant))
            """, logger: FleetDatabase.logger)
    }
}

/// An event as the fleet stores it: with the host that wrote it and the
/// database role it wrote as (which a host cannot forge).
public struct FleetEvent: Sendable, Codable, Equatable {
    public var id: Int64
    public var time: Double
    public var host: String
    public var role: String
    public var kind: String
    public var app: String?
    public var pid: Int32?
    public var path: String?
    public var operation: String?
    public var errno: Int32?
    public var grant: Int64?
}

/// A host's last word to the fleet (`scopefs fleet hosts`).
public struct FleetHost: Sendable, Codable, Equatable {
    public var name: String
    public var role: String
    public var lastSeen: Double
    public var version: Int64
    public var failure: String?
    public var lease: Double
    public var secondsSinceSeen: Double
    /// The app processes live on the host at its last heartbeat.
    public var processes: [FleetProcess]
}

/// An app process on a host, as its daemon reports it.
public struct FleetProcess: Sendable, Codable, Equatable {
    public var app: String
    public var pid: Int32

    public init(app: String, pid: Int32) {
        self.app = app
        self.pid = pid
    }
}
