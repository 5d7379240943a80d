import CommandErrors
import Foundation
import Policy
import PolicyStore
import Testing

/// The isolation layer on SQLite (SPEC S13, S16, S34), in temporary folders.
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

    @Test("SPEC S16/S14/S15: grant, revoke, restore change the snapshot")
    func grantRevokeRestore() throws {
        let (_, repository, root) = try fixture()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let grant = try repository.grant(app: "com.example.app", provider: "local", path: "docs", access: .readWrite)
        #expect(
            try repository.snapshot(generation: 2).coverage(
                app: "com.example.app", provider: "local", path: "docs/a.txt") == .granted(grant))
        try repository.setState(.revoked, app: "com.example.app", grant: grant.id)
        #expect(try repository.snapshot(generation: 3).grantsByID[grant.id]?.state == .revoked)
        try repository.setState(.active, app: "com.example.app", grant: nil)
        #expect(try repository.snapshot(generation: 4).grantsByID[grant.id]?.state == .active)
    }

    @Test("SPEC S34: unknown apps, missing paths and escapes are clear errors with their exit codes")
    func badInput() throws {
        let (_, repository, root) = try fixture()
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(throws: CommandError.self) {
            try repository.grant(app: "nope", provider: "local", path: "docs", access: .read)
        }
        do {
            _ = try repository.grant(app: "com.example.app", provider: "local", path: "../x", access: .read)
            Issue.record("escape accepted")
        } catch { #expect(error.exitCode == 65) }
        do {
            _ = try repository.grant(app: "com.example.app", provider: "local", path: "missing", access: .read)
            Issue.record("missing path accepted")
        } catch { #expect(error.exitCode == 66) }
        do {
            _ = try repository.grant(app: "com.example.app", provider: "nope", path: "docs", access: .read)
            Issue.record("unknown provider accepted")
        } catch { #expect(error.exitCode == 67) }
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

/// Grant lifecycle in SQLite (issue 16): one grant per item per app,
/// forget, session grants, and the provider's root.
@Suite struct GrantLifecycleStoreTests {
    let app = "com.example.app"

    func fixture() throws -> (PolicyRepository, String) {
        let (_, repository, root) = try StoreTests().fixture()
        return (repository, root)
    }

    @Test("Granting an item again reuses its grant; the picker only widens, `grant` replaces")
    func reuse() throws {
        let (repository, root) = try fixture()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let first = try repository.grant(
            app: app, provider: "local", path: "docs/a.txt", access: .read, update: .widen, wholeProvider: false)
        #expect(first.previous == nil)
        let again = try repository.grant(
            app: app, provider: "local", path: "docs/a.txt", access: .readWrite, update: .widen, wholeProvider: false)
        #expect(again.grant.id == first.grant.id)
        #expect(again.changes == ["access read-only -> read-write"])
        let narrowed = try repository.grant(
            app: app, provider: "local", path: "docs/a.txt", access: .read, update: .widen, wholeProvider: false)
        #expect(narrowed.grant.access == .readWrite && narrowed.changes.isEmpty)
        let replaced = try repository.grant(
            app: app, provider: "local", path: "docs/a.txt", access: .read, session: true, wholeProvider: false)
        #expect(replaced.changes == ["access read-write -> read-only", "lifetime persistent -> session"])
        #expect(try repository.grants(app: app).count == 1)
        #expect(try repository.grants(app: app).first?.isSession == true)
    }

    @Test("A provider's root needs wholeProvider (exit 64)")
    func wholeProvider() throws {
        let (repository, root) = try fixture()
        defer { try? FileManager.default.removeItem(atPath: root) }
        for path in [".", "", "./", "./."] {
            do {
                _ = try repository.grant(app: app, provider: "local", path: path, access: .read, wholeProvider: false)
                Issue.record("root granted without wholeProvider: \(path)")
            } catch { #expect(error.exitCode == 64) }
        }
        #expect(
            try repository.grant(app: app, provider: "local", path: ".", access: .read, wholeProvider: true).grant
                .relativePath == "")
    }

    @Test("Forget removes grants for good; session-only forgets only session grants")
    func forget() throws {
        let (repository, root) = try fixture()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let kept = try repository.grant(app: app, provider: "local", path: "docs", access: .read, wholeProvider: false)
            .grant
        let session = try repository.grant(
            app: app, provider: "local", path: "docs/a.txt", access: .read, session: true, wholeProvider: false
        ).grant
        #expect(try repository.forget(app: app, grant: nil, sessionOnly: true).map(\.id) == [session.id])
        #expect(try repository.grants(app: app).map(\.id) == [kept.id])
        #expect(try repository.forget(app: app, grant: nil, sessionOnly: true).isEmpty)
        #expect(throws: CommandError.self) { try repository.forget(app: app, grant: 999) }
        #expect(try repository.forget(app: app, grant: kept.id).map(\.id) == [kept.id])
        #expect(try repository.snapshot(generation: 9).grantsByID.isEmpty)
    }
}
