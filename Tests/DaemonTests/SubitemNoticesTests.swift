import Glibc
import Policy
import ScopeFS
import Testing

@testable import Daemon

/// Who hears what of items inside granted folders (issue 31, SPEC S27c),
/// the joining of a host rename's halves, and the notice board's per-app
/// window (S40), without a mount.
@Suite struct SubitemNoticesTests {
    let alpha = "com.example.alpha"
    let beta = "com.example.beta"

    func grant(_ id: GrantID, _ app: AppID, _ path: String, folder: Bool = true, state: GrantState = .active)
        -> Grant
    {
        Grant(
            id: id, app: app, provider: "local", item: "item-\(id)", relativePath: path, isDirectory: folder,
            access: .readWrite, state: state, grantedAt: 0)
    }

    func snapshot(_ grants: [Grant]) -> PolicySnapshot {
        PolicySnapshot(
            generation: 1, apps: [App(id: alpha, name: "Alpha"), App(id: beta, name: "Beta")],
            providers: [Provider(id: "local", name: "Local", directory: "/p")], grants: grants)
    }

    func told(_ change: SubitemChange, except writer: AppID? = nil, in policy: PolicySnapshot) -> [String] {
        SubitemNotices.notices("local", change, except: writer, in: policy).map {
            "\($0.app == alpha ? "alpha" : "beta") \($0.kind.rawValue) \($0.path)" + ($0.oldPath.map { " " + $0 } ?? "")
        }
    }

