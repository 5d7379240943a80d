import Policy
import Testing

@Suite struct DocumentNoticeTests {
    func grant(_ id: GrantID, _ path: String, _ state: GrantState = .active, item: String = "i1") -> Grant {
        Grant(
            id: id, app: "a", provider: "local", item: item, relativePath: path, isDirectory: false, access: .readWrite,
            state: state, grantedAt: 0)
    }

    func snapshot(_ grants: [Grant], items: [ItemIdentifier: ItemLocation] = [:]) -> PolicySnapshot {
        PolicySnapshot(generation: 1, apps: [App(id: "a", name: "A")], providers: [], grants: grants, items: items)
    }

    @Test("Issue 17: a new grant arrives; a revoke, a restore and a removal are told")
    func grantLifecycle() {
        let none = snapshot([])
        let active = snapshot([grant(1, "Novel/a.txt")])
        let revoked = snapshot([grant(1, "Novel/a.txt", .revoked)])
        #expect(PresenterNotice.changes(from: none, to: active).map(\.kind) == [.arrived])
        #expect(PresenterNotice.changes(from: active, to: revoked).map(\.kind) == [.revoked])
        #expect(PresenterNotice.changes(from: revoked, to: active).map(\.kind) == [.restored])
        #expect(PresenterNotice.changes(from: active, to: none).map(\.kind) == [.forgotten])
        #expect(PresenterNotice.changes(from: active, to: active).isEmpty)
        #expect(PresenterNotice.changes(from: none, to: active).first?.path == "Providers/local/Novel/a.txt")
    }

    @Test("Issue 17: the item locator's new place is a move with both paths; a missing item is a deletion")
    func moveAndDelete() {
        let here = snapshot(
            [grant(1, "a.txt")],
            items: ["i1": ItemLocation(provider: "local", path: "a.txt", isDirectory: false, exists: true)])
        let moved = snapshot(
            [grant(1, "a.txt")],
            items: ["i1": ItemLocation(provider: "local", path: "Old/b.txt", isDirectory: false, exists: true)])
        let gone = snapshot(
            [grant(1, "a.txt")],
            items: ["i1": ItemLocation(provider: "local", path: "a.txt", isDirectory: false, exists: false)])
        let move = PresenterNotice.changes(from: here, to: moved)
        #expect(move.map(\.kind) == [.moved])
        #expect(move.first?.path == "Providers/local/Old/b.txt" && move.first?.oldPath == "Providers/local/a.txt")
        #expect(PresenterNotice.changes(from: here, to: gone).map(\.kind) == [.deleted])
    }
}
