import Policy
import Testing

/// Apple's coverage rule (SPEC S9, docs/API.md "Which grant covers an
/// item"): a started folder scope covers everything below it, whatever
/// deeper grants exist; revoking one grant denies only what no other
/// active, started grant covers.
@Suite struct CoverageRuleTests {
    let app = "com.example.editor"
    let caller = Caller.app("com.example.editor", ProcessKey(pid: 10, startTime: 1))

    func grant(
        _ id: GrantID, _ path: String, folder: Bool = true, access: Access = .readWrite, state: GrantState = .active
    )
        -> Grant
    {
        Grant(
            id: id, app: app, provider: "local", item: "item-\(id)", relativePath: path, isDirectory: folder,
            access: access, state: state, grantedAt: 0)
    }

    func snapshot(_ grants: [Grant]) -> PolicySnapshot {
        PolicySnapshot(
            generation: 1, apps: [App(id: app, name: "Editor")],
            providers: [Provider(id: "local", name: "Local", directory: "/p")], grants: grants)
    }

    /// The decision for `path`, with scopes started on `started` grants.
    func decide(_ operation: OperationClass, _ path: String, in policy: PolicySnapshot, started: Set<GrantID>)
        -> Result<Grant?, Denial>
    {
        Decision.permit(
            operation, coverage: policy.coverage(app: app, provider: "local", path: path), caller: caller,
            enclosing: { policy.enclosingGrants(of: $0.id) }, scopeHeld: { started.contains($0.id) })
    }

    @Test("Issue 16 finding 3: a file grant inside a started folder scope does not take the folder's coverage away")
    func folderScopeCoversDeeperFileGrant() throws {
        let policy = snapshot([grant(1, "Reports"), grant(2, "Reports/plain.txt", folder: false)])
        #expect(policy.enclosingGrants(of: 2).map(\.id) == [1])
        #expect(policy.enclosingGrants(of: 1).isEmpty)
        #expect(try decide(.read, "Reports/plain.txt", in: policy, started: [1]).get()?.id == 1)
        #expect(try decide(.write, "Reports/plain.txt", in: policy, started: [1]).get()?.id == 1)
        // The file's own scope covers the file; the nearest grant is preferred.
        #expect(try decide(.read, "Reports/plain.txt", in: policy, started: [2]).get()?.id == 2)
        #expect(try decide(.read, "Reports/plain.txt", in: policy, started: [1, 2]).get()?.id == 2)
        // The file's scope does not cover its siblings.
        #expect(decide(.read, "Reports/other.txt", in: policy, started: [2]) == .failure(.denied))
        #expect(decide(.read, "Reports/plain.txt", in: policy, started: []) == .failure(.denied))
    }

    @Test("Revoking one grant denies only what no other active, started grant covers")
    func revokeDeniesOnlyWhatNothingElseCovers() throws {
        let revokedFile = snapshot([grant(1, "Reports"), grant(2, "Reports/plain.txt", folder: false, state: .revoked)])
        #expect(try decide(.read, "Reports/plain.txt", in: revokedFile, started: [1]).get()?.id == 1)
        #expect(decide(.read, "Reports/plain.txt", in: revokedFile, started: [2]) == .failure(.denied))
        #expect(decide(.metadata, "Reports/plain.txt", in: revokedFile, started: []) == .success(grant(1, "Reports")))
        let revokedFolder = snapshot([
            grant(1, "Reports", state: .revoked), grant(2, "Reports/plain.txt", folder: false),
        ])
        #expect(try decide(.read, "Reports/plain.txt", in: revokedFolder, started: [2]).get()?.id == 2)
        #expect(decide(.read, "Reports/plain.txt", in: revokedFolder, started: [1]) == .failure(.denied))
        #expect(decide(.read, "Reports/other.txt", in: revokedFolder, started: [1, 2]) == .failure(.denied))
        // An open descriptor of the file: the folder grant still allows it (S14, S47).
        func throughDescriptor(_ policy: PolicySnapshot) -> Result<Grant?, Denial> {
            policy.permitDescriptor(
                .read, coverage: policy.coverage(app: app, provider: "local", path: "Reports/plain.txt"),
                openedThrough: 2, caller: caller)
        }
        #expect(try throughDescriptor(revokedFile).get()?.id == 1)
        #expect(
            throughDescriptor(snapshot([grant(2, "Reports/plain.txt", folder: false, state: .revoked)]))
                == .failure(.denied))
    }

    @Test("Access comes from the grant that allows: a read-only file grant in a started read-write folder is writable")
    func accessOfTheAllowingGrant() throws {
        let policy = snapshot([grant(1, "Reports"), grant(2, "Reports/plain.txt", folder: false, access: .read)])
        #expect(try decide(.write, "Reports/plain.txt", in: policy, started: [1, 2]).get()?.id == 1)
        #expect(decide(.write, "Reports/plain.txt", in: policy, started: [2]) == .failure(.denied))
        let readOnlyFolder = snapshot([
            grant(1, "Reports", access: .read), grant(2, "Reports/plain.txt", folder: false),
        ])
        #expect(decide(.write, "Reports/plain.txt", in: readOnlyFolder, started: [1]) == .failure(.denied))
        #expect(try decide(.write, "Reports/plain.txt", in: readOnlyFolder, started: [2]).get()?.id == 2)
    }

    @Test("Enclosing grants are listed nearest first, up to the provider's root, and only the app's own")
    func enclosingOrder() {
        let other = Grant(
            id: 9, app: "com.example.other", provider: "local", item: "x", relativePath: "A", isDirectory: true,
            access: .readWrite, state: .active, grantedAt: 0)
        let policy = snapshot([
            grant(1, ""), grant(2, "A"), grant(3, "A/B/c.txt", folder: false), grant(4, "A/B"), other,
        ])
        #expect(policy.enclosingGrants(of: 3).map(\.id) == [4, 2, 1])
        #expect(policy.enclosingGrants(of: 2).map(\.id) == [1])
        #expect(policy.enclosingGrants(of: 1).isEmpty)
        #expect(policy.enclosingGrants(of: 9).isEmpty)
    }

    @Test("A grant request widens or replaces an existing grant, and says what changed")
    func grantChanges() {
        let readOnly = grant(1, "a.txt", folder: false, access: .read)
        #expect(
            GrantChange.resolved(asked: .readWrite, session: false, existing: readOnly, update: .widen) == (
                .readWrite, false
            ))
        let readWrite = grant(1, "a.txt", folder: false)
        #expect(
            GrantChange.resolved(asked: .read, session: false, existing: readWrite, update: .widen) == (
                .readWrite, false
            ))
        #expect(
            GrantChange.resolved(asked: .read, session: true, existing: readWrite, update: .widen) == (
                .readWrite, false
            ))
        #expect(
            GrantChange.resolved(asked: .read, session: true, existing: readWrite, update: .replace) == (.read, true))
        #expect(GrantChange.resolved(asked: .read, session: true, existing: nil, update: .widen) == (.read, true))
        #expect(GrantChange(grant: readOnly, previous: readWrite).changes == ["access read-write -> read-only"])
        #expect(GrantChange(grant: readWrite, previous: readWrite).changes.isEmpty)
        #expect(GrantChange(grant: readWrite, previous: nil).changes.isEmpty)
    }
}
