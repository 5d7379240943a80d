import CommandErrors
import Foundation
import GRDB
import Policy
import Synchronization

/// The isolation layer in SQLite (SPEC S13): WAL, versioned migrations, and
/// a clear error — never a silent reset — for a corrupt database or one
/// written by a newer ScopeFS.
public final class PolicyDatabase: Sendable {
    /// The connection in use. The daemon swaps it when the file at
    /// `location` was deleted or replaced (`release`, `reopen`): everything
    /// holding this object then follows the file the path names.
    public var writer: any DatabaseWriter { connection.withLock { $0.writer } }
    /// Identifies the database in messages.
    public let location: String
    private let connection: Mutex<(writer: any DatabaseWriter, identity: FileState?)>

    /// Opens the database of an initialised state directory.
    public static func open(_ state: StateDirectory) throws(CommandError) -> PolicyDatabase {
        guard FileManager.default.fileExists(atPath: state.databasePath) else {
            throw CommandError(
                .badState,
                "state directory \(state.path) is not initialised (no scopefs.sqlite); run `scopefs --state \(state.path) init`"
            )
        }
        return try PolicyDatabase(path: state.databasePath)
    }

    /// Creates (or opens) the database of a state directory.
    public static func create(_ state: StateDirectory) throws(CommandError) -> PolicyDatabase {
        try state.create()
        if !FileManager.default.fileExists(atPath: state.databasePath) {
            // A -wal or -shm without its database is a deleted database's:
            // SQLite would replay the old pages into the new file.
            unlink(state.databasePath + "-wal")
            unlink(state.databasePath + "-shm")
        }
        return try PolicyDatabase(path: state.databasePath)
    }

    /// An in-memory database, for tests of the policy engine.
    public static func inMemory() throws(CommandError) -> PolicyDatabase {
        do {
            let queue = try DatabaseQueue(configuration: Self.configuration())
            return try PolicyDatabase(writer: queue, location: ":memory:")
        } catch let error as CommandError {
            throw error
        } catch {
            throw CommandError(.internalError, "in-memory database: \(error)")
        }
    }

    private convenience init(path: String) throws(CommandError) {
        do {
            let pool = try DatabasePool(path: path, configuration: Self.configuration())
            try self.init(writer: pool, location: path)
        } catch let error as CommandError {
            throw error
        } catch {
            throw Self.describe(error, path: path)
        }
    }

    private init(writer: any DatabaseWriter, location: String) throws {
        self.location = location
        self.connection = Mutex((writer, location == ":memory:" ? nil : FileState(path: location)))
        try Self.migrate(writer, location: location)
    }

    private static func migrate(_ writer: any DatabaseWriter, location: String) throws {
        let migrator = Migrations.migrator
        let superseded = try writer.read { db in try migrator.hasBeenSuperseded(db) }
        if superseded {
            throw CommandError(
                .badState,
                "database \(location) was written by a newer ScopeFS (unknown schema version); upgrade scopefs — the file was left untouched"
            )
        }
        try migrator.migrate(writer)
    }

    /// The identity of the file the connection was opened on (nil in memory).
    public var identity: FileState? { connection.withLock { $0.identity } }

    /// Drops the connection to a file that is gone or unusable: SQLite
    /// closes it once no read holds it (checkpointing into the old file and
    /// removing its -wal and -shm), before a new file at the path is opened,
    /// whose -wal it would otherwise share. Until `reopen`, every access fails.
    public func release() {
        guard identity != nil else { return }  // released already, or in memory
        let placeholder: any DatabaseWriter
        do { placeholder = try DatabaseQueue() } catch { return }
        connection.withLock { $0 = (placeholder, nil) }
    }

    /// Opens the file the path names now and uses it from here on; the old
    /// connections close once no read holds them, after the new ones opened.
    public func reopen() throws(CommandError) {
        do {
            let pool = try DatabasePool(path: location, configuration: Self.configuration())
            let identity = FileState(path: location)
            try Self.migrate(pool, location: location)
            connection.withLock { $0 = (pool, identity) }
        } catch let error as CommandError {
            throw error
        } catch {
            throw Self.describe(error, path: location)
        }
    }

    /// Checks the file at `path` with a connection of its own, so that no
    /// page cached by the daemon's connections hides a change made behind
    /// SQLite's back: it must be a ScopeFS database that passes
    /// `quick_check`. Reads every page once: run it when the file changed.
    public static func verify(path: String) throws(CommandError) {
        do {
            var config = Configuration()
            config.readonly = true
            config.busyMode = .timeout(2)  // a writer's moment is no corruption
            let queue = try DatabaseQueue(path: path, configuration: config)
            try queue.read { db in
                let result = try String.fetchAll(db, sql: "PRAGMA quick_check")
                guard result == ["ok"] else {
                    throw CommandError(
                        .badState,
                        "database \(path) fails its integrity check: \(result.prefix(3).joined(separator: "; "))")
                }
                guard try db.tableExists("policy_version") else {
                    throw CommandError(.badState, "\(path) is not a ScopeFS database (no policy_version table)")
                }
            }
            try queue.close()
        } catch let error as CommandError {
            throw error
        } catch {
            throw describe(error, path: path)
        }
    }

