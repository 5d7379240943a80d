import CommandErrors
import Foundation
import Policy
import PolicyStore
import Testing

/// What only the SQLite store has (SPEC S13, S29, S34), in temporary
/// folders. What both stores share is Tests/IsolationStoreTests.
@Suite struct StoreTests {
    func fixture() throws -> (StateDirectory, PolicyRepository, String) {
        let root = NSTemporaryDirectory() + "scopefs-store-\(UUID().uuidString)"
        let provider = root + "/provider"
        try FileManager.default.createDirectory(atPath: provider + "/docs", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: provider + "/docs/a.txt", contents: Data("a".utf8))
        let state = StateDirectory(path: root + "/state")
        let repository = PolicyRepository(database: try PolicyDatabase.create(state))
        _ = try repository.addProvider(id: "local", directory: provider, name: nil)
        _ = try repository.addApp(id: "com.example.app", name: nil)
        return (state, repository, root)
    }

    @Test("SPEC S34: a corrupt database is an error (78) and is left untouched")
    func corruptDatabase() throws {
        let root = NSTemporaryDirectory() + "scopefs-corrupt-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let state = StateDirectory(path: root)
        try state.create()
        let garbage = Data(repeating: 0x5a, count: 8192)
        _ = FileManager.default.createFile(atPath: state.databasePath, contents: garbage)
        do {
            _ = try PolicyDatabase.open(state)
            Issue.record("corrupt database opened")
        } catch { #expect(error.exitCode == 78) }
        #expect(FileManager.default.contents(atPath: state.databasePath) == garbage)
    }

    @Test("SPEC S29: events are stored, filtered and rotated per retention class")
    func events() throws {
        let database = try PolicyDatabase.inMemory()
        let store = EventStore(database: database, capacity: 5)
        try store.append(
            (0..<16).map { Event(time: Double($0), kind: $0 % 2 == 0 ? .start : .leak, app: "a", pid: 1, count: $0) })
        #expect(try store.events(.init()).count == 10)
        #expect(try store.events(.init(kinds: [.start])).map(\.count) == [6, 8, 10, 12, 14])
        #expect(try store.events(.init(kinds: [.leak])).map(\.count) == [7, 9, 11, 13, 15])
    }

    @Test("SPEC S29, S40: changes recorded from a fleet's store are bounded as they are inserted")
    func recordedChangesAreTrimmed() throws {
        let store = EventStore(database: try PolicyDatabase.inMemory(), capacity: 5)
        try store.recordChanges((0..<40).map { Event(time: Double($0), kind: .revoke, app: "a", grant: Int64($0)) })
        let kept = try store.events(.init()).compactMap(\.grant)
        #expect(kept.count <= 5 + 5 / 10 + 1 && kept.last == 39, "kept \(kept)")
    }

    @Test("SPEC S29 (amended): a flood of routine events evicts no grant, revoke or denial")
    func floodKeepsImportantEvents() throws {
        let (state, repository, _) = try fixture()
        let grant = try repository.grant(app: "com.example.app", provider: "local", path: "docs/a.txt", access: .read)
        _ = try repository.setState(.revoked, app: "com.example.app", grant: grant.id)
        let store = EventStore(database: try PolicyDatabase.open(state), capacity: 10)
        try store.append([Event(time: 1, kind: .denial, app: "com.example.app", pid: 7, path: "/x", errno: 1)])
        // Distinct stops (ever new pids), so that none coalesces.
        try store.append(
            (0..<100).map { Event(time: 2, kind: .unbalancedStop, app: "com.example.app", pid: Int32(100 + $0)) })
        let kinds = try store.events(.init()).map(\.kind)
        #expect(kinds.filter { $0 != .unbalancedStop } == [.grant, .revoke, .denial])
        #expect(kinds.filter { $0 == .unbalancedStop }.count <= 11)
    }

    @Test("SPEC S29 (amended): repeats coalesce into one event, but not across a change of grants")
    func repeatsCoalesce() throws {
        let (state, repository, _) = try fixture()
        let store = EventStore(database: try PolicyDatabase.open(state), coalescingWindow: 10)
        func stop(_ time: Double, pid: Int32 = 7) -> Event {
            Event(time: time, kind: .unbalancedStop, app: "com.example.app", pid: pid, count: 0)
        }
        try store.append([stop(1), stop(2), stop(2, pid: 8), stop(3)])
        // Alternating with starts: still one row per kind.
        try store.append([Event(time: 4, kind: .start, app: "com.example.app", pid: 7, count: 1), stop(4)])
        try store.append([Event(time: 5, kind: .start, app: "com.example.app", pid: 7, count: 1), stop(5)])
        try store.append([stop(30)])  // outside the window after the last one: a new row
        _ = try repository.grant(app: "com.example.app", provider: "local", path: "docs/a.txt", access: .read)
        try store.append([stop(31)])  // after a grant: a new row
        let events = try store.events(.init())
        #expect(
            events.map { "\($0.kind.rawValue) \($0.pid ?? 0) ×\($0.occurrences)" } == [
                "unbalanced-stop 7 ×5", "unbalanced-stop 8 ×1", "start 7 ×2", "unbalanced-stop 7 ×1",
                "grant \(getpid()) ×1", "unbalanced-stop 7 ×1",
            ])
        #expect(events[0].time == 1 && events[0].lastTime == 5)
        #expect(try store.events(.init(since: 4.5)).map(\.occurrences).prefix(2) == [5, 2])
    }
}
