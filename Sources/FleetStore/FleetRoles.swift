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

    /// Creates (or updates the password of) a host's role; run as the owner.
    public func createHostRole(_ role: String, password: String) throws(CommandError) {
        guard role.hasPrefix("scopefs_host_"), role.count <= 63,
            role.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") })
        else {
            throw CommandError(
                .usage,
                "a host role is scopefs_host_ followed by lower-case letters, digits and _ (at most 63), not \(role)")
        }
        try database.transaction { connection in
            var exists = false
            for try await _ in try await connection.query(
                "SELECT 1 FROM pg_roles WHERE rolname = \(role)", logger: FleetDatabase.logger)
            {
                exists = true
            }
            // Identifiers and the password go through format(%I, %L): quoted by the server.
            let create = exists ? "ALTER ROLE %I LOGIN PASSWORD %L" : "CREATE ROLE %I LOGIN PASSWORD %L"
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
        }
    }
}
