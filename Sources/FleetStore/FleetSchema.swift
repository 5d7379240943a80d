import CommandErrors
import PostgresNIO

/// The fleet's schema, one migration per version, as for SQLite (SPEC
/// S13): never edit a shipped one, add a new one. Each is a list of
/// statements (the extended protocol takes one at a time), applied in one
/// transaction with its row in `scopefs_migrations`.
enum FleetSchema {
    static let channel = "scopefs_policy"

    /// Every migration, in order: the core ones, the claims table's
    /// (FleetClaims.swift), the bounds on a host role's rows
    /// (FleetBounds.swift, issue 34), the change log (FleetChanges.swift),
    /// then the hosts of session grants (FleetSessions.swift).
    static var migrations: [(name: String, statements: [String])] {
        core + FleetClaims.migrations + FleetBounds.migrations + FleetChanges.migrations + FleetSessions.migrations
    }

    static let core: [(name: String, statements: [String])] = [
        (
            "v1-fleet",
            [
                """
                CREATE TABLE providers (id TEXT PRIMARY KEY, name TEXT NOT NULL, directory TEXT NOT NULL,
                    extension TEXT, created_at DOUBLE PRECISION NOT NULL)
                """,
                """
                CREATE TABLE apps (id TEXT PRIMARY KEY, name TEXT NOT NULL, downloads TEXT,
                    created_at DOUBLE PRECISION NOT NULL)
                """,
                """
                CREATE TABLE items (id TEXT PRIMARY KEY,
                    provider_id TEXT NOT NULL REFERENCES providers(id) ON DELETE CASCADE,
                    relative_path TEXT NOT NULL, is_directory BOOLEAN NOT NULL,
                    device BIGINT NOT NULL, inode BIGINT NOT NULL,
                    birth_seconds BIGINT NOT NULL DEFAULT 0, birth_nanoseconds BIGINT NOT NULL DEFAULT 0,
                    missing BOOLEAN NOT NULL DEFAULT false, UNIQUE (provider_id, relative_path))
                """,
                """
                CREATE TABLE grants (id BIGSERIAL PRIMARY KEY,
                    app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                    item_id TEXT NOT NULL REFERENCES items(id) ON DELETE CASCADE,
                    access TEXT NOT NULL CHECK (access IN ('read', 'read-write')),
                    state TEXT NOT NULL CHECK (state IN ('active', 'revoked')),
                    granted_at DOUBLE PRECISION NOT NULL, changed_at DOUBLE PRECISION NOT NULL,
                    session BOOLEAN NOT NULL DEFAULT false, UNIQUE (app_id, item_id))
                """,
                // `db_role` is set by the server: a host may write any host
                // name, but not another role (SECURITY.md).
                """
                CREATE TABLE events (id BIGSERIAL PRIMARY KEY, time DOUBLE PRECISION NOT NULL,
                    host TEXT NOT NULL, db_role TEXT NOT NULL DEFAULT current_user, kind TEXT NOT NULL,
                    app TEXT, pid INTEGER, path TEXT, operation TEXT, errno INTEGER, grant_id BIGINT)
                """,
                "CREATE INDEX events_by_app ON events (app, id)",
                """
                CREATE TABLE hosts (name TEXT PRIMARY KEY, db_role TEXT NOT NULL DEFAULT current_user,
                    last_seen DOUBLE PRECISION NOT NULL, version BIGINT NOT NULL, failure TEXT,
                    lease DOUBLE PRECISION NOT NULL, processes TEXT NOT NULL DEFAULT '[]')
                """,
                "CREATE TABLE policy_version (id INTEGER PRIMARY KEY CHECK (id = 1), version BIGINT NOT NULL)",
                "INSERT INTO policy_version (id, version) VALUES (1, 0)",
                // Every statement that changes the policy moves the version and
                // tells each listening daemon, at commit (SPEC S44).
                """
                CREATE FUNCTION scopefs_policy_changed() RETURNS trigger LANGUAGE plpgsql AS $$
                DECLARE current BIGINT;
                BEGIN
                    UPDATE policy_version SET version = version + 1 RETURNING version INTO current;
                    PERFORM pg_notify('\(channel)', current::text);
                    RETURN NULL;
                END $$
                """,
            ]
                + ["providers", "apps", "items", "grants"].map { table in
                    """
                    CREATE TRIGGER \(table)_policy_version AFTER INSERT OR UPDATE OR DELETE ON \(table)
                    FOR EACH STATEMENT EXECUTE FUNCTION scopefs_policy_changed()
                    """
                }
                + [
                    // Rows of a host's role are its own to write (hosts, events);
                    // the owner, who owns the tables, is not bound by these.
                    "ALTER TABLE hosts ENABLE ROW LEVEL SECURITY",
                    "CREATE POLICY hosts_read ON hosts FOR SELECT USING (true)",
                    "CREATE POLICY hosts_insert ON hosts FOR INSERT WITH CHECK (db_role = current_user)",
                    """
                    CREATE POLICY hosts_update ON hosts FOR UPDATE USING (db_role = current_user)
                    WITH CHECK (db_role = current_user)
                    """,
                    "ALTER TABLE events ENABLE ROW LEVEL SECURITY",
                    "CREATE POLICY events_read ON events FOR SELECT USING (true)",
                    "CREATE POLICY events_insert ON events FOR INSERT WITH CHECK (db_role = current_user)",
                ]
        )
    ]

