import Foundation
import GRDB

/// The replica's memory on disk (`<state>/extensions/<provider>/replica.sqlite`):
/// one row per item the extension described, and the sync anchor. Written
/// before the replica acts on it where a crash must not lose it (a dirty
/// mark, an upload's result), so a daemon killed at any moment resumes
/// where it was (SPEC S43). Not the policy database: the isolation layer
/// knows nothing of extensions' ids and versions.
public final class ReplicaStore: Sendable {
    private let queue: DatabaseQueue

    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.writeWithoutTransaction { try $0.execute(sql: "PRAGMA journal_mode = WAL") }
        try Self.migrator.migrate(queue)
    }

    /// An in-memory store, for unit tests.
    public init() throws {
        queue = try DatabaseQueue()
        try Self.migrator.migrate(queue)
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-replica") { db in
            try db.execute(
                sql: """
                    CREATE TABLE items (
                        id TEXT PRIMARY KEY NOT NULL,
                        parent TEXT,
                        name TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        size INTEGER NOT NULL,
                        mtime DOUBLE NOT NULL,
                        mode INTEGER NOT NULL,
                        content_version TEXT NOT NULL,
                        metadata_version TEXT NOT NULL,
                        target TEXT,
                        inode INTEGER NOT NULL,
                        cached_version TEXT,
                        present BLOB NOT NULL,
                        pinned BOOLEAN NOT NULL DEFAULT 0,
                        dirty INTEGER NOT NULL DEFAULT 0,
                        problem TEXT,
                        last_used DOUBLE NOT NULL DEFAULT 0
                    );
                    CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
                    """)
        }
        migrator.registerMigration("v2-ids-by-bytes", migrate: keepIDsByBytes)
        return migrator
    }

    /// Ids saved as the extension gave them become the replica's form
    /// (`ReplicaID`, issue 50): the items' ids and parents, the folders a
    /// pull must list again, and the journal of items a pull was making.
    /// The rows are rewritten all at once: converting one at a time could
    /// meet another row's old id on the way.
    private static func keepIDsByBytes(_ db: Database) throws {
        let rows = try Row.fetchAll(db, sql: "SELECT * FROM items")
        try db.execute(sql: "DELETE FROM items")
        for row in rows {
            let columns = Array(row.columnNames)
            var values = Array(row.databaseValues)
            for (index, column) in columns.enumerated() where column == "id" || column == "parent" {
                if let text = String.fromDatabaseValue(values[index]) {
                    values[index] = ReplicaID.kept(text).databaseValue
                }
            }
            let names = columns.joined(separator: ", ")
            let marks = Array(repeating: "?", count: columns.count).joined(separator: ", ")
            try db.execute(
                sql: "INSERT INTO items (\(names)) VALUES (\(marks))", arguments: StatementArguments(values))
        }
        let keyed = "SELECT value FROM meta WHERE key = ?"
        if let retry = try String.fetchOne(db, sql: keyed, arguments: [ExtensionProvider.retryKey]) {
            let kept = retry.split(separator: "\n").map { ReplicaID.kept(String($0)) }.joined(separator: "\n")
            try db.execute(
                sql: "UPDATE meta SET value = ? WHERE key = ?", arguments: [kept, ExtensionProvider.retryKey])
        }
        if let placing = try String.fetchOne(db, sql: keyed, arguments: [ExtensionProvider.placingKey]),
            var items = try? JSONDecoder().decode([ExtensionItem].self, from: Data(placing.utf8))
        {
            for index in items.indices {
                items[index].id = ReplicaID.kept(items[index].id)
                items[index].parent = items[index].parent.map(ReplicaID.kept)
            }
            let text = String(decoding: try JSONEncoder().encode(items), as: UTF8.self)
            try db.execute(
                sql: "UPDATE meta SET value = ? WHERE key = ?", arguments: [text, ExtensionProvider.placingKey])
        }
    }

    public func records() throws -> [ReplicaRecord] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM items").map(Self.record)
        }
    }

    public func save(_ records: [ReplicaRecord], removing removed: [String] = []) throws {
        guard !records.isEmpty || !removed.isEmpty else { return }
        try queue.write { db in
            for id in removed { try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [id]) }
            for record in records {
                let item = record.item
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO items (id, parent, name, kind, size, mtime, mode, content_version,
                            metadata_version, target, inode, cached_version, present, pinned, dirty, problem, last_used)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        item.id, item.parent, item.name, item.kind.rawValue, item.size, item.mtime, Int64(item.mode),
                        item.version.content, item.version.metadata, item.target, Int64(bitPattern: record.inode),
                        record.cachedVersion, Data(record.present.encoded), record.pinned, record.dirty,
                        record.problem, record.lastUsed,
                    ])
            }
        }
    }

    public func value(_ key: String) throws -> String? {
        try queue.read { try String.fetchOne($0, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key]) }
    }

    public func setValue(_ value: String?, for key: String) throws {
        try queue.write { db in
            if let value {
                try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", arguments: [key, value])
            } else {
                try db.execute(sql: "DELETE FROM meta WHERE key = ?", arguments: [key])
            }
        }
    }

    private static func record(_ row: Row) -> ReplicaRecord {
        let item = ExtensionItem(
            id: row["id"], parent: row["parent"], name: row["name"],
            kind: ItemKind(rawValue: row["kind"]) ?? .file, size: row["size"], mtime: row["mtime"],
            mode: ReplicaFolder.permissions(UInt32(truncatingIfNeeded: row["mode"] as Int64)),
            version: ItemVersion(content: row["content_version"], metadata: row["metadata_version"]),
            target: row["target"])
        var record = ReplicaRecord(item: item, inode: UInt64(bitPattern: row["inode"] as Int64))
        record.cachedVersion = row["cached_version"]
        record.present = ByteRanges(encoded: [UInt8]((row["present"] as Data?) ?? Data()))
        record.pinned = row["pinned"]
        record.dirty = row["dirty"]
        record.problem = row["problem"]
        record.lastUsed = row["last_used"]
        return record
    }
}
