import Policy
import Testing

/// Issue 28, finding 2 (SPEC S2, S33): a grant's path stands for the item
/// it was made for. The snapshot says where a grant is made (so the daemon
/// compares that one node with the item's file), which file the item is
/// while it is found, and what covers an item that is not the grant's own.
@Suite struct GrantRootTests {
    let app = "com.example.editor"

    func grant(_ id: GrantID, _ path: String) -> Grant {
        Grant(
            id: id, app: app, provider: "local", item: "item-\(id)", relativePath: path, isDirectory: true,
            access: .read, state: .active, grantedAt: 0)
    }

    func snapshot(_ grants: [Grant], missing: Set<GrantID> = []) -> PolicySnapshot {
        let items = Dictionary(
            uniqueKeysWithValues: grants.map { grant in
                (
                    grant.item,
                    ItemLocation(
                        provider: "local", path: grant.relativePath, isDirectory: true,
                        exists: !missing.contains(grant.id), file: ItemFile(device: 1, inode: UInt64(100 + grant.id)))
                )
            })
        return PolicySnapshot(
            generation: 1, apps: [App(id: app, name: "Editor")],
            providers: [Provider(id: "local", name: "Local", directory: "/p")], grants: grants, items: items)
    }

    @Test("A position says whether its grant is made at the item itself, walked or stepped")
    func grantIsHere() {
        let policy = snapshot([grant(1, "shared"), grant(2, "shared/inner")])
        #expect(policy.position(app: app, provider: "local", path: "shared").grantIsHere)
        #expect(!policy.position(app: app, provider: "local", path: "shared/file").grantIsHere)
        #expect(!policy.position(app: app, provider: "local", path: "").grantIsHere)
        let shared = policy.position(app: app, provider: "local", path: "shared")
        #expect(policy.position(app: app, provider: "local", child: "inner", of: shared).grantIsHere)
        #expect(!policy.position(app: app, provider: "local", child: "other", of: shared).grantIsHere)
    }

    @Test("The item's file is known while it is found; a missing item's path decides alone")
    func itemFile() {
        let policy = snapshot([grant(1, "shared"), grant(2, "gone")], missing: [2])
        #expect(policy.itemFile(of: grant(1, "shared")) == ItemFile(device: 1, inode: 101))
        #expect(policy.itemFile(of: grant(2, "gone")) == nil)
    }

    @Test("Not the grant's item: covered by the grant above, or hidden with everything below")
    func notGrantRoot() {
        let policy = snapshot([grant(1, "docs"), grant(2, "docs/shared"), grant(3, "shared")])
        let nested = policy.position(app: app, provider: "local", path: "docs/shared")
        let enclosed = nested.notGrantRoot(coveredBy: grant(1, "docs"))
        #expect(enclosed.coverage == .granted(grant(1, "docs")) && !enclosed.grantIsHere)
        // Below it, the enclosing grant covers what no deeper grant does.
        let child = policy.position(app: app, provider: "local", child: "f.txt", of: enclosed)
        #expect(child.coverage == .granted(grant(1, "docs")))
        let alone = policy.position(app: app, provider: "local", path: "shared").notGrantRoot(coveredBy: nil)
        #expect(alone.coverage == .hidden && alone.everyChild != nil)
        #expect(policy.position(app: app, provider: "local", child: "f.txt", of: alone).coverage == .hidden)
    }
}
