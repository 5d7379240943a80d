import CommandErrors
import Foundation
import GRDB
import Policy

/// The isolation layer in the embedded SQLite file (SPEC S13), the
/// default store (`IsolationStore`). Every method is one transaction.
public struct PolicyRepository: IsolationStore {
    public let database: PolicyDatabase

    public init(database: PolicyDatabase) {
        self.database = database
    }

    // MARK: Snapshot

    /// The snapshot and the policy version it reflects, read in one
    /// transaction: a change committed later has a later version.
    public func versionedSnapshot(generation: UInt64) throws(CommandError) -> (snapshot: PolicySnapshot, version: Int64)
    {
        try database.read { db in
            let snapshot = PolicySnapshot(
                generation: generation,
                apps: try Self.fetchApps(db),
                providers: try Self.fetchProviders(db),
                grants: try Self.fetchGrants(db, app: nil),
                items: try Self.fetchItemLocations(db))
            return (snapshot, try Self.policyVersion(db))
        }
    }

    /// Counts commits that changed the policy tables (kept by triggers,
    /// migration v5-policy-version); the event log, which shares the
    /// database, does not move it.
    public func policyVersion() throws(CommandError) -> Int64 {
        try database.read(Self.policyVersion)
    }

    private static func policyVersion(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT version FROM policy_version") ?? 0
    }

    /// What changed since `version`, from the change log (migration
    /// v9-policy-changes), read in one transaction with the version it
    /// brings the policy to; nil when the log does not reach back to
    /// `version` or apps or providers changed (read the whole snapshot).
    public func changes(since version: Int64) throws(CommandError) -> PolicyChanges? {
        try database.read { db -> PolicyChanges? in
            let current = try Self.policyVersion(db)
            let floor = try Int64.fetchOne(db, sql: "SELECT version FROM policy_changes_floor") ?? .max
            guard version >= floor, version <= current else { return nil }
            var grantIDs = Set<GrantID>()
            var itemIDs = Set<ItemIdentifier>()
            let logged = try Row.fetchCursor(
                db, sql: "SELECT DISTINCT kind, id FROM policy_changes WHERE version > ?", arguments: [version])
            while let row = try logged.next() {
                switch row["kind"] as String {
                case "grants": grantIDs.insert(Int64(row["id"] as String) ?? 0)
                case "items": itemIDs.insert(row["id"])
                default: return nil  // an app or a provider: every view may change
                }
            }
            let ids = "SELECT id FROM policy_changes WHERE version > ? AND kind = ?"
            // The grants logged, and those of the items logged (their path is the item's).
            let grants = try Self.fetchGrants(
                db,
                where:
                    "g.id IN (SELECT CAST(id AS INTEGER) FROM (\(ids)) UNION SELECT id FROM grants WHERE item_id IN (\(ids)))",
                arguments: [version, "grants", version, "items"])
            let items = try Self.fetchItemLocations(db, where: "id IN (\(ids))", arguments: [version, "items"])
            return PolicyChanges(
                version: current, grants: grants, removedGrants: grantIDs.subtracting(grants.map(\.id)),
                items: items, removedItems: itemIDs.subtracting(items.keys))
        }
    }

    public func itemLocation(_ item: ItemIdentifier) throws(CommandError) -> ItemLocation? {
        try database.read { db in try Self.fetchItemLocations(db, where: "id = ?", arguments: [item])[item] }
    }

    static func fetchItemLocations(_ db: Database, where condition: String? = nil, arguments: StatementArguments = [])
        throws -> [ItemIdentifier: ItemLocation]
    {
        var items: [ItemIdentifier: ItemLocation] = [:]
        let rows = try Row.fetchCursor(
            db,
            sql: "SELECT id, provider_id, relative_path, is_directory, missing, device, inode FROM items"
                + (condition.map { " WHERE " + $0 } ?? ""), arguments: arguments)
        while let row = try rows.next() {
            // Stored as the bit patterns of the unsigned numbers (`FileIdentity`).
            let file = ItemFile(
                device: UInt64(bitPattern: row["device"] as Int64), inode: UInt64(bitPattern: row["inode"] as Int64))
            items[row["id"]] = ItemLocation(
                provider: row["provider_id"], path: row["relative_path"], isDirectory: row["is_directory"],
                exists: !(row["missing"] as Bool), file: file)
        }
        return items
    }

