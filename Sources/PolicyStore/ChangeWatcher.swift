import GRDB

/// Notices commits made to the database by other processes (a CLI that
/// could not reach the daemon, or crashed before telling it), through
/// SQLite's `data_version`, which changes when another connection commits.
public final class ChangeWatcher: Sendable {
    private let queue: DatabaseQueue
    private let last: SendableBox

    public init(_ state: StateDirectory) throws(ScopeFSError) {
        do {
            var config = Configuration()
            config.readonly = true
            queue = try DatabaseQueue(path: state.databasePath, configuration: config)
            last = SendableBox(try queue.read { try Int.fetchOne($0, sql: "PRAGMA data_version") ?? 0 })
        } catch {
            throw PolicyDatabase.describe(error, path: state.databasePath)
        }
    }

    /// True when another connection committed since the last call.
    public func hasChanged() -> Bool {
        // data_version is per connection: always ask the same one.
        guard let version = try? queue.inDatabase({ try Int.fetchOne($0, sql: "PRAGMA data_version") }) else {
            return false
        }
        return last.exchange(version) != version
    }
}

import Synchronization

final class SendableBox: Sendable {
    private let value: Mutex<Int>
    init(_ value: Int) { self.value = Mutex(value) }
    func exchange(_ new: Int) -> Int {
        value.withLock { old in
            defer { old = new }
            return old
        }
    }
}
