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
        #expect(try repository.snapshot(generation: 2).coverage(app: "com.example.app", provider: "local", path: "docs/a.txt") == .granted(grant))
        try repository.setState(.revoked, app: "com.example.app", grant: grant.id)
        #expect(try repository.snapshot(generation: 3).grantsByID[grant.id]?.state == .revoked)
        try repository.setState(.active, app: "com.example.app", grant: nil)
        #expect(try repository.snapshot(generation: 4).grantsByID[grant.id]?.state == .active)
    }

    @Test("SPEC S34: unknown apps, missing paths and escapes are clear errors with their exit codes")
    func badInput() throws {
        let (_, repository, root) = try fixture()
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(throws: ScopeFSError.self) { try repository.grant(app: "nope", provider: "local", path: "docs", access: .read) }
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

    @Test("SPEC S29: events are stored, filtered and rotated")
    func events() throws {
        let database = try PolicyDatabase.inMemory()
        let store = EventStore(database: database, capacity: 5)
        try store.append((0..<8).map { Event(time: Double($0), kind: $0 % 2 == 0 ? .start : .leak, app: "a", pid: 1, count: $0) })
        let all = try store.events(.init())
        #expect(all.count == 5)
        #expect(all.map(\.count) == [3, 4, 5, 6, 7])
        #expect(try store.events(.init(kinds: [.leak])).map(\.count) == [3, 5, 7])
    }
}
