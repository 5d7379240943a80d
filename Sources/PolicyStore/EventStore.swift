import Foundation
import GRDB
import Policy

/// The durable, bounded event log (SPEC S29): the newest `capacity` events
/// are kept, older ones rotate out.
public struct EventStore: Sendable {
    public let database: PolicyDatabase
    public let capacity: Int

    public init(database: PolicyDatabase, capacity: Int = 100_000) {
        self.database = database
        self.capacity = capacity
    }

    public func append(_ events: [Event]) throws(ScopeFSError) {
        guard !events.isEmpty else { return }
        try database.write { db in
            let statement = try db.cachedStatement(sql: """
                INSERT INTO events (time, kind, app, pid, path, operation, errno, grant_id, count)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            for event in events {
                try statement.execute(arguments: [
                    event.time, event.kind.rawValue, event.app, event.pid, event.path, event.operation, event.errno,
                    event.grant, event.count,
                ])
            }
            // Rotation: one indexed range delete per batch.
            let oldestKept = db.lastInsertedRowID - Int64(capacity)
            if oldestKept > 0 {
                try db.execute(sql: "DELETE FROM events WHERE id <= ?", arguments: [oldestKept])
            }
        }
    }

    public struct Filter: Sendable {
        public var app: AppID?
        public var kinds: Set<Event.Kind>?
        public var since: Double?
        public var afterID: Int64?
        public var limit: Int?

        public init(app: AppID? = nil, kinds: Set<Event.Kind>? = nil, since: Double? = nil, afterID: Int64? = nil, limit: Int? = nil) {
            self.app = app
            self.kinds = kinds
            self.since = since
            self.afterID = afterID
            self.limit = limit
        }
    }

    /// Events matching `filter`, oldest first (the newest `limit` of them).
    public func events(_ filter: Filter) throws(ScopeFSError) -> [Event] {
        var clauses: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        if let app = filter.app { clauses.append("app = ?"); arguments.append(app) }
        if let since = filter.since { clauses.append("time >= ?"); arguments.append(since) }
        if let after = filter.afterID { clauses.append("id > ?"); arguments.append(after) }
        if let kinds = filter.kinds {
            clauses.append("kind IN (\(kinds.map { _ in "?" }.joined(separator: ",")))")
            arguments += kinds.map { $0.rawValue }
        }
        let whereClause = clauses.isEmpty ? "" : "WHERE " + clauses.joined(separator: " AND ")
        let limit = filter.limit.map { "LIMIT \($0)" } ?? ""
        let sql = "SELECT * FROM (SELECT * FROM events \(whereClause) ORDER BY id DESC \(limit)) ORDER BY id"
        return try database.read { db in
            try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)).map { row in
                var event = Event(
                    time: row["time"], kind: Event.Kind(rawValue: row["kind"]) ?? .denial, app: row["app"],
                    pid: row["pid"], path: row["path"], operation: row["operation"], errno: row["errno"],
                    grant: row["grant_id"], count: row["count"])
                event.id = row["id"]
                return event
            }
        }
    }
}
