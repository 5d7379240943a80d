import CommandErrors
import Foundation
import Policy
import PolicyStore
import Testing

/// One body of tests for the isolation layer, run against the SQLite store
/// and the fleet's PostgreSQL store alike (issue 34, decision 59): the
/// daemon and the commands may use either without a difference they could see.
@Suite struct IsolationStoreContractTests {
    /// The exit code the call failed with (nil: it did not fail; -1: not a CommandError).
    func exitCode(_ body: () throws -> Void) -> Int32? {
        do {
            try body()
            return nil
        } catch {
            return (error as? CommandError)?.exitCode ?? -1
        }
    }

    @Test("SPEC S16/S14/S15: grant, revoke, restore change the snapshot", arguments: StoreKind.allCases)
    func grantRevokeRestore(_ kind: StoreKind) throws {
        let fixture = try StoreUnderTest(kind)
        defer { fixture.close() }
        let (store, app) = (fixture.store, fixture.app)
        let grant = try store.grant(app: app, provider: "local", path: "docs", access: .readWrite)
        #expect(
            try store.snapshot(generation: 2).coverage(app: app, provider: "local", path: "docs/a.txt")
                == .granted(grant))
        #expect(try store.setState(.revoked, app: app, grant: grant.id).map(\.id) == [grant.id])
        #expect(try store.snapshot(generation: 3).grantsByID[grant.id]?.state == .revoked)
        #expect(try store.setState(.revoked, app: app, grant: grant.id).isEmpty, "revoked twice: no change")
        try store.setState(.active, app: app, grant: nil)
        #expect(try store.snapshot(generation: 4).grantsByID[grant.id]?.state == .active)
    }

    @Test(
        "SPEC S34: unknown apps, missing paths and escapes are clear errors with their exit codes",
        arguments: StoreKind.allCases)
    func badInput(_ kind: StoreKind) throws {
        let fixture = try StoreUnderTest(kind)
        defer { fixture.close() }
        let (store, app) = (fixture.store, fixture.app)
        #expect(exitCode { _ = try store.grant(app: "nope", provider: "local", path: "docs", access: .read) } == 67)
        #expect(exitCode { _ = try store.grant(app: app, provider: "local", path: "../x", access: .read) } == 65)
        #expect(exitCode { _ = try store.grant(app: app, provider: "local", path: "missing", access: .read) } == 66)
        #expect(exitCode { _ = try store.grant(app: app, provider: "nope", path: "docs", access: .read) } == 67)
        #expect(exitCode { _ = try store.setState(.revoked, app: "nope", grant: nil) } == 67)
        #expect(exitCode { _ = try store.setState(.revoked, app: app, grant: 999) } == 67)
        #expect(exitCode { _ = try store.grants(app: "nope") } == 67)
        #expect(exitCode { _ = try store.addApp(id: "bad/id", name: nil) } == 65)
        #expect(exitCode { _ = try store.addProvider(id: "p", directory: fixture.root + "/none", name: nil) } == 66)
        #expect(try store.grants(app: nil).isEmpty, "a refused request leaves nothing behind")
    }

    @Test(
        "Apps and providers: added once, listed in order, removed with their grants",
        arguments: StoreKind.allCases)
    func appsAndProviders(_ kind: StoreKind) throws {
        let fixture = try StoreUnderTest(kind)
        defer { fixture.close() }
        let store = fixture.store
        let alreadyExists = CommandError.Kind.alreadyExists.rawValue
        #expect(exitCode { _ = try store.addApp(id: fixture.app, name: nil) } == alreadyExists)
        #expect(
            exitCode { _ = try store.addProvider(id: "local", directory: fixture.providerDirectory, name: nil) }
                == alreadyExists)
        #expect(try store.addApp(id: "a.first", name: "First").name == "First")
        #expect(try store.apps().map(\.id) == ["a.first", fixture.app])
        let other = try store.addProvider(id: "other", directory: fixture.providerDirectory + "/docs/..", name: nil)
        #expect(other.directory == fixture.providerDirectory, "stored absolute, resolved")
        #expect(try store.providers().map(\.id) == ["local", "other"])

        try store.setDownloads(.never, of: fixture.app)
        #expect(try store.apps().first { $0.id == fixture.app }?.downloads == .never)
        #expect(try store.snapshot(generation: 2).apps[fixture.app]?.downloads == .never)
        try store.setDownloads(.onDemand, of: fixture.app)
        #expect(try store.apps().first { $0.id == fixture.app }?.downloads == nil)
        #expect(exitCode { try store.setDownloads(.never, of: "nope") } == 67)

        _ = try store.grant(app: fixture.app, provider: "other", path: "docs", access: .read)
        try store.removeProvider(id: "other")
        #expect(try store.grants(app: nil).isEmpty, "a provider's grants go with it")
        _ = try store.grant(app: fixture.app, provider: "local", path: "docs", access: .read)
        try store.removeApp(id: fixture.app)
        #expect(try store.grants(app: nil).isEmpty, "an app's grants go with it")
        #expect(exitCode { try store.removeApp(id: fixture.app) } == 67)
        #expect(exitCode { try store.removeProvider(id: "other") } == 67)
    }

    @Test(
        "Issue 16: granting an item again reuses its grant; the picker only widens, `grant` replaces",
        arguments: StoreKind.allCases)
    func reuse(_ kind: StoreKind) throws {
        let fixture = try StoreUnderTest(kind)
        defer { fixture.close() }
        let (store, app) = (fixture.store, fixture.app)
        let first = try store.grant(
            app: app, provider: "local", path: "docs/a.txt", access: .read, update: .widen, wholeProvider: false)
        #expect(first.previous == nil)
        let again = try store.grant(
            app: app, provider: "local", path: "docs/a.txt", access: .readWrite, update: .widen, wholeProvider: false)
        #expect(again.grant.id == first.grant.id)
        #expect(again.changes == ["access read-only -> read-write"])
        let narrowed = try store.grant(
            app: app, provider: "local", path: "docs/a.txt", access: .read, update: .widen, wholeProvider: false)
        #expect(narrowed.grant.access == .readWrite && narrowed.changes.isEmpty)
        let replaced = try store.grant(
            app: app, provider: "local", path: "docs/a.txt", access: .read, session: true, wholeProvider: false)
        #expect(replaced.changes == ["access read-write -> read-only", "lifetime persistent -> session"])
        #expect(try store.grants(app: app).count == 1)
        #expect(try store.grants(app: app).first?.isSession == true)
    }

    /// The error the call failed with (nil: it did not fail with a CommandError).
    func refusal(_ body: () throws -> Void) -> CommandError? {
        do {
            try body()
            return nil
        } catch {
            return error as? CommandError
        }
    }

    @Test(
        "Issue 34, SPEC S34: a bulk grant is one transaction: every item, or none with the bad one named",
        arguments: StoreKind.allCases)
    func grantAll(_ kind: StoreKind) throws {
        let fixture = try StoreUnderTest(kind)
        defer { fixture.close() }
        let (store, app) = (fixture.store, fixture.app)
        for index in 0..<40 {
            _ = FileManager.default.createFile(
                atPath: fixture.providerDirectory + "/docs/f\(index).txt", contents: Data("\(index)".utf8))
        }
        let earlier = try store.grant(app: app, provider: "local", path: "docs/a.txt", access: .read)
        let items =
            (0..<40).map { GrantItem(provider: "local", path: "docs/f\($0).txt", origin: "list line \($0 + 1)") }
            + [
                GrantItem(provider: "local", path: "docs/./a.txt", origin: "list line 41"),
                GrantItem(provider: "local", path: "docs/f0.txt", origin: "list line 42"),
            ]
        let before = try store.policyVersion()
        let changes = try store.grantAll(app: app, items: items, access: .readWrite, wholeProvider: false)
        #expect(changes.count == 41, "an item named twice is granted once")
        #expect(changes.map(\.grant.relativePath).last == "docs/a.txt")
        #expect(changes.last?.grant.id == earlier.id && changes.last?.previous?.access == .read)
        #expect(changes.dropLast().allSatisfy { $0.previous == nil && $0.grant.access == .readWrite })
        #expect(try store.policyVersion() > before)
        let stored = Dictionary(try store.grants(app: app).map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        #expect(stored.count == 41)
        for change in changes {
            #expect(stored[change.grant.id] == change.grant, "what it returns is what it stored")
        }
        let snapshot = try store.snapshot(generation: 2)
        #expect(
            snapshot.coverage(app: app, provider: "local", path: "docs/f7.txt")
                == .granted(stored[changes[7].grant.id]!))

        // A bad item anywhere: nothing of the list is granted, and the error names it.
        for index in 0..<3 {
            _ = FileManager.default.createFile(atPath: fixture.providerDirectory + "/docs/g\(index).txt", contents: nil)
        }
        let good = (0..<3).map { GrantItem(provider: "local", path: "docs/g\($0).txt", origin: "list line \($0 + 1)") }
        let bad: [(item: GrantItem, code: Int32, wholeProvider: Bool)] = [
            (GrantItem(provider: "local", path: "docs/missing.txt", origin: "list line 2"), 66, false),
            (GrantItem(provider: "local", path: "../x", origin: "list line 2"), 65, false),
            (GrantItem(provider: "nope", path: "docs", origin: "list line 2"), 67, false),
            (GrantItem(provider: "local", path: ".", origin: "list line 2"), 64, false),
        ]
        let version = try store.policyVersion()
        for (item, code, wholeProvider) in bad {
            let list = [good[0], item, good[1], good[2]]
            let error = refusal {
                _ = try store.grantAll(app: app, items: list, access: .read, wholeProvider: wholeProvider)
            }
            #expect(error?.exitCode == code, "\(item.path)")
            #expect(error?.message.hasPrefix("list line 2: ") == true, "\(error?.message ?? "")")
            #expect(error?.message.hasSuffix("nothing was granted") == true, "\(error?.message ?? "")")
        }
        #expect(
            exitCode { _ = try store.grantAll(app: "nope", items: good, access: .read, wholeProvider: false) } == 67)
        #expect(try store.grants(app: app).count == 41, "nothing of a refused list was granted")
        #expect(try store.policyVersion() == version, "and nothing changed")
        #expect(
            try store.grantAll(
                app: app, items: [GrantItem(provider: "local", path: ".", origin: "root")], access: .read,
                wholeProvider: true
            ).first?.grant.relativePath == "")

        // A new file at a granted path is a new item, as for one grant.
        let file = fixture.providerDirectory + "/docs/f3.txt"
        try FileManager.default.removeItem(atPath: file)
        _ = FileManager.default.createFile(atPath: file, contents: Data("new".utf8))
        let again = try store.grantAll(app: app, items: [items[3]], access: .read, wholeProvider: false)
        #expect(again.first?.grant.item != changes[3].grant.item && again.first?.previous == nil)
    }

    /// Whether two snapshots hold the same grants and items.
    func same(_ a: PolicySnapshot, _ b: PolicySnapshot) -> Bool {
        Set(a.grantsByID.keys) == Set(b.grantsByID.keys)
            && a.grantsByID.keys.allSatisfy { a.grantsByID[$0] == b.grantsByID[$0] }
            && a.items == b.items
    }

    @Test(
        "Issue 34: what changed since a version, applied to its snapshot, gives the snapshot of the store's version",
        arguments: StoreKind.allCases)
    func changesSince(_ kind: StoreKind) throws {
        let fixture = try StoreUnderTest(kind)
        defer { fixture.close() }
        let (store, app) = (fixture.store, fixture.app)
        let folder = try store.grant(app: app, provider: "local", path: "docs", access: .read)
        let (start, first) = try store.versionedSnapshot(generation: 1)
        #expect(try store.changes(since: first) == PolicyChanges(version: first), "nothing changed")

        try store.setState(.revoked, app: app, grant: folder.id)
        let file = try store.grant(app: app, provider: "local", path: "docs/a.txt", access: .readWrite)
        let changes = try #require(try store.changes(since: first))
        let (whole, second) = try store.versionedSnapshot(generation: 2)
        #expect(changes.version == second)
        #expect(Set(changes.grants.map(\.id)) == [folder.id, file.id] && changes.removedGrants.isEmpty)
        var served = start.applying(changes, generation: 2)
        #expect(same(served, whole))

        // A forget, and a new file where the granted one was: its old item
        // moves aside, and its grant is read again with the item's new path.
        try store.forget(app: app, grant: folder.id)
        let path = fixture.providerDirectory + "/docs/a.txt"
        try FileManager.default.removeItem(atPath: path)
        _ = FileManager.default.createFile(atPath: path, contents: Data("new".utf8))
        _ = try store.itemIdentifier(provider: "local", path: "docs/a.txt")
        let more = try #require(try store.changes(since: second))
        let (after, third) = try store.versionedSnapshot(generation: 3)
        #expect(more.version == third && more.removedGrants == [folder.id])
        #expect(more.grants.map(\.id) == [file.id] && more.grants.first?.relativePath != "docs/a.txt")
        served = served.applying(more, generation: 3)
        #expect(same(served, after))

        // Apps and providers reshape every view: read everything.
        _ = try store.addApp(id: "com.example.other", name: nil)
        #expect(try store.changes(since: third) == nil)
        #expect(try store.changes(since: try store.policyVersion() + 1) == nil, "a version the store never gave")
    }

    @Test("A provider's root needs wholeProvider (exit 64)", arguments: StoreKind.allCases)
    func wholeProvider(_ kind: StoreKind) throws {
        let fixture = try StoreUnderTest(kind)
        defer { fixture.close() }
        let (store, app) = (fixture.store, fixture.app)
        for path in [".", "", "./", "./."] {
            #expect(
                exitCode {
                    _ = try store.grant(app: app, provider: "local", path: path, access: .read, wholeProvider: false)
                } == 64, "\(path)")
        }
        #expect(
            try store.grant(app: app, provider: "local", path: ".", access: .read, wholeProvider: true).grant
                .relativePath == "")
    }

    @Test("Forget removes grants for good; session-only forgets only session grants", arguments: StoreKind.allCases)
    func forget(_ kind: StoreKind) throws {
        let fixture = try StoreUnderTest(kind)
        defer { fixture.close() }
        let (store, app) = (fixture.store, fixture.app)
        let kept = try store.grant(app: app, provider: "local", path: "docs", access: .read, wholeProvider: false).grant
        let session = try store.grant(
            app: app, provider: "local", path: "docs/a.txt", access: .read, session: true, wholeProvider: false
        ).grant
        #expect(try store.forget(app: app, grant: nil, sessionOnly: true).map(\.id) == [session.id])
        #expect(try store.grants(app: app).map(\.id) == [kept.id])
        #expect(try store.forget(app: app, grant: nil, sessionOnly: true).isEmpty)
        #expect(exitCode { try store.forget(app: app, grant: 999) } == 67)
        #expect(try store.forget(app: app, grant: kept.id).map(\.id) == [kept.id])
        #expect(try store.snapshot(generation: 9).grantsByID.isEmpty)
    }

    @Test(
        "SPEC S13/S44: the policy version moves with each change and with nothing else",
        arguments: StoreKind.allCases)
    func policyVersion(_ kind: StoreKind) throws {
        let fixture = try StoreUnderTest(kind)
        defer { fixture.close() }
        let (store, app) = (fixture.store, fixture.app)
        let start = try store.policyVersion()
        _ = try store.grants(app: nil)
        _ = try store.snapshot(generation: 2)
        #expect(try store.policyVersion() == start, "reads move nothing")
        let grant = try store.grant(app: app, provider: "local", path: "docs", access: .read)
        let granted = try store.policyVersion()
        #expect(granted > start)
        try store.setState(.revoked, app: app, grant: grant.id)
        let (snapshot, version) = try store.versionedSnapshot(generation: 3)
        #expect(version > granted)
        #expect(try store.policyVersion() == version)
        #expect(snapshot.grantsByID[grant.id]?.state == .revoked, "the snapshot is of the version it names")
    }

    @Test(
        "An item keeps its identifier while its file stays; a new file at the path is a new item",
        arguments: StoreKind.allCases)
    func itemIdentity(_ kind: StoreKind) throws {
        let fixture = try StoreUnderTest(kind)
        defer { fixture.close() }
        let store = fixture.store
        let first = try store.itemIdentifier(provider: "local", path: "docs/a.txt")
        #expect(try store.itemIdentifier(provider: "local", path: "docs/a.txt") == first)
        let grant = try store.grant(app: fixture.app, provider: "local", path: "docs/a.txt", access: .read)
        #expect(grant.item == first)
        let file = fixture.providerDirectory + "/docs/a.txt"
        try FileManager.default.removeItem(atPath: file)
        _ = FileManager.default.createFile(atPath: file, contents: Data("new".utf8))
        let second = try store.itemIdentifier(provider: "local", path: "docs/a.txt")
        #expect(second != first)
        let location = try store.snapshot(generation: 2).items[first]
        #expect(location?.path != "docs/a.txt", "the old item no longer lives at the path")
        #expect(exitCode { _ = try store.itemIdentifier(provider: "nope", path: "docs") } == 67)
    }

    @Test("One item's location is read by its identifier, as the snapshot has it", arguments: StoreKind.allCases)
    func itemLocation(_ kind: StoreKind) throws {
        let fixture = try StoreUnderTest(kind)
        defer { fixture.close() }
        let store = fixture.store
        let item = try store.itemIdentifier(provider: "local", path: "docs/a.txt")
        let location = try store.itemLocation(item)
        #expect(location?.provider == "local" && location?.path == "docs/a.txt" && location?.exists == true)
        #expect(location == (try store.snapshot(generation: 1).items[item]))
        #expect(try store.itemLocation("no-such-item") == nil)
    }
}
