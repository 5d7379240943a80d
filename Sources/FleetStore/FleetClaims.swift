import CommandErrors
import Foundation
import PostgresNIO

/// File-coordination claims across hosts (issue 34, SPEC S27b, S44): a
/// claim on an item of a shared provider is a row in the fleet's store,
/// keyed by what every host calls the item — `p/PROVIDER/PATH`, the
/// provider's ID and the item's path in it — with the host, its database
/// role, the app and the process that hold it.
///
/// Rows with leases rather than PostgreSQL advisory locks: an advisory lock
/// lives with one server session, so a daemon would need a connection per
/// held claim and would drop them all with one broken connection (a
/// reconnect is not a dead host); nobody can see who holds a lock (the
/// save/relinquish notices must name the holder's app and path); and a
/// waiter cannot leave a row saying "I wait", which is how the holder's host
/// learns to ask its app to relinquish. A row lives while its host's
/// heartbeat (`hosts.last_seen`) is within the host's lease, so the claims
/// of a host that disappears end with its lease, as its grants do.
/// Advisory locks are used only inside one transaction
/// (`pg_advisory_xact_lock`) to make "no conflicting holder, so insert"
/// atomic per item across hosts.
public struct FleetClaims: Sendable {
    public let database: FleetDatabase
    var host: String { database.configuration.hostName }

    public init(database: FleetDatabase) {
        self.database = database
    }

    /// The claims table, a migration of its own (appended to
    /// `FleetSchema.migrations`): rows a host's role may write only as
    /// itself (row-level security), read by every host.
    static let migrations: [(name: String, statements: [String])] = [
        (
            "v2-fleet-claims",
            [
                """
                CREATE TABLE claims (id BIGSERIAL PRIMARY KEY, host TEXT NOT NULL,
                    db_role TEXT NOT NULL DEFAULT current_user, item TEXT NOT NULL,
                    intent TEXT NOT NULL CHECK (intent IN ('read', 'write')),
                    state TEXT NOT NULL CHECK (state IN ('held', 'waiting')),
                    app TEXT NOT NULL, pid INTEGER NOT NULL, path TEXT NOT NULL,
                    since DOUBLE PRECISION NOT NULL DEFAULT extract(epoch from now()))
                """,
                "CREATE INDEX claims_by_item ON claims (item)",
                "CREATE INDEX claims_by_host ON claims (host, db_role)",
                "ALTER TABLE claims ENABLE ROW LEVEL SECURITY",
                "CREATE POLICY claims_read ON claims FOR SELECT USING (true)",
                "CREATE POLICY claims_insert ON claims FOR INSERT WITH CHECK (db_role = current_user)",
                """
                CREATE POLICY claims_update ON claims FOR UPDATE USING (db_role = current_user)
                WITH CHECK (db_role = current_user)
                """,
                "CREATE POLICY claims_delete ON claims FOR DELETE USING (db_role = current_user)",
                // Host roles made before this migration get their rights too.
                """
                DO $$ DECLARE r TEXT; BEGIN
                    FOR r IN SELECT rolname FROM pg_roles WHERE rolname LIKE 'scopefs\\_host\\_%' LOOP
                        EXECUTE format('GRANT SELECT, INSERT, DELETE ON claims TO %I', r);
                        EXECUTE format('GRANT UPDATE (state) ON claims TO %I', r);
                        EXECUTE format('GRANT USAGE ON SEQUENCE claims_id_seq TO %I', r);
                    END LOOP;
                END $$
                """,
            ]
        )
    ]

    /// What `createHostRole` grants a host's role on the claims table
    /// (format strings taking the role as %I).
    static let hostRoleGrants = [
        "GRANT SELECT, INSERT, DELETE ON claims TO %I",
        "GRANT UPDATE (state) ON claims TO %I",
        "GRANT USAGE ON SEQUENCE claims_id_seq TO %I",
    ]

    /// A row of another host counts while that host's heartbeat is within
    /// its lease, judged by the server's clock (hosts' clocks may differ).
    static let live = """
        EXISTS (SELECT 1 FROM hosts h WHERE h.name = c.host AND h.db_role = c.db_role
            AND h.last_seen + h.lease > extract(epoch from now()))
        """

    public enum Attempt: Sendable, Equatable {
        /// The claim is held: its row.
        case granted(Int64)
        /// Live claims of other hosts are in the way: the waiting row that
        /// tells them, and the hosts and apps holding.
        case blocked(Int64, holders: [String])
    }

