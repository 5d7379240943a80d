import Policy
import Testing

/// Issue 34, SPEC S36: the daemon applies what changed to the snapshot it
/// serves (`PolicySnapshot.applying`) instead of building one from the
/// whole policy. Whatever the change, the result must answer every
/// question as the snapshot built from the whole policy does.
@Suite struct SnapshotChangesTests {

    /// The whole policy, as a store holds it.
    struct Store {
        var apps = ["a.one", "a.two", "a.three"].map { App(id: $0, name: $0) }
        var providers = ["local", "drive"].map { Provider(id: $0, name: $0, directory: "/\($0)") }
        var grants: [GrantID: Grant] = [:]
        var items: [ItemIdentifier: ItemLocation] = [:]
        var nextGrant: GrantID = 1

        func snapshot(_ generation: UInt64) -> PolicySnapshot {
            PolicySnapshot(
                generation: generation, apps: apps, providers: providers,
                grants: grants.values.sorted { $0.id < $1.id }, items: items)
        }
    }

    static let paths = [
        "", "Reports", "Reports/2026", "Reports/2026/q1.txt", "Reports/2026/q2.txt", "Reports/old.txt",
        "Photos", "Photos/a.jpg", "Photos/b.jpg", "notes.txt",
    ]

    /// One random change to `policy`; returns what a store's log would say.
    func change(_ policy: inout Store, _ steps: inout SeededGenerator) -> PolicyChanges {
        var changes = PolicyChanges(version: 0)
        let existing = policy.grants.values.sorted { $0.id < $1.id }
        switch Int.random(in: 0..<7, using: &steps) {
        case 0, 1:  // a new grant, on an item already known or a new one
            let app = policy.apps.randomElement(using: &steps)!.id
            let provider = policy.providers.randomElement(using: &steps)!.id
            let path = Self.paths.randomElement(using: &steps)!
            let item =
                policy.items.first { $0.value.provider == provider && $0.value.path == path }?.key
                ?? "item-\(provider)-\(path)-\(policy.nextGrant)"
            guard !policy.grants.values.contains(where: { $0.app == app && $0.item == item }) else { return changes }
            if policy.items[item] == nil {
                let location = ItemLocation(
                    provider: provider, path: path, isDirectory: !path.contains("."), exists: true)
                policy.items[item] = location
                changes.items[item] = location
            }
            let grant = Grant(
                id: policy.nextGrant, app: app, provider: provider, item: item, relativePath: path,
                isDirectory: !path.contains("."), access: .readWrite, state: .active, grantedAt: 1)
            policy.nextGrant += 1
            policy.grants[grant.id] = grant
            changes.grants.append(grant)
        case 2, 3:  // a revoke or a restore
            guard let grant = existing.randomElement(using: &steps) else { return changes }
            let changed = grant.with(state: grant.state == .active ? .revoked : .active)
            policy.grants[grant.id] = changed
            changes.grants.append(changed)
        case 4:  // a forget
            guard let grant = existing.randomElement(using: &steps) else { return changes }
            policy.grants[grant.id] = nil
            changes.removedGrants.insert(grant.id)
        case 5:  // an item moved: its grants are read again with its new path
            guard let (id, location) = policy.items.randomElement(using: &steps) else { return changes }
            let taken = Set(policy.items.values.filter { $0.provider == location.provider }.map(\.path))
            guard
                let path = Self.paths.map({ $0 + "-moved" }).filter({ !taken.contains($0) }).randomElement(
                    using: &steps)
            else { return changes }
            var moved = location
            moved.path = path
            policy.items[id] = moved
            changes.items[id] = moved
            for grant in existing where grant.item == id {
                let again = Grant(
                    id: grant.id, app: grant.app, provider: grant.provider, item: id, relativePath: moved.path,
                    isDirectory: grant.isDirectory, access: grant.access, state: grant.state,
                    grantedAt: grant.grantedAt)
                policy.grants[grant.id] = again
                changes.grants.append(again)
            }
        default:  // an item found missing, or one without grants removed
            guard let (id, location) = policy.items.randomElement(using: &steps) else { return changes }
            if existing.contains(where: { $0.item == id }) {
                var missing = location
                missing.exists = false
                policy.items[id] = missing
                changes.items[id] = missing
                // A store reads the grants of a changed item again.
                changes.grants += existing.filter { $0.item == id }
            } else {
                policy.items[id] = nil
                changes.removedItems.insert(id)
            }
        }
        return changes
    }