    // MARK: Providers

    public func addProvider(id: ProviderID, directory: String, name: String?, extension spec: ProviderExtensionSpec?)
        throws(CommandError) -> Provider
    {
        try Identifier.validate(id, what: "provider")
        let resolved = try IsolationRequest.providerDirectory(directory)
        let provider = Provider(id: id, name: name ?? id, directory: resolved, extension: spec)
        let encoded = spec.flatMap { try? JSONEncoder().encode($0) }.map { String(decoding: $0, as: UTF8.self) }
        try database.write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM providers WHERE id = ?", arguments: [id]) == true {
                throw IsolationRequest.providerExists(id)
            }
            try db.execute(
                sql: "INSERT INTO providers (id, name, directory, created_at, extension) VALUES (?, ?, ?, ?, ?)",
                arguments: [provider.id, provider.name, provider.directory, Date().timeIntervalSince1970, encoded])
        }
        return provider
    }

    public func providers() throws(CommandError) -> [Provider] {
        try database.read { db in try Self.fetchProviders(db) }
    }

    public func removeProvider(id: ProviderID) throws(CommandError) {
        try database.write { db in
            try db.execute(sql: "DELETE FROM providers WHERE id = ?", arguments: [id])
            if db.changesCount == 0 { throw CommandError.unknownProvider(id) }
        }
    }

    // MARK: Apps

    public func addApp(id: AppID, name: String?) throws(CommandError) -> App {
        try Identifier.validate(id, what: "app")
        let app = App(id: id, name: name ?? id)
        try database.write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM apps WHERE id = ?", arguments: [id]) == true {
                throw IsolationRequest.appExists(id)
            }
            try db.execute(
                sql: "INSERT INTO apps (id, name, created_at) VALUES (?, ?, ?)",
                arguments: [app.id, app.name, Date().timeIntervalSince1970])
        }
        return app
    }

    public func apps() throws(CommandError) -> [App] {
        try database.read { db in try Self.fetchApps(db) }
    }

    /// Sets an app's download policy (`scopefs app set --downloads`).
    public func setDownloads(_ policy: DownloadPolicy, of id: AppID) throws(CommandError) {
        try database.write { db in
            try db.execute(
                sql: "UPDATE apps SET downloads = ? WHERE id = ?",
                arguments: [policy == .onDemand ? nil : policy.rawValue, id])
            if db.changesCount == 0 { throw CommandError.unknownApp(id) }
        }
    }

    public func removeApp(id: AppID) throws(CommandError) {
        try database.write { db in
            try db.execute(sql: "DELETE FROM apps WHERE id = ?", arguments: [id])
            if db.changesCount == 0 { throw CommandError.unknownApp(id) }
        }
    }

    // MARK: Grants

    /// Grants an item, or updates the app's grant of it as `update` says
    /// (one grant per item per app). A provider's root folder is granted
    /// only with `wholeProvider`: it is every file the provider holds.
    public func grant(
        app: AppID, provider providerID: ProviderID, path rawPath: String, access: Access, session: Bool,
        update: GrantUpdate, wholeProvider: Bool
    ) throws(CommandError) -> GrantChange {
        let path = try IsolationRequest.grantPath(rawPath, provider: providerID, wholeProvider: wholeProvider)
        return try database.write { db in
            guard try Self.fetchApps(db).contains(where: { $0.id == app }) else { throw CommandError.unknownApp(app) }
            guard let provider = try Self.fetchProviders(db).first(where: { $0.id == providerID }) else {
                throw CommandError.unknownProvider(providerID)
            }
            let file = try ProviderFile.inspect(provider: provider, path: path)
            let itemID = try Self.upsertItem(db, provider: providerID, path: path, file: file)
            // The app's grant of this item only: not all of them (10,000 at scale) twice per grant.
            let previous = try Self.fetchGrants(db, app: app, item: itemID).first
            let (access, session) = GrantChange.resolved(
                asked: access, session: session, existing: previous, update: update)
            try Self.upsertGrant(db, app: app, item: itemID, access: access, session: session)
            let grant = try Self.fetchGrants(db, app: app, item: itemID).first!
            try Self.recordChange(db, .grant, grant)
            return GrantChange(grant: grant, previous: previous)
        }
    }

    /// Grants many items in one transaction (`grant --from FILE`): the
    /// app's grants are read once, and each item costs a few statements
    /// prepared once, where a `grant` each would read all of the app's
    /// grants for each (10,000 grants: 10,000 reads of up to 10,000 rows).
    public func grantAll(app: AppID, items: [GrantItem], access: Access, wholeProvider: Bool) throws(CommandError)
        -> [GrantChange]
    {
        let requests = try IsolationRequest.grantPaths(items, wholeProvider: wholeProvider)
        return try database.write { db in
            guard try Self.fetchApps(db).contains(where: { $0.id == app }) else { throw CommandError.unknownApp(app) }
            let providers = Dictionary(
                try Self.fetchProviders(db).map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
            let existing = Dictionary(
                try Self.fetchGrants(db, app: app).map { ($0.item, $0) }, uniquingKeysWith: { first, _ in first })
            let now = Date().timeIntervalSince1970
            var changes: [GrantChange] = []
            changes.reserveCapacity(requests.count)
            for (item, path) in requests {
                let (itemID, file) = try IsolationRequest.naming(item) {
                    guard let provider = providers[item.provider] else {
                        throw CommandError.unknownProvider(item.provider)
                    }
                    let file = try ProviderFile.inspect(provider: provider, path: path)
                    return (try Self.upsertItem(db, provider: item.provider, path: path, file: file), file)
                }
                // A replacing grant: this access, persistent (GrantChange.resolved with `.replace`).
                let previous = existing[itemID]
                try Self.upsertGrant(db, app: app, item: itemID, access: access, session: false, now: now)
                let grant = Grant(
                    id: previous?.id ?? db.lastInsertedRowID, app: app, provider: item.provider, item: itemID,
                    relativePath: path, isDirectory: file.isDirectory, access: access, state: .active,
                    grantedAt: previous?.grantedAt ?? now)
                try Self.recordChange(db, .grant, grant)
                changes.append(GrantChange(grant: grant, previous: previous))
            }
            return changes
        }
    }

    /// Inserts the app's grant of the item, or makes its existing one active
    /// with this access and lifetime (it keeps its id and grant date).
    private static func upsertGrant(
        _ db: Database, app: AppID, item: ItemIdentifier, access: Access, session: Bool,
        now: Double = Date().timeIntervalSince1970
    ) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO grants (app_id, item_id, access, state, granted_at, changed_at, session)
                VALUES (?, ?, ?, 'active', ?, ?, ?)
                ON CONFLICT (app_id, item_id) DO UPDATE
                SET access = excluded.access, state = 'active', changed_at = excluded.changed_at,
                    session = excluded.session
                """
        ).execute(arguments: [app, item, access.rawValue, now, now, session])
    }

    /// Removes one grant (by id) or all of an app's for good; returns them.
    /// `sessionOnly` removes only session grants (their app's last process
    /// exited): then no grant is not an error.
    @discardableResult
    public func forget(app: AppID, grant grantID: GrantID?, sessionOnly: Bool, reason: String)
        throws(CommandError) -> [Grant]
    {
        try database.write { db in
            guard try Self.fetchApps(db).contains(where: { $0.id == app }) else { throw CommandError.unknownApp(app) }
            var targets = try Self.fetchGrants(db, app: app, id: grantID)
            if let grantID, targets.isEmpty { throw IsolationRequest.noSuchGrant(grantID, of: app) }
            if sessionOnly { targets = targets.filter(\.isSession) }
            for grant in targets {
                try db.cachedStatement(sql: "DELETE FROM grants WHERE id = ?").execute(arguments: [grant.id])
                try Self.recordChange(db, .forget, grant, operation: reason)
            }
            return targets
        }
    }

    /// Sets the state of one grant (by id) or of all of an app's grants.
    /// Returns the grants whose state changed.
    @discardableResult
    /// `requester`: the process that asked for the change, which its event
    /// names (this process unless the daemon changes it for a CLI).
    public func setState(
        _ state: GrantState, app: AppID, grant grantID: GrantID?, requester: Int32
    ) throws(CommandError) -> [Grant] {
        try database.write { db in
            guard try Self.fetchApps(db).contains(where: { $0.id == app }) else { throw CommandError.unknownApp(app) }
            // One grant is read by its id: not all of the app's (10,000 at scale) for each revoke.
            let targets = try Self.fetchGrants(db, app: app, id: grantID)
            if let grantID, targets.isEmpty { throw IsolationRequest.noSuchGrant(grantID, of: app) }
            let changed = targets.filter { $0.state != state }
            let now = Date().timeIntervalSince1970
            for grant in changed {
                try db.cachedStatement(sql: "UPDATE grants SET state = ?, changed_at = ? WHERE id = ?")
                    .execute(arguments: [state.rawValue, now, grant.id])
                try Self.recordChange(db, state == .active ? .restore : .revoke, grant, pid: requester)
            }
            return changed.map { $0.with(state: state) }
        }
    }

    public func grants(app: AppID?) throws(CommandError) -> [Grant] {
        try database.read { db in
            if let app, try !Self.fetchApps(db).contains(where: { $0.id == app }) { throw CommandError.unknownApp(app) }
            return try Self.fetchGrants(db, app: app)
        }
    }

    /// Grants, revokes and restores are events (SPEC S29), written in the
    /// same transaction as the change, whichever command made it.
    static func recordChange(
        _ db: Database, _ kind: Event.Kind, _ grant: Grant, operation: String? = nil, pid: Int32 = getpid()
    ) throws {
        _ = try EventStore.insert(Event.change(kind, grant, operation: operation, pid: pid), into: db)
    }

    // MARK: Queries

    static func fetchApps(_ db: Database) throws -> [App] {
        try Row.fetchAll(db, sql: "SELECT id, name, downloads FROM apps ORDER BY id").map {
            App(id: $0["id"], name: $0["name"], downloads: ($0["downloads"] as String?).flatMap(DownloadPolicy.init))
        }
    }

    static func fetchProviders(_ db: Database) throws -> [Provider] {
        try Row.fetchAll(db, sql: "SELECT id, name, directory, extension FROM providers ORDER BY id").map {
            Provider(
                id: $0["id"], name: $0["name"], directory: $0["directory"],
                extension: ($0["extension"] as String?).flatMap {
                    try? JSONDecoder().decode(ProviderExtensionSpec.self, from: Data($0.utf8))
                })
        }
    }

    /// The grants of `app` (nil: every app's), only the one with `id` or
    /// only the one of `item` when given, in the order they were made.
    static func fetchGrants(_ db: Database, app: AppID?, id: GrantID? = nil, item: ItemIdentifier? = nil) throws
        -> [Grant]
    {
        var conditions: [String] = []
        var arguments = StatementArguments()
        if let app {
            conditions.append("g.app_id = ?")
            arguments += [app]
        }
        if let id {
            conditions.append("g.id = ?")
            arguments += [id]
        }
        if let item {
            conditions.append("g.item_id = ?")
            arguments += [item]
        }
        return try fetchGrants(
            db, where: conditions.isEmpty ? nil : conditions.joined(separator: " AND "), arguments: arguments)
    }

    /// The grants matching `condition` (on `g`, the grant, and `i`, its
    /// item), in the order they were made.
    static func fetchGrants(_ db: Database, where condition: String?, arguments: StatementArguments) throws
        -> [Grant]
    {
        let sql = """
            SELECT g.id, g.app_id, i.provider_id, g.item_id, i.relative_path, i.is_directory,
                   g.access, g.state, g.granted_at, g.session
            FROM grants g JOIN items i ON i.id = g.item_id
            \(condition.map { "WHERE " + $0 } ?? "")
            ORDER BY g.id
            """
        var grants: [Grant] = []
        var pool = StringPool()
        let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
        while let row = try rows.next() {
            grants.append(
                Grant(
                    id: row["id"], app: pool(row["app_id"]), provider: pool(row["provider_id"]),
                    item: pool(row["item_id"]), relativePath: pool(row["relative_path"]),
                    isDirectory: row["is_directory"], access: Access(rawValue: row["access"]) ?? .read,
                    state: GrantState(rawValue: row["state"]) ?? .revoked, grantedAt: row["granted_at"],
                    isSession: row["session"]))
        }
        return grants
    }

    /// Finds the item at `path`, or records a new one. An item whose file
    /// identity changed (deleted and re-created) gets a new identifier.
    static func upsertItem(_ db: Database, provider: ProviderID, path: String, file: ProviderFile) throws
        -> ItemIdentifier
    {
        if let row = try Row.fetchOne(
            db,
            sql:
                "SELECT id, device, inode, birth_seconds, birth_nanoseconds FROM items WHERE provider_id = ? AND relative_path = ?",
            arguments: [provider, path])
        {
            let id: String = row["id"]
            if ItemLocator.key(row) == file.key { return id }
            // Same path, new file: the old item no longer lives here.
            try db.execute(
                sql: "UPDATE items SET relative_path = relative_path || ' (gone ' || id || ')' WHERE id = ?",
                arguments: [id])
        }
        let id = UUID().uuidString.lowercased()
        try db.execute(
            sql: """
                INSERT INTO items (id, provider_id, relative_path, is_directory, device, inode, birth_seconds, birth_nanoseconds)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                id, provider, path, file.isDirectory, file.key.device, file.key.inode, file.key.birthSeconds,
                file.key.birthNanoseconds,
            ])
        return id
    }

    /// The identifier of the item at `path` (recorded now if it is new).
    public func itemIdentifier(provider providerID: ProviderID, path: String) throws(CommandError) -> ItemIdentifier {
        try database.write { db in
            guard let provider = try Self.fetchProviders(db).first(where: { $0.id == providerID }) else {
                throw CommandError.unknownProvider(providerID)
            }
            return try Self.upsertItem(
                db, provider: providerID, path: path, file: try ProviderFile.inspect(provider: provider, path: path))
        }
    }
}