    /// One try at a claim: held at once when no live claim of another host
    /// conflicts (writers exclude everyone), else a waiting row is left
    /// (or kept) for the holders' hosts to see. `waiting` is the row of an
    /// earlier try, turned into the held one.
    public func attempt(
        item: String, intent: String, app: String, pid: Int32, path: String, waiting: Int64?
    ) throws(CommandError) -> Attempt {
        let host = self.host
        return try database.transaction { connection in
            // Serializes check-and-insert on this item across hosts.
            try await connection.query(
                "SELECT pg_advisory_xact_lock(hashtextextended(\(item), 34))", logger: FleetDatabase.logger)
            var holders: [String] = []
            for try await (holderHost, holderApp) in try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT c.host, c.app FROM claims c WHERE c.item = $1 AND c.state = 'held'
                            AND NOT (c.host = $2 AND c.db_role = current_user)
                            AND ($3 = 'write' OR c.intent = 'write') AND \(Self.live)
                        """,
                    binds: Self.binds(item, host, intent)),
                logger: FleetDatabase.logger
            ).decode((String, String).self) {
                holders.append("\(holderApp) on \(holderHost)")
            }
            if !holders.isEmpty {
                if let waiting { return .blocked(waiting, holders: holders) }
                for try await row in try await connection.query(
                    """
                    INSERT INTO claims (host, item, intent, state, app, pid, path)
                    VALUES (\(host), \(item), \(intent), 'waiting', \(app), \(pid), \(path)) RETURNING id
                    """, logger: FleetDatabase.logger
                ).decode(Int64.self) {
                    return .blocked(row, holders: holders)
                }
                throw CommandError(.ioError, "fleet database: no row for a waiting claim")
            }
            if let waiting {
                for try await row in try await connection.query(
                    "UPDATE claims SET state = 'held' WHERE id = \(waiting) RETURNING id", logger: FleetDatabase.logger
                ).decode(Int64.self) {
                    return .granted(row)
                }
            }
            for try await row in try await connection.query(
                """
                INSERT INTO claims (host, item, intent, state, app, pid, path)
                VALUES (\(host), \(item), \(intent), 'held', \(app), \(pid), \(path)) RETURNING id
                """, logger: FleetDatabase.logger
            ).decode(Int64.self) {
                return .granted(row)
            }
            throw CommandError(.ioError, "fleet database: no row for a held claim")
        }
    }

    /// Ends this host's rows (held or waiting); another host's are not its
    /// to end (row-level security makes that a no-op).
    public func remove(_ rows: [Int64]) throws(CommandError) {
        guard !rows.isEmpty else { return }
        try database.run { connection in
            _ = try await connection.query(
                "DELETE FROM claims WHERE id = ANY(\(rows)) AND db_role = current_user", logger: FleetDatabase.logger)
        }
    }

    /// A daemon starting: the rows its host left when it last stopped (or
    /// was killed) end now rather than with the lease.
    public func removeAllOfThisHost() throws(CommandError) {
        let host = self.host
        try database.run { connection in
            _ = try await connection.query(
                "DELETE FROM claims WHERE host = \(host) AND db_role = current_user", logger: FleetDatabase.logger)
        }
    }

    /// A claim this host holds that a live claim of another host waits for.
    public struct Wanted: Sendable, Equatable {
        public var held: Int64
        public var waiting: Int64
        public var app: String
        public var path: String
    }

    /// This host's held claims that another host's waiting claim conflicts
    /// with: their apps are to save and relinquish.
    public func wanted() throws(CommandError) -> [Wanted] {
        let host = self.host
        return try database.run { connection in
            var found: [Wanted] = []
            for try await row in try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT m.id, c.id, m.app, m.path FROM claims m JOIN claims c ON c.item = m.item
                        WHERE m.host = $1 AND m.db_role = current_user AND m.state = 'held'
                            AND c.state = 'waiting' AND NOT (c.host = $1 AND c.db_role = current_user)
                            AND (c.intent = 'write' OR m.intent = 'write') AND \(Self.live)
                        """,
                    binds: Self.binds(host)),
                logger: FleetDatabase.logger
            ).decode((Int64, Int64, String, String).self) {
                found.append(Wanted(held: row.0, waiting: row.1, app: row.2, path: row.3))
            }
            return found
        }
    }

    /// Every claim in the store, with whether its host is live (`scopefs
    /// fleet claims`).
    public func list() throws(CommandError) -> [FleetClaim] {
        try database.run { connection in
            var claims: [FleetClaim] = []
            for try await row in try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT c.id, c.host, c.db_role, c.item, c.intent, c.state, c.app, c.pid, c.since, \(Self.live)
                        FROM claims c ORDER BY c.id
                        """), logger: FleetDatabase.logger
            ).decode((Int64, String, String, String, String, String, String, Int32, Double, Bool).self) {
                claims.append(
                    FleetClaim(
                        id: row.0, host: row.1, role: row.2, item: row.3, intent: row.4, state: row.5, app: row.6,
                        pid: row.7, since: row.8, live: row.9))
            }
            return claims
        }
    }

    static func binds(_ values: String...) -> PostgresBindings {
        var binds = PostgresBindings()
        for value in values { binds.append(value) }
        return binds
    }
}

/// A claim as the fleet stores it.
public struct FleetClaim: Sendable, Codable, Equatable {
    public var id: Int64
    public var host: String
    public var role: String
    public var item: String
    public var intent: String
    public var state: String
    public var app: String
    public var pid: Int32
    public var since: Double
    /// False once its host's lease ran out: the claim no longer counts.
    public var live: Bool
}
