import CommandErrors
import Foundation
import GRDB
import Policy

/// The durable, bounded event log (SPEC S29), which no app can flush:
/// - a repeat of a recent event (`Event.isRepeat(of:)`) adds to that
///   event's occurrences instead of adding a row, so a flood of identical
///   events costs one row;
/// - each retention class (`Event.Retention`) keeps its own newest
///   `capacity` events, so a flood of stops never evicts a denial, and no
///   flood of anything an app can cause evicts a grant or a revoke.
public struct EventStore: Sendable {
    public let database: PolicyDatabase
    /// Events kept per retention class. The log is trimmed each time a
    /// tenth of that many new rows were added, so a class may briefly hold
    /// up to 10% more.
    public let capacity: Int
    /// Seconds after an event's last occurrence during which a repeat is
    /// coalesced into it rather than recorded as a new row.
    public let coalescingWindow: Double
    /// How many of the newest rows a repeat may be coalesced into. Only
    /// the newest: alternating events (start, stop, start, ...) coalesce,
    /// while the log still shows the order in which things happened.
    public static let coalescingLookback = 16

    public init(database: PolicyDatabase, capacity: Int = 100_000, coalescingWindow: Double = 10) {
        self.database = database
        self.capacity = capacity
        self.coalescingWindow = coalescingWindow
    }

    public func append(_ events: [Event]) throws(CommandError) {
        guard !events.isEmpty else { return }
        try database.write { db in
            var recent = try RecentEvents(db, lookback: Self.coalescingLookback, window: coalescingWindow)
            var inserted: ClosedRange<Int64>?
            for event in events where !recent.absorb(event) {
                var stored = event
                let id = try Self.insert(event, into: db)
                stored.id = id
                recent.append(stored)
                inserted = (inserted?.lowerBound ?? id)...id
            }
            try recent.saveOccurrences(db)
            if let inserted, crossesTrimPoint(inserted) { try trim(db) }
        }
    }

    /// Records policy changes made elsewhere (a fleet's store) as rows of
    /// their own, never coalesced, as a change this store made itself is.
    public func recordChanges(_ events: [Event]) throws(CommandError) {
        guard !events.isEmpty else { return }
        try database.write { db in
            var inserted: ClosedRange<Int64>?
            for event in events {
                let id = try Self.insert(event, into: db)
                inserted = (inserted?.lowerBound ?? id)...id
            }
            // Bounded at the insert, as `append` is (SPEC S40): a bulk revoke
            // of many grants is many rows.
            if let inserted, crossesTrimPoint(inserted) { try trim(db) }
        }
    }

    /// Writes one event as a new row; returns its id. Grants, revokes and
    /// restores come here straight from the command that made them.
    static func insert(_ event: Event, into db: Database) throws -> Int64 {
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO events (time, kind, app, pid, path, operation, errno, grant_id, count, occurrences, last_time, retention)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        try statement.execute(arguments: [
            event.time, event.kind.rawValue, event.app, event.pid, event.path, event.operation, event.errno,
            event.grant, event.count, event.occurrences, event.lastTime, event.kind.retention.rawValue,
        ])
        return db.lastInsertedRowID
    }

    /// Trimming costs a walk over `capacity` index entries per class, so it
    /// runs once per tenth of `capacity` new rows, not per batch.
    private func crossesTrimPoint(_ ids: ClosedRange<Int64>) -> Bool {
        let stride = Int64(max(1, capacity / 10))
        return ids.upperBound / stride != (ids.lowerBound - 1) / stride
    }

    /// Deletes the events of each retention class beyond its newest `capacity`.
    private func trim(_ db: Database) throws {
        for retention in Event.Retention.allCases {
            let oldestDropped = try Int64.fetchOne(
                db, sql: "SELECT id FROM events WHERE retention = ? ORDER BY id DESC LIMIT 1 OFFSET ?",
                arguments: [retention.rawValue, capacity])
            if let oldestDropped {
                try db.execute(
                    sql: "DELETE FROM events WHERE retention = ? AND id <= ?",
                    arguments: [retention.rawValue, oldestDropped])
            }
        }
    }