    private static func configuration() -> Configuration {
        var config = Configuration()
        config.foreignKeysEnabled = true
        config.busyMode = .timeout(10)
        return config
    }

    /// Turns SQLite's errors about the file itself into a people-facing
    /// error that keeps the file untouched (SPEC S34).
    static func describe(_ error: any Error, path: String) -> CommandError {
        if let dbError = error as? DatabaseError {
            switch dbError.resultCode {
            case .SQLITE_NOTADB, .SQLITE_CORRUPT:
                return CommandError(
                    .badState,
                    "database \(path) is corrupt or not a ScopeFS database (\(dbError.message ?? "unreadable")); it was left untouched — move it away and run `scopefs init` to start over"
                )
            case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_READONLY:
                return CommandError(.ioError, "cannot open database \(path): \(dbError.message ?? "\(dbError)")")
            default:
                return CommandError(.ioError, "database \(path): \(dbError.message ?? "\(dbError)")")
            }
        }
        return CommandError(.internalError, "database \(path): \(error)")
    }

    /// Runs a read, mapping database errors to people-facing ones.
    public func read<T>(_ body: (Database) throws -> T) throws(CommandError) -> T {
        do { return try writer.read(body) } catch { throw map(error) }
    }

    /// Runs a write transaction; it is durable when this returns (SPEC S13).
    public func write<T>(_ body: (Database) throws -> T) throws(CommandError) -> T {
        do { return try writer.write(body) } catch { throw map(error) }
    }

    private func map(_ error: any Error) -> CommandError {
        if let error = error as? CommandError { return error }
        return Self.describe(error, path: location)
    }
}

/// A file's identity and when it last changed, from one stat(2): the
/// daemon compares them to notice a database deleted, replaced or
/// rewritten behind SQLite's back.
public struct FileState: Sendable, Equatable {
    public let device: UInt64
    public let inode: UInt64
    public let size: Int64
    public let modified: timespec
    public let changed: timespec

    /// Nil when the path names nothing (or nothing this process may stat).
    public init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modified = info.st_mtim
        changed = info.st_ctim
    }

    /// The same file (device and inode), whatever its content.
    public func isSameFile(as other: FileState) -> Bool {
        device == other.device && inode == other.inode
    }

    public static func == (a: FileState, b: FileState) -> Bool {
        a.isSameFile(as: b) && a.size == b.size && a.modified.tv_sec == b.modified.tv_sec
            && a.modified.tv_nsec == b.modified.tv_nsec && a.changed.tv_sec == b.changed.tv_sec
            && a.changed.tv_nsec == b.changed.tv_nsec
    }
}

