import Policy
import Testing

/// SPEC S48: a temporary file beside a granted file (`Coverage.replacing`)
/// is decided by the one access rule as a write of that file, by name and
/// through a descriptor, for the app that made it only.
@Suite struct ReplacementRuleTests {
    static let app = "com.example.editor"
    static let opener = Caller.app(app, ProcessKey(pid: 10, startTime: 1))
    static let holder = Caller.app(app, ProcessKey(pid: 0, startTime: 0))

    static func grant(access: Access = .readWrite, state: GrantState = .active) -> Grant {
        Grant(
            id: 1, app: app, provider: "local", item: "item-1", relativePath: "docs/report.txt", isDirectory: false,
            access: access, state: state, grantedAt: 0)
    }

    static func allowed(_ result: Result<Grant?, Denial>) -> Bool {
        if case .success = result { return true }
        return false
    }

    @Test(
        "SPEC S48: every use of a temporary needs write on its file, by name with the scope held",
        arguments: [OperationClass.read, .metadata, .write])
    func usesNeedWrite(operation: OperationClass) {
        let writable = Self.grant()
        let readable = Self.grant(access: .read)
        let revoked = Self.grant(state: .revoked)
        #expect(Self.allowed(Decision.permit(operation, coverage: .replacing(writable), caller: Self.opener)))
        #expect(
            Decision.permit(operation, coverage: .replacing(readable), caller: Self.opener) == .failure(.denied))
        #expect(Decision.permit(operation, coverage: .replacing(revoked), caller: Self.opener) == .failure(.denied))
        // Strict scopes (S9): by name, only while the file's scope is held,
        // unless it is a metadata read, which never needs one.
        let unscoped = Decision.permit(
            operation, coverage: .replacing(writable), caller: Self.opener, scopeHeld: { _ in false })
        #expect(Self.allowed(unscoped) == (operation == .metadata))
    }

    @Test("SPEC S48: a lookup finds the app's own temporary; nobody else sees it")
    func visibility() {
        let writable = Self.grant()
        #expect(Self.allowed(Decision.permit(.lookup, coverage: .replacing(writable), caller: Self.opener)))
        #expect(Decision.permit(.lookup, coverage: .replacing(writable), caller: .owner) == .failure(.invisible))
        #expect(Decision.permit(.read, coverage: .replacing(writable), caller: .stranger) == .failure(.invisible))
    }

    @Test("SPEC S48, S14: a temporary's descriptor is cut by a revoke or a narrowing, even for reading")
    func descriptorsAreCut() {
        for access: DescriptorAccess in [.read, .write, [.read, .write]] {
            #expect(
                Self.allowed(
                    Decision.permitDescriptor(
                        access, coverage: .replacing(Self.grant()), openedThrough: nil, caller: Self.holder)))
            for grant in [Self.grant(access: .read), Self.grant(state: .revoked)] {
                #expect(
                    Decision.permitDescriptor(
                        access, coverage: .replacing(grant), openedThrough: nil, caller: Self.holder)
                        == .failure(.denied))
            }
        }
    }

    @Test("SPEC S48, S9: a started folder scope above the file allows its temporaries, as it allows the file")
    func enclosingGrantAllows() {
        let file = Self.grant(access: .read)
        let folder = Grant(
            id: 2, app: Self.app, provider: "local", item: "item-2", relativePath: "docs", isDirectory: true,
            access: .readWrite, state: .active, grantedAt: 0)
        let result = Decision.permit(
            .write, coverage: .replacing(file), caller: Self.opener, enclosing: { _ in [folder] })
        #expect(result == .success(folder))
    }
}