extension CommandError {
    public static func unknownApp(_ id: String) -> CommandError {
        CommandError(.unknown, "unknown app \(id); see `scopefs app list`")
    }

    public static func unknownProvider(_ id: String) -> CommandError {
        CommandError(.unknown, "unknown provider \(id); see `scopefs provider list`")
    }
}

/// App and provider IDs: reverse-DNS style names that are also safe as one
/// path component of the mount.
public enum Identifier {
    public static func validate(_ id: String, what: String) throws(CommandError) {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
        guard !id.isEmpty, id.count <= 200, id != ".", id != "..", id.allSatisfy({ allowed.contains($0) }) else {
            throw CommandError(
                .badData, "invalid \(what) ID '\(id)': use letters, digits, '.', '-' and '_' (e.g. com.example.editor)")
        }
    }
}

extension Event {
    /// The event of a change of `grant` (SPEC S29): its kind, the process
    /// that asked, and the item's path in the app's directory of the mount.
    public static func change(_ kind: Kind, _ grant: Grant, operation: String? = nil, pid: Int32 = getpid()) -> Event {
        Event(
            time: Date().timeIntervalSince1970, kind: kind, app: grant.app, pid: pid,
            path: MountLayout.providerPath(app: grant.app, provider: grant.provider, path: grant.relativePath),
            operation: operation ?? kind.rawValue, grant: grant.id)
    }
}
