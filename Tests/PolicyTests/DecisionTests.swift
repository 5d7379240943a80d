import HostText
import Policy
import Testing

/// The decision rules of SPEC S2–S4, S9 and S14, on an in-memory snapshot.
@Suite struct DecisionTests {
    let app = "com.example.editor"
    let process = Caller.app("com.example.editor", ProcessKey(pid: 10, startTime: 1))

    func grant(_ id: GrantID, _ path: String, access: Access = .readWrite, state: GrantState = .active) -> Grant {
        Grant(
            id: id, app: app, provider: "local", item: "item-\(id)", relativePath: path, isDirectory: true,
            access: access, state: state, grantedAt: 0)
    }

    func snapshot(_ grants: [Grant]) -> PolicySnapshot {
        PolicySnapshot(
            generation: 1, apps: [App(id: app, name: "Editor")],
            providers: [Provider(id: "local", name: "Local", directory: "/p")], grants: grants)
    }

    @Test("SPEC S2: a folder grant covers the folder and everything below it")
    func folderCoverage() {
        let policy = snapshot([grant(1, "Projects/Novel")])
        #expect(
            policy.coverage(app: app, provider: "local", path: "Projects/Novel/ch1.txt")
                == .granted(grant(1, "Projects/Novel")))
        #expect(policy.coverage(app: app, provider: "local", path: "Projects/Novel/new/deep.txt") != .hidden)
        #expect(policy.coverage(app: app, provider: "local", path: "Projects") == .ancestor)
        #expect(policy.coverage(app: app, provider: "local", path: "") == .ancestor)
        #expect(policy.coverage(app: app, provider: "local", path: "Projects/Other") == .hidden)
        #expect(policy.coverage(app: app, provider: "local", path: "Projects/Novel2") == .hidden)
        #expect(policy.childrenLeadingToGrants(app: app, provider: "local", path: "Projects") == [HostNameKey("Novel")])
    }

    @Test("SPEC S2/S3: nothing of another app, nothing of an ungranted provider")
    func otherAppsSeeNothing() {
        let policy = snapshot([grant(1, "Projects")])
        #expect(policy.coverage(app: "com.example.other", provider: "local", path: "Projects") == .hidden)
        #expect(policy.visibleProviders(of: "com.example.other").isEmpty)
        #expect(
            Decision.mayEnter(app: app, caller: .app("com.example.other", ProcessKey(pid: 2, startTime: 2))) == false)
        #expect(Decision.mayEnter(app: app, caller: .stranger) == false)
        #expect(Decision.mayEnter(app: app, caller: .owner))
    }

    @Test("SPEC S2/S14: a revoke or a second grant keeps the app's layout; losing a provider's last grant changes it")
    func layout() {
        let one = snapshot([grant(1, "A")])
        #expect(one.hasSameLayout(as: snapshot([grant(1, "A", state: .revoked)])))
        #expect(one.hasSameLayout(as: snapshot([grant(1, "A"), grant(2, "B")])))
        #expect(!one.hasSameLayout(as: snapshot([])))
        #expect(snapshot([]).showsProvider("local", to: app) == false)
        #expect(one.showsProvider("local", to: app))
    }

    @Test("SPEC S9: the nearest covering grant decides")
    func nearestGrant() {
        let policy = snapshot([grant(1, "A", access: .read), grant(2, "A/B")])
        #expect(policy.coverage(app: app, provider: "local", path: "A/B/c") == .granted(grant(2, "A/B")))
        #expect(policy.coverage(app: app, provider: "local", path: "A/c") == .granted(grant(1, "A", access: .read)))
    }

    @Test("SPEC S2/S9/S36: a child's coverage stepped from its parent's equals the one found from its path")
    func steppedCoverage() {
        let policy = snapshot([grant(1, "A", access: .read), grant(2, "A/B/C"), grant(3, "D/E")])
        let paths = [
            "", "A", "A/x", "A/B", "A/B/x", "A/B/C", "A/B/C/x/y", "D", "D/E", "D/E/f", "D/F", "D/F/g", "Z", "Z/y", "AB",
        ]
        for path in paths {
            var position = policy.position(app: app, provider: "local", path: "")
            for name in path.split(separator: "/") {
                position = policy.position(app: app, provider: "local", child: String(name), of: position)
            }
            #expect(position.coverage == policy.coverage(app: app, provider: "local", path: path), "\(path)")
            // Where the parent's position says every child shares it, the walk agrees.
            if let child = position.everyChild {
                let walked = policy.coverage(app: app, provider: "local", path: RelativePath.join(path, "n"))
                #expect(child.coverage == walked, "\(path)/n")
            }
        }
        #expect(policy.position(app: app, provider: "local", path: "A/B").everyChild == nil)
        #expect(policy.position(app: app, provider: "local", path: "D").everyChild == nil)
        #expect(policy.position(app: app, provider: "local", path: "A/x").everyChild != nil)
        #expect(policy.position(app: app, provider: "local", path: "Z").everyChild != nil)
        #expect(policy.coverage(app: app, provider: "local", path: "A/B") == .granted(grant(1, "A", access: .read)))
        #expect(policy.coverage(app: app, provider: "local", path: "D/F/g") == .hidden)
        #expect(policy.coverage(app: app, provider: "local", path: "D") == .ancestor)
        let elsewhere = policy.position(app: "com.example.other", provider: "local", path: "A")
        #expect(
            policy.position(app: "com.example.other", provider: "local", child: "x", of: elsewhere).coverage == .hidden)
    }

    @Test("SPEC S9/S32: read-only grants refuse writes with EPERM; scopes gate content operations")
    func accessAndScopes() {
        let readOnly = Coverage.granted(grant(1, "A", access: .read))
        #expect(Decision.provider(.read, coverage: readOnly, caller: process) == nil)
        #expect(Decision.provider(.write, coverage: readOnly, caller: process) == .denied)
        #expect(Decision.provider(.read, coverage: readOnly, caller: process, scopeHeld: { _ in false }) == .denied)
        #expect(Decision.provider(.lookup, coverage: readOnly, caller: process, scopeHeld: { _ in false }) == nil)
        #expect(Decision.provider(.metadata, coverage: readOnly, caller: process, scopeHeld: { _ in false }) == nil)
    }

    @Test("SPEC S14: a revoked grant stays listed but every content operation is EPERM")
    func revoked() {
        let revoked = Coverage.granted(grant(1, "A", state: .revoked))
        #expect(Decision.provider(.lookup, coverage: revoked, caller: process) == nil)
        #expect(Decision.provider(.read, coverage: revoked, caller: process) == .denied)
        #expect(Decision.provider(.metadata, coverage: revoked, caller: process) == .denied)
        #expect(Decision.provider(.write, coverage: revoked, caller: process) == .denied)
    }

    @Test("SPEC S4: the inspect view reads without scopes and gets EROFS on writes")
    func ownerProcess() {
        let covered = Coverage.granted(grant(1, "A"))
        #expect(Decision.provider(.read, coverage: covered, caller: .owner, scopeHeld: { _ in false }) == nil)
        #expect(Decision.provider(.write, coverage: covered, caller: .owner) == .readOnlyView)
        #expect(Decision.provider(.read, coverage: .hidden, caller: .owner) == .invisible)
        #expect(Decision.container(.write, caller: .owner) == .readOnlyView)
        #expect(Decision.container(.write, caller: process) == nil)
        #expect(Decision.provider(.read, coverage: covered, caller: .stranger) == .invisible)
    }

    @Test("SPEC S2: bare ancestor folders can be listed, not changed")
    func ancestors() {
        #expect(Decision.provider(.read, coverage: .ancestor, caller: process) == nil)
        #expect(Decision.provider(.write, coverage: .ancestor, caller: process) == .denied)
        #expect(Decision.provider(.read, coverage: .hidden, caller: process) == .invisible)
    }
}