    /// Every question the daemon asks a snapshot, asked of both.
    func expectSameAnswers(_ applied: PolicySnapshot, _ whole: PolicySnapshot, step: Int) {
        #expect(Set(applied.grantsByID.keys) == Set(whole.grantsByID.keys), "step \(step)")
        #expect(applied.grantsByID.count == whole.grantsByID.count, "step \(step)")
        for id in whole.grantsByID.keys { #expect(applied.grantsByID[id] == whole.grantsByID[id], "step \(step)") }
        #expect(applied.items == whole.items, "step \(step)")
        #expect(applied.hasSameLayout(as: whole) && whole.hasSameLayout(as: applied), "step \(step)")
        for app in whole.apps.keys {
            #expect(applied.grants(of: app) == whole.grants(of: app), "step \(step)")
            #expect(applied.visibleProviders(of: app) == whole.visibleProviders(of: app), "step \(step)")
            for provider in whole.providers.keys {
                #expect(applied.apps(withGrantsIn: provider) == whole.apps(withGrantsIn: provider), "step \(step)")
                for path in Self.paths + Self.paths.map({ $0 + "-moved" }) + ["Reports/2026/q1.txt/deeper"] {
                    #expect(
                        applied.coverage(app: app, provider: provider, path: path)
                            == whole.coverage(app: app, provider: provider, path: path), "step \(step) \(path)")
                    #expect(
                        applied.childrenLeadingToGrants(app: app, provider: provider, path: path)
                            == whole.childrenLeadingToGrants(app: app, provider: provider, path: path),
                        "step \(step) \(path)")
                }
                for item in whole.items.keys {
                    #expect(
                        applied.referencedLocation(app: app, provider: provider, item: item)
                            == whole.referencedLocation(app: app, provider: provider, item: item), "step \(step)")
                }
            }
        }
        for id in whole.grantsByID.keys {
            #expect(applied.enclosingGrants(of: id) == whole.enclosingGrants(of: id), "step \(step)")
            // What a descriptor opened through the grant may still do (S47).
            guard let grant = whole.grantsByID[id] else { continue }
            let holder = Caller.anyProcess(of: grant.app)
            for access in [DescriptorAccess.read, .write, [.read, .write]] {
                #expect(
                    applied.permitDescriptor(
                        access,
                        coverage: applied.coverage(app: grant.app, provider: grant.provider, path: grant.relativePath),
                        openedThrough: id, caller: holder)
                        == whole.permitDescriptor(
                            access,
                            coverage: whole.coverage(
                                app: grant.app, provider: grant.provider, path: grant.relativePath),
                            openedThrough: id, caller: holder), "step \(step)")
            }
        }
    }

    @Test("Issue 34: a snapshot with changes applied answers as the one built from the whole policy")
    func applyingMatchesTheWholePolicy() {
        var steps = SeededGenerator(seed: 34)
        var policy = Store()
        var served = policy.snapshot(1)
        for step in 2..<400 {
            let before = policy
            let changes = change(&policy, &steps)
            let applied = served.applying(changes, generation: UInt64(step))
            expectSameAnswers(applied, policy.snapshot(UInt64(step)), step: step)
            // Who compares grant by grant sees every grant that changed.
            let changed = Set(applied.grantIDsChanged(since: served))
            for id in Set(before.grants.keys).union(policy.grants.keys) {
                let (was, now) = (before.grants[id], policy.grants[id])
                guard was != now || was.map({ before.items[$0.item] != policy.items[$0.item] }) == true else {
                    continue
                }
                #expect(changed.contains(id), "step \(step): grant \(id) changed unseen")
            }
            served = applied
        }
        #expect(served.grantsByID.count > 10, "the steps made a policy worth comparing")
    }

    @Test("A snapshot not made from the previous one names every grant of both as changed")
    func grantIDsChangedWithoutDerivation() {
        let grant = Grant(
            id: 7, app: "a", provider: "p", item: "i", relativePath: "x", isDirectory: false, access: .read,
            state: .active, grantedAt: 0)
        let first = PolicySnapshot(generation: 1, apps: [], providers: [], grants: [grant])
        let second = PolicySnapshot(generation: 2, apps: [], providers: [], grants: [grant.with(state: .revoked)])
        #expect(second.grantIDsChanged(since: first) == [7])
        let third = second.applying(PolicyChanges(version: 3, removedGrants: [7]), generation: 3)
        #expect(third.grantIDsChanged(since: second) == [7] && third.grantsByID.isEmpty)
        #expect(third.grantIDsChanged(since: first) == [7], "not made from `first`: compared whole")
    }

    @Test("The grant table counts, finds and lists grants across its shards")
    func grantTable() {
        func grant(_ id: GrantID) -> Grant {
            Grant(
                id: id, app: "a", provider: "p", item: "i\(id)", relativePath: "x", isDirectory: false,
                access: .read, state: .active, grantedAt: 0)
        }
        var table = GrantTable([0, 1024, 2048, 5, -3].map(grant))
        #expect(table.count == 5 && Set(table.keys) == [0, 1024, 2048, 5, -3])
        let copy = table
        table[1024] = nil
        table[9] = grant(9)
        table[5] = grant(5).with(state: .revoked)
        #expect(table.count == 5 && table[1024] == nil && table[0] != nil && table[5]?.state == .revoked)
        #expect(copy.count == 5 && copy[1024] != nil && copy[5]?.state == .active, "a copy keeps its grants")
        #expect(Set(table.values.map(\.id)) == [0, 2048, 5, -3, 9])
        #expect(GrantTable().isEmpty)
    }
}
