import CommandErrors
import PostgresNIO

/// Per-host database roles with the least rights a daemon needs (SPEC
/// S44, SECURITY.md): read the policy, write its own host row and its own
/// events. It cannot grant, restore, add apps or providers, or change the
/// schema; only the owner's role, which owns the tables, can.
extension FleetRepository {
    /// The tables a host's daemon reads.
    static let readable = [
        "providers", "apps", "items", "grants", "policy_version", "hosts", "events", "scopefs_migrations",
        "policy_changes", "policy_changes_floor",
    ]

    /// Connections one host's role may hold at once: a daemon holds about
    /// six (its stores, its LISTEN link, one being replaced), and each
    /// CLI command, portal and settings page of the host one while it runs.
    public static let hostConnectionLimit = 32
    /// Temporary files one session of a host's role may hold (sorts and
    /// hashes that spill): a host's own queries are indexed look-ups and
    /// the policy's reads, far below; without it one `ORDER BY` over a
    /// generated series fills the server's disk (issue 46, 5e).
    public static let hostTempFileLimit = "256MB"

    /// Creates (or updates the password of) a host's role; run as the
    /// owner. Returns what the owner's role could not set itself (a bound
    /// that needs a superuser), for the command to tell.
    ///
    /// Besides the tables' rights (SECURITY.md), a host's role is bounded
    /// in what the server holds for it beyond them (issue 46, 5e; SPEC S40):
    /// no temporary tables (TEMPORARY is revoked on the database, from
    /// PUBLIC too, which every role inherits it from: ScopeFS uses none),
    /// `temp_file_limit` (a superuser's setting: the role cannot lift it),
    /// and a `CONNECTION LIMIT`.
    @discardableResult
    public func createHostRole(_ role: String, password: String) throws(CommandError) -> [String] {
        guard role.hasPrefix("scopefs_host_"), role.count <= 63,
            role.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") })
        else {
            throw CommandError(
                .usage,
                "a host role is scopefs_host_ followed by lower-case letters, digits and _ (at most 63), not \(role)")
        }
        return try database.transaction { connection in
            var exists = false
            for try await _ in try await connection.query(
                "SELECT 1 FROM pg_roles WHERE rolname = \(role)", logger: FleetDatabase.logger)
            {
                exists = true
            }
            // Identifiers and the password go through format(%I, %L): quoted by the server.
            let limit = "LOGIN CONNECTION LIMIT \(Self.hostConnectionLimit) PASSWORD %L"
            let create = exists ? "ALTER ROLE %I \(limit)" : "CREATE ROLE %I \(limit)"
            var statements: [String] = []
            for try await statement in try await connection.query(
                "SELECT format(\(create), \(role)::text, \(password)::text)", logger: FleetDatabase.logger
            ).decode(String.self) {
                statements.append(statement)
            }
            for try await statement in try await connection.query(
                """
                SELECT format('GRANT SELECT ON %s TO %I', \(Self.readable.joined(separator: ", ")), \(role)::text)
                UNION ALL SELECT format('GRANT INSERT ON events, hosts TO %I', \(role)::text)
                UNION ALL SELECT format('GRANT UPDATE (last_seen, version, failure, lease, processes) ON hosts TO %I', \(role)::text)
                UNION ALL SELECT format('GRANT USAGE ON SEQUENCE events_id_seq TO %I', \(role)::text)
                UNION ALL SELECT format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), \(role)::text)
                UNION ALL SELECT format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database())
                UNION ALL SELECT format('REVOKE TEMPORARY ON DATABASE %I FROM %I', current_database(), \(role)::text)
                """, logger: FleetDatabase.logger
            ).decode(String.self) {
                statements.append(statement)
            }
            // The claims table's rights (FleetClaims.swift): its own rows only, by RLS.
            for grant in FleetClaims.hostRoleGrants {
                for try await statement in try await connection.query(
                    "SELECT format(\(grant), \(role)::text)", logger: FleetDatabase.logger
                ).decode(String.self) {
                    statements.append(statement)
                }
            }
            for statement in statements {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: FleetDatabase.logger)
            }
            var notes: [String] = []
            // A superuser's parameter: an owner's role that is none (and was
            // not granted SET on it) cannot; the rest of the role stands.
            var setLimit = ""
            for try await statement in try await connection.query(
                "SELECT format('ALTER ROLE %I SET temp_file_limit = %L', \(role)::text, \(Self.hostTempFileLimit)::text)",
                logger: FleetDatabase.logger
            ).decode(String.self) {
                setLimit = statement
            }
            try await connection.query("SAVEPOINT temp_file_limit", logger: FleetDatabase.logger)
            do {
                try await connection.query(PostgresQuery(unsafeSQL: setLimit), logger: FleetDatabase.logger)
            } catch {
                try await connection.query("ROLLBACK TO SAVEPOINT temp_file_limit", logger: FleetDatabase.logger)
                notes.append(
                    "the owner's role may not set temp_file_limit: as a superuser, run "
                        + "`ALTER ROLE \(role) SET temp_file_limit = '\(Self.hostTempFileLimit)'` "
                        + "(or `GRANT SET ON PARAMETER temp_file_limit TO` the owner's role, and add the host again)")
            }
            // REVOKE from PUBLIC needs the database's owner: only a warning otherwise.
            for try await (database, temporary) in try await connection.query(
                "SELECT current_database()::text, has_database_privilege(\(role)::text, current_database(), 'TEMPORARY')",
                logger: FleetDatabase.logger
            ).decode((String, Bool).self) where temporary {
                notes.append(
                    "\(role) may still create temporary tables (through PUBLIC): as the database's owner, run "
                        + "`REVOKE TEMPORARY ON DATABASE \(database) FROM PUBLIC`")
            }
            return notes
        }
    }
}