    public struct Filter: Sendable {
        public var app: AppID?
        public var kinds: Set<Event.Kind>?
        /// Events whose last occurrence is at or after this time.
        public var since: Double?
        public var afterID: Int64?
        public var limit: Int?

        public init(
            app: AppID? = nil, kinds: Set<Event.Kind>? = nil, since: Double? = nil, afterID: Int64? = nil,
            limit: Int? = nil
        ) {
            self.app = app
            self.kinds = kinds
            self.since = since
            self.afterID = afterID
            self.limit = limit
        }
    }

    /// Events matching `filter`, oldest first (the newest `limit` of them).
    public func events(_ filter: Filter) throws(CommandError) -> [Event] {
        var clauses: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        if let app = filter.app {
            clauses.append("app = ?")
            arguments.append(app)
        }
        if let since = filter.since {
            clauses.append("COALESCE(last_time, time) >= ?")
            arguments.append(since)
        }
        if let after = filter.afterID {
            clauses.append("id > ?")
            arguments.append(after)
        }
        if let kinds = filter.kinds {
            clauses.append("kind IN (\(kinds.map { _ in "?" }.joined(separator: ",")))")
            arguments += kinds.map { $0.rawValue }
        }
        let whereClause = clauses.isEmpty ? "" : "WHERE " + clauses.joined(separator: " AND ")
        let limit = filter.limit.map { "LIMIT \($0)" } ?? ""
        let sql = "SELECT * FROM (SELECT * FROM events \(whereClause) ORDER BY id DESC \(limit)) ORDER BY id"
        return try database.read { db in
            try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)).map(Self.event)
        }
    }

    static func event(_ row: Row) -> Event {
        var event = Event(
            time: row["time"], kind: Event.Kind(rawValue: row["kind"]) ?? .denial, app: row["app"],
            pid: row["pid"], path: row["path"], operation: row["operation"], errno: row["errno"],
            grant: row["grant_id"], count: row["count"], occurrences: row["occurrences"], lastTime: row["last_time"])
        event.id = row["id"]
        return event
    }
}

/// The newest rows of the log, which new events may be repeats of, with the
/// occurrences added to them in this transaction.
private struct RecentEvents {
    private var rows: [(event: Event, changed: Bool)]
    /// Changed rows that newer ones pushed out of the lookback.
    private var pushedOut: [Event] = []
    private let lookback: Int
    private let window: Double

    init(_ db: Database, lookback: Int, window: Double) throws {
        self.rows = try Row.fetchAll(db, sql: "SELECT * FROM events ORDER BY id DESC LIMIT ?", arguments: [lookback])
            .reversed().map { (EventStore.event($0), false) }
        self.lookback = lookback
        self.window = window
    }

    /// Counts `event` as one more occurrence of a recent row if it repeats
    /// one. Never across a grant, revoke or restore: what an app did before
    /// and after a change of its grants are different facts.
    mutating func absorb(_ event: Event) -> Bool {
        guard event.kind.retention != .policyChange else { return false }
        for index in rows.indices.reversed() {
            let row = rows[index].event
            if event.isRepeat(of: row) {
                let last = row.lastTime ?? row.time
                guard abs(event.time - last) <= window else { return false }
                rows[index].event.occurrences += event.occurrences
                rows[index].event.lastTime = max(last, event.lastTime ?? event.time)
                rows[index].changed = true
                return true
            }
            if row.kind.retention == .policyChange { return false }
        }
        return false
    }

    mutating func append(_ stored: Event) {
        rows.append((stored, false))
        if rows.count > lookback {
            let oldest = rows.removeFirst()
            if oldest.changed { pushedOut.append(oldest.event) }
        }
    }

    func saveOccurrences(_ db: Database) throws {
        for event in pushedOut + rows.filter(\.changed).map(\.event) {
            try db.execute(
                sql: "UPDATE events SET occurrences = ?, last_time = ? WHERE id = ?",
                arguments: [event.occurrences, event.lastTime, event.id])
        }
    }
}