    /// Applies the migrations this ScopeFS knows and the database lacks;
    /// refuses a database with one it does not know (a newer ScopeFS's).
    static func migrate(_ database: FleetDatabase) throws(CommandError) {
        let applied = try database.transaction { connection in
            // Created only when missing: a host's role, which may not create
            // tables, runs init too and finds the schema done.
            var exists = false
            for try await found in try await connection.query(
                "SELECT to_regclass('scopefs_migrations') IS NOT NULL", logger: FleetDatabase.logger
            ).decode(Bool.self) {
                exists = found
            }
            if !exists {
                try await connection.query(
                    "CREATE TABLE scopefs_migrations (name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)",
                    logger: FleetDatabase.logger)
            }
            var names: [String] = []
            for try await name in try await connection.query(
                "SELECT name FROM scopefs_migrations", logger: FleetDatabase.logger
            ).decode(String.self) {
                names.append(name)
            }
            return names
        }
        try checkKnown(applied, database)
        for migration in migrations where !applied.contains(migration.name) {
            try database.transaction { connection in
                for statement in migration.statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: FleetDatabase.logger)
                }
                try await connection.query(
                    "INSERT INTO scopefs_migrations (name, applied_at) VALUES (\(migration.name), extract(epoch from now()))",
                    logger: FleetDatabase.logger)
            }
        }
    }

    /// For a daemon, whose role may not change the schema: the database
    /// must hold exactly the migrations this ScopeFS knows.
    static func check(_ database: FleetDatabase) throws(CommandError) {
        let applied = try database.run { connection in
            var names: [String] = []
            for try await name in try await connection.query(
                "SELECT name FROM scopefs_migrations", logger: FleetDatabase.logger
            ).decode(String.self) {
                names.append(name)
            }
            return names
        }
        try checkKnown(applied, database)
        if applied.count < migrations.count {
            throw CommandError(
                .badState,
                "fleet database \(database.endpoint.description) is not migrated yet; run `scopefs init --database` as the owner first"
            )
        }
    }

    private static func checkKnown(_ applied: [String], _ database: FleetDatabase) throws(CommandError) {
        let known = Set(migrations.map(\.name))
        if let unknown = applied.first(where: { !known.contains($0) }) {
            throw CommandError(
                .badState,
                "fleet database \(database.endpoint.description) was written by a newer ScopeFS (migration \(unknown)); upgrade scopefs — nothing was changed"
            )
        }
    }
}
