import CommandErrors
import Foundation
import Policy
import PolicyStore
import PostgresNIO

/// The fleet's change log (issue 34): what each policy version changed,
/// so that a daemon reads the rows a change touched, not the whole policy
/// (at a million grants a whole read took 16 s, and a revoke waited for
/// it). A statement-level trigger per table and event (transition tables
/// cannot serve several events) logs the ids of the rows the statement
/// changed with the version the existing trigger (`scopefs_policy_changed`,
/// which fires first: same timing, and its name sorts first) gave it. That
/// trigger updates the one `policy_version` row, whose lock its transaction
/// holds until commit, so versions are given in commit order: a reader
/// that sees version V sees every change up to V and none after.
enum FleetChanges {
    /// Versions the log keeps; a daemon further behind reads everything.
    static let window = 10_000

    static let migrations: [(name: String, statements: [String])] = [
        (
            "v4-fleet-policy-changes",
            [
                "CREATE TABLE policy_changes (version BIGINT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL)",
                "CREATE INDEX policy_changes_by_version ON policy_changes (version)",
                // The version the log is complete after.
                """
                CREATE TABLE policy_changes_floor (id INTEGER PRIMARY KEY CHECK (id = 1), version BIGINT NOT NULL)
                """,
                "INSERT INTO policy_changes_floor (id, version) SELECT 1, version FROM policy_version",
                // A moved item's grants are read again: found by item.
                "CREATE INDEX grants_by_item ON grants (item_id)",
                """
                CREATE FUNCTION scopefs_log_policy_changes() RETURNS trigger LANGUAGE plpgsql AS $$
                DECLARE current BIGINT;
                BEGIN
                    SELECT version INTO current FROM policy_version;
                    INSERT INTO policy_changes (version, kind, id) SELECT current, TG_TABLE_NAME, id::text FROM changed;
                    IF current % 100 = 0 THEN
                        DELETE FROM policy_changes WHERE version <= current - \(window);
                        UPDATE policy_changes_floor SET version = greatest(version, current - \(window));
                    END IF;
                    RETURN NULL;
                END $$
                """,
                // Host roles made before this migration read the log too.
                """
                DO $$ DECLARE role TEXT;
                BEGIN
                    FOR role IN SELECT rolname FROM pg_roles
                        WHERE rolname LIKE 'scopefs\\_host\\_%' AND has_table_privilege(rolname, 'grants', 'SELECT')
                    LOOP
                        EXECUTE format('GRANT SELECT ON policy_changes, policy_changes_floor TO %I', role);
                    END LOOP;
                END $$
                """,
            ]
                + ["providers", "apps", "items", "grants"].flatMap { table in
                    [("insert", "NEW"), ("update", "NEW"), ("delete", "OLD")].map { event, rows in
                        """
                        CREATE TRIGGER \(table)_policy_version_log_\(event) AFTER \(event.uppercased()) ON \(table)
                        REFERENCING \(rows) TABLE AS changed FOR EACH STATEMENT
                        EXECUTE FUNCTION scopefs_log_policy_changes()
                        """
                    }
                }
        )
    ]

    /// Log rows one read takes at most; more, and the daemon reads the
    /// whole policy (as fast, and it bounds the document).
    static let rowLimit = 100_000

    /// The changes after a version, the version they bring the policy to,
    /// the log's floor and how many log rows it read, in one statement (one
    /// consistent view, one round trip: this is the read a revoke waits
    /// for on every host). The grants to read are those logged and those of
    /// the items logged (a grant's path is its item's). Each grant and item
    /// is fetched by a scalar subquery on its index, whatever the planner
    /// estimates: right after a bulk grant the log has no statistics yet,
    /// and a join planned from the default estimates scanned all million
    /// grants (100 ms, or 300 with the JIT compiling it; the connection
    /// turns the JIT off, FleetDatabase).
    static let query = """
        WITH recent AS MATERIALIZED (
                SELECT kind, id FROM policy_changes WHERE version > $1 ORDER BY version LIMIT \(rowLimit + 1)),
            logged AS MATERIALIZED (SELECT DISTINCT kind, id FROM recent),
            changed AS (SELECT id::bigint AS id FROM logged WHERE kind = 'grants'
                UNION SELECT unnest(ARRAY(SELECT g.id FROM grants g WHERE g.item_id = l.id))
                FROM logged l WHERE l.kind = 'items')
        SELECT (SELECT version FROM policy_version), (SELECT version FROM policy_changes_floor),
            (SELECT count(*) FROM recent), json_build_object(
            'kinds', (SELECT coalesce(json_agg(DISTINCT kind), '[]') FROM logged),
            'grantIDs', (SELECT coalesce(json_agg(id::bigint), '[]') FROM logged WHERE kind = 'grants'),
            'itemIDs', (SELECT coalesce(json_agg(id), '[]') FROM logged WHERE kind = 'items'),
            'items', (SELECT coalesce(json_agg(
                (SELECT \(FleetRows.itemColumns) FROM items WHERE id = l.id)), '[]')
                FROM logged l WHERE l.kind = 'items'),
            'grants', (SELECT coalesce(json_agg(
                (SELECT \(FleetRows.grantColumns(joined: true)) FROM grants g JOIN items i ON i.id = g.item_id
                WHERE g.id = changed.id AND (NOT g.session OR g.session_host = $2))), '[]') FROM changed)
        )::text
        """

    /// The document `query` returns (null for a row gone since it was logged).
    struct Document: Decodable {
        var kinds: [String]
        var grantIDs: [Int64]
        var itemIDs: [String]
        var items: [FleetRows.ItemRow?]
        var grants: [FleetRows.GrantRow?]
    }
}

extension FleetRepository {
    public func changes(since version: Int64) throws(CommandError) -> PolicyChanges? {
        let (current, floor, rows, document) = try database.run { connection in
            var binds = PostgresBindings()
            binds.append(version)
            binds.append(host)  // another host's session grant reads as gone (decision 64)
            let query = PostgresQuery(unsafeSQL: FleetChanges.query, binds: binds)
            for try await row in try await connection.query(query, logger: FleetDatabase.logger).decode(
                (Int64, Int64, Int64, String).self)
            {
                return row
            }
            return (Int64(0), Int64.max, Int64(0), "{}")
        }
        guard version >= floor, version <= current, rows <= FleetChanges.rowLimit else { return nil }
        let changed: FleetChanges.Document
        do {
            changed = try JSONDecoder().decode(FleetChanges.Document.self, from: Data(document.utf8))
        } catch {
            throw CommandError(
                .badState, "fleet database \(database.endpoint.description): unreadable policy changes (\(error))")
        }
        // An app or a provider: every view may change, read everything.
        guard changed.kinds.allSatisfy({ $0 == "grants" || $0 == "items" }) else { return nil }
        var pool = StringPool()
        let items = Dictionary(
            changed.items.compactMap { $0 }.map { ($0.id, $0.location(&pool)) }, uniquingKeysWith: { first, _ in first }
        )
        let grants = changed.grants.compactMap { $0?.grant(items: [:], &pool) }.sorted { $0.id < $1.id }
        return PolicyChanges(
            version: current, grants: grants, removedGrants: Set(changed.grantIDs).subtracting(grants.map(\.id)),
            items: items, removedItems: Set(changed.itemIDs).subtracting(items.keys))
    }
}
