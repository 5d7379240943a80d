import GRDB
import Synchronization

/// Tells the daemon when the policy changed behind its back (a CLI that
/// could not reach it, another tool writing the database): the policy
/// version, which triggers on the policy tables keep (migration
/// v5-policy-version), moved since the last look. The event log shares the
/// database but not the version: recording events reloads nothing.
public final class ChangeWatcher: Sendable {
    private let queue: DatabaseQueue
    private let last: Mutex<Int64>

    public init(_ state: StateDirectory) throws(ScopeFSError) {
        do {
            var config = Configuration()
            config.readonly = true
            queue = try DatabaseQueue(path: state.databasePath, configuration: config)
            last = Mutex(try queue.read(Self.version))
        } catch {
            throw PolicyDatabase.describe(error, path: state.databasePath)
        }
    }

    /// True when a policy change was committed since the last call.
    public func hasChanged() -> Bool {
        guard let version = try? queue.read(Self.version) else { return false }
        return last.withLock { last in
            defer { last = version }
            return last != version
        }
    }

    private static func version(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT version FROM policy_version") ?? 0
    }
}