/// The schema, one migration per version. Never edit a shipped migration:
/// add a new one.
enum Migrations {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-isolation-layer") { db in
            try db.execute(
                sql: """
                    CREATE TABLE providers (
                        id TEXT PRIMARY KEY NOT NULL,
                        name TEXT NOT NULL,
                        directory TEXT NOT NULL,
                        created_at DOUBLE NOT NULL
                    );
                    CREATE TABLE apps (
                        id TEXT PRIMARY KEY NOT NULL,
                        name TEXT NOT NULL,
                        created_at DOUBLE NOT NULL
                    );
                    -- Provider items by stable identifier. device/inode record the
                    -- file identity so an item can be found again after a rename.
                    CREATE TABLE items (
                        id TEXT PRIMARY KEY NOT NULL,
                        provider_id TEXT NOT NULL REFERENCES providers(id) ON DELETE CASCADE,
                        relative_path TEXT NOT NULL,
                        is_directory BOOLEAN NOT NULL,
                        device INTEGER NOT NULL,
                        inode INTEGER NOT NULL,
                        UNIQUE (provider_id, relative_path)
                    );
                    CREATE TABLE grants (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                        item_id TEXT NOT NULL REFERENCES items(id) ON DELETE CASCADE,
                        access TEXT NOT NULL CHECK (access IN ('read', 'read-write')),
                        state TEXT NOT NULL CHECK (state IN ('active', 'revoked')),
                        granted_at DOUBLE NOT NULL,
                        changed_at DOUBLE NOT NULL,
                        UNIQUE (app_id, item_id)
                    );
                    CREATE INDEX grants_by_app ON grants(app_id);
                    """)
        }
        migrator.registerMigration("v2-events") { db in
            try db.execute(
                sql: """
                    CREATE TABLE events (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        time DOUBLE NOT NULL,
                        kind TEXT NOT NULL,
                        app TEXT,
                        pid INTEGER,
                        path TEXT,
                        operation TEXT,
                        errno INTEGER,
                        grant_id INTEGER,
                        count INTEGER
                    );
                    CREATE INDEX events_by_app ON events(app, id);
                    CREATE INDEX events_by_kind ON events(kind, id);
                    """)
        }
        migrator.registerMigration("v3-item-presence") { db in
            // Set when an item cannot be found by its file identity any more.
            try db.execute(sql: "ALTER TABLE items ADD COLUMN missing BOOLEAN NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v4-item-birth-time") { db in
            // Inode numbers are reused at once by some file systems: with the
            // birth time, a file re-created under a deleted item's name is a
            // new item (SPEC S26).
            try db.execute(
                sql: """
                    ALTER TABLE items ADD COLUMN birth_seconds INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE items ADD COLUMN birth_nanoseconds INTEGER NOT NULL DEFAULT 0;
                    """)
        }
        migrator.registerMigration("v5-policy-version") { db in
            // Counts commits that change the policy. The daemon's watcher
            // polls it rather than SQLite's data_version, which also moves
            // with every batch of events the daemon itself records, so a
            // scope start or stop would cost a full reload (PolicyReloader).
            try db.execute(
                sql: """
                    CREATE TABLE policy_version (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        version INTEGER NOT NULL
                    );
                    INSERT INTO policy_version (id, version) VALUES (1, 0);
                    """)
            for table in ["providers", "apps", "items", "grants"] {
                for change in ["INSERT", "UPDATE", "DELETE"] {
                    try db.execute(
                        sql: """
                            CREATE TRIGGER \(table)_\(change.lowercased())_policy_version AFTER \(change) ON \(table)
                            BEGIN UPDATE policy_version SET version = version + 1; END
                            """)
                }
            }
        }
        migrator.registerMigration("v6-event-retention") { db in
            // Repeats of an event become one row with a count, and rotation
            // keeps each retention class apart (SPEC S29, EventStore). The
            // classes are spelled out, not taken from Event.Kind.retention:
            // a migration must do the same thing forever.
            try db.execute(
                sql: """
                    ALTER TABLE events ADD COLUMN occurrences INTEGER NOT NULL DEFAULT 1;
                    ALTER TABLE events ADD COLUMN last_time DOUBLE;
                    ALTER TABLE events ADD COLUMN retention INTEGER NOT NULL DEFAULT 1;
                    UPDATE events SET retention = CASE
                        WHEN kind IN ('start', 'stop', 'unbalanced-stop', 'budget-exhausted') THEN 0
                        WHEN kind IN ('grant', 'revoke', 'restore') THEN 2
                        ELSE 1 END;
                    CREATE INDEX events_by_retention ON events(retention, id);
                    """)
        }
        migrator.registerMigration("v7-session-grants") { db in
            // A session grant ends when its app's last process exits
            // (`scopefs grant --session`); others persist until forgotten.
            try db.execute(sql: "ALTER TABLE grants ADD COLUMN session BOOLEAN NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v8-provider-extensions") { db in
            // A provider's extension (SPEC S41), as JSON: a built-in name or
            // a command, and its options. NULL for a local folder.
            try db.execute(sql: "ALTER TABLE providers ADD COLUMN extension TEXT")
            // An app's download policy (SPEC S42): NULL is on demand.
            try db.execute(sql: "ALTER TABLE apps ADD COLUMN downloads TEXT")
        }
        migrator.registerMigration("v9-policy-changes") { db in
            // What each policy version changed (issue 34): the daemon reads
            // these rows, not the whole policy, after a change
            // (`PolicyRepository.changes(since:)`). The version triggers of
            // v5 are replaced by ones that also log the row they count. The
            // log keeps the last 100,000 versions (one per row changed);
            // `policy_changes_floor` is the version it is complete after.
            try db.execute(
                sql: """
                    CREATE TABLE policy_changes (version INTEGER NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL);
                    CREATE INDEX policy_changes_by_version ON policy_changes(version);
                    CREATE TABLE policy_changes_floor (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
                    INSERT INTO policy_changes_floor (id, version) SELECT 1, version FROM policy_version;
                    CREATE TRIGGER policy_changes_trim AFTER UPDATE ON policy_version WHEN NEW.version % 1000 = 0
                    BEGIN
                        DELETE FROM policy_changes WHERE version <= NEW.version - 100000;
                        UPDATE policy_changes_floor SET version = max(version, NEW.version - 100000);
                    END;
                    CREATE INDEX grants_by_item ON grants(item_id);
                    """)
            for table in ["providers", "apps", "items", "grants"] {
                for (change, row) in [("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")] {
                    let trigger = "\(table)_\(change.lowercased())_policy_version"
                    try db.execute(
                        sql: """
                            DROP TRIGGER \(trigger);
                            CREATE TRIGGER \(trigger) AFTER \(change) ON \(table)
                            BEGIN
                                UPDATE policy_version SET version = version + 1;
                                INSERT INTO policy_changes (version, kind, id)
                                    SELECT version, '\(table)', \(row).id FROM policy_version;
                            END
                            """)
                }
            }
        }
        return migrator
    }
}
