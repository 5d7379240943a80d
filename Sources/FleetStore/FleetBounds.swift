/// Bounds on what a host's role can make the fleet's tables hold (issue
/// 34, SPEC S40, S44). A host's role may insert events, claims and its
/// host row, and row-level security keeps it to rows of its own role; it
/// does not keep their number down. A daemon sends at most 50 incidents
/// per batch, but a compromised host speaks SQL, not ScopeFS, so the
/// bounds live in the server, as triggers the owner's role owns
/// (`SECURITY DEFINER`: a host's role could not delete rows otherwise,
/// and gets no right to by these):
/// - events: a host role keeps its newest `eventsPerHostRole` rows;
///   older ones are deleted every hundredth insert (the owner's rows, the
///   grants and revokes, are not touched);
/// - claims: at most `claimsPerHostRole` rows per host role (64 claims per
///   process, S40, for 64 processes); beyond, the insert fails, and the
///   daemon answers the coordinate request as when the store is away;
/// - hosts: at most four rows per host role (its own name, renamed);
/// - text sizes: paths at most 8,192 characters, a host's published
///   processes at most 1 MiB.
enum FleetBounds {
    static let eventsPerHostRole = 10_000
    static let claimsPerHostRole = 4_096
    static let hostsPerHostRole = 4

    static let migrations: [(name: String, statements: [String])] = [
        (
            "v3-fleet-bounds",
            [
                "CREATE INDEX events_by_role ON events (db_role, id)",
                "CREATE INDEX claims_by_role ON claims (db_role)",
                """
                CREATE FUNCTION scopefs_bound_events() RETURNS trigger LANGUAGE plpgsql
                SECURITY DEFINER SET search_path FROM CURRENT AS $$
                BEGIN
                    DELETE FROM events WHERE db_role = NEW.db_role AND id <= (
                        SELECT id FROM events WHERE db_role = NEW.db_role
                        ORDER BY id DESC OFFSET \(eventsPerHostRole) LIMIT 1);
                    RETURN NULL;
                END $$
                """,
                """
                CREATE TRIGGER events_bound AFTER INSERT ON events FOR EACH ROW
                WHEN (NEW.id % 100 = 0 AND NEW.db_role LIKE 'scopefs\\_host\\_%')
                EXECUTE FUNCTION scopefs_bound_events()
                """,
                rowLimit(table: "claims", limit: claimsPerHostRole),
                rowLimit(table: "hosts", limit: hostsPerHostRole),
                """
                ALTER TABLE events ADD CONSTRAINT events_sizes
                CHECK (length(path) <= 8192 AND length(operation) <= 256 AND length(host) <= 256
                    AND length(kind) <= 64 AND length(app) <= 256)
                """,
                "ALTER TABLE claims ADD CONSTRAINT claims_sizes CHECK (length(path) <= 8192 AND length(item) <= 8192)",
                "ALTER TABLE hosts ADD CONSTRAINT hosts_sizes CHECK (length(processes) <= 1048576)",
            ]
                + ["claims", "hosts"].map { table in
                    """
                    CREATE TRIGGER \(table)_bound BEFORE INSERT ON \(table) FOR EACH ROW
                    WHEN (NEW.db_role LIKE 'scopefs\\_host\\_%') EXECUTE FUNCTION scopefs_bound_\(table)()
                    """
                }
        )
    ]

    /// A function refusing a host role's insert into TABLE beyond LIMIT
    /// rows of its role (SQLSTATE 53400, configuration_limit_exceeded).
    private static func rowLimit(table: String, limit: Int) -> String {
        """
        CREATE FUNCTION scopefs_bound_\(table)() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path FROM CURRENT AS $$
        BEGIN
            IF (SELECT count(*) FROM \(table) WHERE db_role = NEW.db_role) >= \(limit) THEN
                RAISE EXCEPTION 'scopefs: role % has \(limit) rows in \(table) already', NEW.db_role
                    USING ERRCODE = '53400';
            END IF;
            RETURN NEW;
        END $$
        """
    }
}
