import FuseBridge
import Policy
import SystemPackage

extension Denial {
    /// The one place where a policy denial becomes an errno (SPEC S32).
    var errno: Errno {
        switch self {
        case .invisible: .noSuchFileOrDirectory
        case .denied: .notPermitted
        case .readOnlyView: .readOnlyFileSystem
        case .crossGrant: .improperLink
        }
    }
}

/// A node that passed the gate for one operation, with what the operation
/// needs to reach its backing file.
struct Target {
    var resolved: NodeTable.Resolved
    /// The grant covering a provider item (nil for container and synthetic nodes).
    var grant: Grant?

    var node: Node { resolved.node }
    var path: String { resolved.path }
}

extension ScopeFileSystem {
    /// Resolves `inode` and checks `operation` by `caller` against the
    /// policy. Every request on an existing node passes through here.
    func gate(_ inode: UInt64, _ operation: OperationClass, _ caller: Caller) throws(Errno) -> Target {
        guard let resolved = table.resolve(inode) else { throw .staleNFSFileHandle }
        return try gate(resolved, operation, caller)
    }

    func gate(_ resolved: NodeTable.Resolved, _ operation: OperationClass, _ caller: Caller) throws(Errno) -> Target {
        let place = resolved.node.place
        if let app = place.app, !Decision.mayEnter(app: app, caller: caller) { throw .noSuchFileOrDirectory }
        switch place {
        case .root, .appDirectory, .providersDirectory:
            if let denial = Decision.synthetic(operation, caller: caller) { throw denial.errno }
            return Target(resolved: resolved, grant: nil)
        case .container:
            if let denial = Decision.container(operation, caller: caller) { throw denial.errno }
            return Target(resolved: resolved, grant: nil)
        case .provider(let app, let provider):
            let coverage = coverage(of: resolved, app: app, provider: provider)
            if let denial = Decision.provider(operation, coverage: coverage, caller: caller, scopeHeld: { grant in
                self.scopeHeld(by: caller, on: grant)
            }) {
                throw denial.errno
            }
            if case .granted(let grant) = coverage { return Target(resolved: resolved, grant: grant) }
            return Target(resolved: resolved, grant: nil)
        }
    }

    /// Coverage of a provider node, cached per policy generation.
    func coverage(of resolved: NodeTable.Resolved, app: AppID, provider: ProviderID) -> Coverage {
        let inode = resolved.node.inode
        let generation = self.generation
        if let cached = table.cachedCoverage(inode, generation: generation) { return cached }
        let coverage = withPolicy { $0.coverage(app: app, provider: provider, path: resolved.path) }
        table.storeCoverage(inode, generation: generation, coverage: coverage)
        return coverage
    }

    /// The security-scope check of SPEC S9. The foundation grants access on
    /// an active grant alone; the per-process counters plug in here.
    func scopeHeld(by caller: Caller, on grant: Grant) -> Bool {
        true
    }

    /// Checks that an already-open file may still be used: with
    /// `--open-files revoke`, a revoked grant cuts it (SPEC S14).
    func checkStillGranted(_ handle: OpenHandle) throws(Errno) {
        guard configuration.openFiles == .revoke, let grant = handle.grant else { return }
        let state = withPolicy { $0.grantsByID[grant]?.state }
        if state != .active { throw .notPermitted }
    }
}