@Suite struct RelativePathTests {
    @Test("SPEC S33: no path given on the command line leaves its provider")
    func normalize() {
        #expect(RelativePath.normalize("a/./b//c/") == "a/b/c")
        #expect(RelativePath.normalize(".") == "")
        #expect(RelativePath.normalize("") == "")
        #expect(RelativePath.normalize("../x") == nil)
        #expect(RelativePath.normalize("a/../../x") == nil)
        #expect(RelativePath.normalize("/etc") == nil)
        #expect(RelativePath.isWithin("a/b", "a"))
        #expect(!RelativePath.isWithin("ab", "a"))
        #expect(RelativePath.isWithin("anything", ""))
    }
}

/// SPEC S33, S33a: a grant of one of two canonically equivalent names covers
/// nothing of the other (two host files).
@Suite struct CanonicalEquivalenceTests {
    let app = "com.example.editor"

    @Test func grantOfComposedNameDoesNotCoverDecomposedTwin() {
        let grant = Grant(
            id: 1, app: app, provider: "local", item: "item-1", relativePath: "docs/caf\u{E9}.txt",
            isDirectory: false, access: .readWrite, state: .active, grantedAt: 0)
        let policy = PolicySnapshot(
            generation: 1, apps: [App(id: app, name: "Editor")],
            providers: [Provider(id: "local", name: "Local", directory: "/p")], grants: [grant])
        #expect(policy.coverage(app: app, provider: "local", path: "docs/cafe\u{301}.txt") == .hidden)
        let docs = policy.position(app: app, provider: "local", path: "docs")
        #expect(policy.position(app: app, provider: "local", child: "cafe\u{301}.txt", of: docs).coverage == .hidden)
        #expect(
            policy.childrenLeadingToGrants(app: app, provider: "local", path: "docs")
                == [HostNameKey("caf\u{E9}.txt")])
        #expect(policy.coverage(app: app, provider: "local", path: "docs/caf\u{E9}.txt") == .granted(grant))
    }
}