    @Test func aFoldersItemsAtAnyDepthAreToldWithTheAppsPaths() {
        let policy = snapshot([grant(1, alpha, "docs")])
        #expect(told(.appeared("docs/a.txt"), in: policy) == ["alpha appeared Providers/local/docs/a.txt"])
        #expect(told(.deleted("docs/x/y/z.txt"), in: policy) == ["alpha deleted Providers/local/docs/x/y/z.txt"])
        #expect(
            told(.moved(from: "docs/a.txt", to: "docs/x/b.txt"), in: policy) == [
                "alpha moved Providers/local/docs/x/b.txt Providers/local/docs/a.txt"
            ])
        #expect(
            SubitemNotices.notices("local", .appeared("docs/a.txt"), except: nil, in: policy).first?.subitem == true)
    }

    @Test func movesInAndOutOfSightAreAppearedAndDeleted() {
        let policy = snapshot([grant(1, alpha, "docs")])
        #expect(
            told(.moved(from: "photos/p.jpg", to: "docs/p.jpg"), in: policy) == [
                "alpha appeared Providers/local/docs/p.jpg"
            ])
        #expect(
            told(.moved(from: "docs/p.jpg", to: "photos/p.jpg"), in: policy) == [
                "alpha deleted Providers/local/docs/p.jpg"
            ])
    }

    @Test func nothingLeaks() {
        let policy = snapshot([
            grant(1, alpha, "docs"), grant(2, beta, "docs/report.txt", folder: false),
            grant(3, beta, "photos", state: .revoked),
        ])
        // Beside the grant, the granted folder itself, a file grant's neighbour,
        // a revoked grant, the app that made the change, a staging file.
        #expect(told(.appeared("sibling.txt"), in: policy).isEmpty)
        #expect(told(.appeared("docs-other/a.txt"), in: policy).isEmpty)
        #expect(told(.deleted("docs"), in: policy).isEmpty)
        #expect(told(.appeared("docs/new.txt"), in: policy) == ["alpha appeared Providers/local/docs/new.txt"])
        #expect(told(.appeared("photos/q.jpg"), in: policy).isEmpty)
        #expect(told(.appeared("docs/new.txt"), except: alpha, in: policy).isEmpty)
        #expect(told(.appeared("docs/.x.scopefs-partial-1"), in: policy).isEmpty)
        #expect(told(.appeared("docs/report.txt"), in: policy) == ["alpha appeared Providers/local/docs/report.txt"])
    }

    @Test func aRenamesHalvesAreJoinedAndALoneHalfWaits() {
        var pairing = RenamePairing()
        let joined = pairing.changes([
            (.movedFrom(cookie: 7), "local", "docs/a"), (.created, "local", "docs/n"),
            (.movedTo(cookie: 7), "local", "docs/b"),
        ])
        #expect(joined.map(\.1) == [.appeared("docs/n"), .moved(from: "docs/a", to: "docs/b")])
        #expect(pairing.changes([(.movedTo(cookie: 9), "local", "docs/c")]).map(\.1) == [.appeared("docs/c")])
        #expect(pairing.changes([(.movedFrom(cookie: 0), "local", "docs/d")]).isEmpty)
        #expect(pairing.isWaiting)
        #expect(pairing.expired().isEmpty)  // not yet: its "to" may be in the next read
        // The next read has it (fanotify: no cookie, the order joins them).
        #expect(
            pairing.changes([(.movedTo(cookie: 0), "local", "docs/e")]).map(\.1) == [
                .moved(from: "docs/d", to: "docs/e")
            ])
        _ = pairing.changes([(.movedFrom(cookie: 0), "local", "docs/f")])
        var slept = timespec(tv_sec: 0, tv_nsec: 80_000_000)
        nanosleep(&slept, nil)
        #expect(pairing.expired().map(\.1) == [.deleted("docs/f")])
        #expect(!pairing.isWaiting)
    }

    @Test func anEchoIsDroppedOnceAndAFailedChangeExpectsNone() {
        let board = NoticeBoard()
        let notices = SubitemNotices(board: board)
        notices.expectsEchoes.store(true, ordering: .relaxed)
        let policy = snapshot([grant(1, alpha, "docs")])
        let start = board.notices(for: alpha, after: nil, wait: 0).cursor
        // The mount's own change comes back from inotify: dropped, once.
        notices.willChange(provider: "local", .appeared("docs/a.txt"))
        notices.hostChanged(provider: "local", .appeared("docs/a.txt"), in: policy)
        #expect(board.notices(for: alpha, after: start, wait: 0).notices.isEmpty)
        notices.hostChanged(provider: "local", .appeared("docs/a.txt"), in: policy)
        // A change that failed plants nothing that would hide the host's.
        notices.willChange(provider: "local", .moved(from: "docs/a.txt", to: "docs/b.txt"))
        notices.didNotChange(provider: "local", .moved(from: "docs/a.txt", to: "docs/b.txt"))
        notices.hostChanged(provider: "local", .moved(from: "docs/a.txt", to: "docs/b.txt"), in: policy)
        #expect(board.notices(for: alpha, after: start, wait: 0).notices.map(\.kind) == [.appeared, .moved])
    }

    @Test func expectationsExpireAndAreBounded() {
        var expected = EchoExpectations(lifetime: 2, capacity: 3)
        let a = EchoExpectations.Echo(provider: "local", path: "docs/a", came: true)
        let b = EchoExpectations.Echo(provider: "local", path: "docs/b", came: false)
        var used: [Bool] = []
        expected.expect(a, now: 0)
        expected.expect(a, now: 1)
        used.append(expected.useUp([a], now: 1.5))  // the older one
        used.append(expected.useUp([a], now: 2.5))  // the younger lives until 3
        used.append(expected.useUp([a], now: 2.5))  // none left
        expected.expect(b, now: 10)
        used.append(expected.useUp([b], now: 12.5))  // expired
        #expect(used == [true, true, false, false])
        for time in [20.0, 20.1, 20.2, 20.3] { expected.expect(a, now: time) }
        #expect(expected.count == 3)  // the oldest went first
        let allOrNothing = expected.useUp([a, b], now: 20.4)
        let one = expected.useUp([a], now: 20.4)
        #expect(!allOrNothing && one)
    }

    @Test func oneAppsFloodKeepsAnotherAppsNotices() {
        let board = NoticeBoard()
        let start = board.notices(for: beta, after: nil, wait: 0).cursor
        board.post(PresenterNotice(kind: .arrived, app: beta, grant: 2, provider: "local", path: "Providers/local/b"))
        board.post(
            (0..<(NoticeBoard.window + 10)).map {
                PresenterNotice(
                    kind: .appeared, app: alpha, grant: 1, provider: "local", path: "Providers/local/docs/\($0)")
            })
        #expect(board.notices(for: beta, after: start, wait: 0).notices.map(\.kind) == [.arrived])
        #expect(board.notices(for: alpha, after: start, wait: 0).notices.count == NoticeBoard.window)
    }
}
