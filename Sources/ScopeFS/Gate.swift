import Foundation
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
    var path: String { get throws(Errno) { try resolved.path } }
}

extension ScopeFileSystem {
    /// Resolves `inode` and checks `access` by `caller` against the policy;
    /// `operation` names the request in events and fault rules. Every
    /// request on an existing node passes through here; `route` is
    /// `.descriptor` for one made through an open handle (readdir, setattr
    /// through a write descriptor), which needs no scope (SPEC S9).
    func gate(
        _ inode: UInt64, _ access: OperationClass, _ caller: Caller, _ operation: FileOperation,
        route: Route = .name
    ) throws(Errno) -> Target {
        guard let resolved = table.resolve(inode, generation: generation) else { throw .staleNFSFileHandle }
        let grant: Grant?
        do {
            grant = try decide(resolved, access, caller, route: route)
        } catch {
            // EIO here is the table's own fault (`PathWalk`), not a denial.
            if error != .ioError { recordDenial(error, resolved, caller, operation) }
            throw error
        }
        if faults.isActive { try injectFault(resolved, caller, operation) }
        // The resolved value's last use: moved into the target, not copied
        // (a copy retains each of its references once more).
        return Target(resolved: resolved, grant: grant)
    }

    /// The decision for one operation: the grant covering a provider node,
    /// nil for other places, or the denial's errno.
    private func decide(
        _ resolved: NodeTable.Resolved, _ operation: OperationClass, _ caller: Caller, route: Route
    ) throws(Errno) -> Grant? {
        let place = resolved.node.place
        if let app = place.app, !Decision.mayEnter(app: app, caller: caller) { throw .noSuchFileOrDirectory }
        switch place {
        case .root, .appDirectory, .providersDirectory:
            if let denial = Decision.synthetic(operation, caller: caller) { throw denial.errno }
            return nil
        case .container(let app):
            if let denial = Decision.container(operation, caller: caller) { throw denial.errno }
            if operation == .read, documents.followsContainerReads, case .app(_, let process) = caller,
                let path = try? resolved.path
            {
                documents.containerItemRead(app: app, process: process, path: path)
            }
            return nil
        case .provider(let app, let provider):
            try checkHostLocation(resolved, app: app, provider: provider)
            let coverage = try coverage(of: resolved, app: app, provider: provider)
            // The grant that allows the operation: the item's nearest, or one
            // enclosing it (Apple's rule, SPEC S9), looked up only when needed.
            // The one access rule (SPEC S47); open descriptors ask it too
            // (`checkStillGranted`).
            let verdict = Decision.permit(
                operation, coverage: coverage, caller: caller, route: route,
                enclosing: { grant in self.withPolicy { $0.enclosingGrants(of: grant.id) } },
                scopeHeld: { grant in self.scopeHeld(by: caller, on: grant) })
            switch verdict {
            case .success(let grant): return grant
            case .failure(let denial): throw denial.errno
            }
        }
    }

    /// Coverage of a provider node, cached per policy generation. A node
    /// whose parent's is cached (every new file: the kernel looked up or
    /// created it in a folder it just used) takes it over or one step from
    /// it; others walk their path.
    func coverage(of resolved: NodeTable.Resolved, app: AppID, provider: ProviderID) throws(Errno) -> Coverage {
        if let cached = resolved.cachedCoverage { return cached.coverage }
        // Below the grant trie (inside a granted folder, or far from any
        // grant) a node shares its parent's position: no policy lookup.
        if let position = resolved.parentCoverage?.everyChild {
            table.storeCoverage(resolved, generation: resolved.generation, position: position)
            return position.coverage
        }
        let stepped = withPolicy { policy -> (UInt64, CoveragePosition, [GrantRootCheck])? in
            // The parent's position names a node of its own snapshot's trie.
            guard let parent = resolved.parentCoverage, policy.generation == resolved.generation else { return nil }
            let position = policy.position(app: app, provider: provider, child: resolved.name, of: parent)
            // A grant above was checked with the parent; one made here is
            // checked now (`GrantRootCheck`).
            let checks = position.grantIsHere ? policy.grantRootChecks(for: position, depth: nil) : []
            return (policy.generation, position, checks)
        }
        let (generation, found, checks) =
            if let stepped { stepped } else { try walked(resolved, app: app, provider: provider) }
        var position = checkedGrantRoots(found, checks, of: resolved)
        // A name no grant shows may be the app's temporary of a save (S48).
        if case .hidden = position.coverage, let replacing = replacementPosition(resolved, app: app, provider: provider)
        {
            position = replacing
        }
        table.storeCoverage(resolved, generation: generation, position: position)
        return position.coverage
    }

    /// A node's position from its whole path, with the grant roots on that
    /// path to check; the path is built (under the node table's lock)
    /// before the policy lock is taken.
    private func walked(_ resolved: NodeTable.Resolved, app: AppID, provider: ProviderID) throws(Errno)
        -> (UInt64, CoveragePosition, [GrantRootCheck])
    {
        let path = try resolved.path
        let depth = RelativePath.components(of: path).count
        return withPolicy { policy in
            let position = policy.position(app: app, provider: provider, path: path)
            return (policy.generation, position, policy.grantRootChecks(for: position, depth: depth))
        }
    }

    /// The security-scope check of SPEC S9 (strict mode), or always true
    /// in lenient mode.
    func scopeHeld(by caller: Caller, on grant: Grant) -> Bool {
        scopes.holds(caller, grant)
    }

    /// Denials are events (SPEC S29). ENOENT is not: to the app an
    /// invisible item is indistinguishable from a missing one, and shells
    /// probe for missing names all the time. Recording only queues the event.
    func recordDenial(_ error: Errno, _ resolved: NodeTable.Resolved, _ caller: Caller, _ operation: FileOperation) {
        guard error != .noSuchFileOrDirectory else { return }
        var pid: Int32? = nil
        if case .app(_, let process) = caller { pid = process.pid }
        events.record(
            Event(
                time: Date().timeIntervalSince1970, kind: .denial, app: caller.app ?? resolved.node.place.app, pid: pid,
                path: displayPath(resolved), operation: operation.rawValue, errno: error.rawValue))
    }

    /// A node's path inside the mount, as people see it.
    func displayPath(_ resolved: NodeTable.Resolved) -> String {
        // An event's path is for people: a node whose path cannot be built
        // (EIO, logged) is shown by its inode number.
        let path = (try? resolved.path) ?? "<inode \(resolved.node.inode)>"
        switch resolved.node.place {
        case .root: return "/"
        case .appDirectory(let app): return "/\(app)"
        case .providersDirectory(let app): return "/\(app)/\(MountLayout.providers)"
        case .container(let app): return MountLayout.containerPath(app: app, path: path)
        case .provider(let app, let provider): return MountLayout.providerPath(app: app, provider: provider, path: path)
        }
    }

    /// Checks that an already-open file may still be used for what it was
    /// opened for (`OpenHandle.access`): with `--open-files revoke`, every
    /// operation on an open descriptor or mapping of a provider item asks
    /// the one access rule again, through the descriptor (SPEC S14, S47:
    /// `PolicySnapshot.permitDescriptor`), with the item's coverage as an
    /// open would see it. So a revoke or a narrowing cuts exactly what the
    /// new policy no longer allows: a write descriptor once no active grant
    /// lets the app write the file, a read descriptor once none lets it
    /// read it; EPERM either way. No scope is asked (S9: a descriptor
    /// opened in scope keeps working after the last stop).
    /// Reads and writes ask this once per policy generation, through an
    /// atomic on the handle, not a lock per call.
    /// `request`: whose operation it is, for the denial event's pid (S29).
    func checkStillGranted(_ handle: OpenHandle, _ operation: FileOperation, _ request: Request? = nil) throws(Errno) {
        if faults.isActive { try injectFault(handle, operation) }
        // Container files: nothing there is ever revoked (S14 is about grants).
        guard configuration.openFiles == .revoke, case .provider(let app, let provider) = handle.node.place else {
            return
        }
        let current = generation
        if handle.grantVerified.load(ordering: .acquiring) == current { return }
        // The kernel holds the node while the file is open.
        guard let resolved = table.resolve(handle.node.inode, generation: current) else { throw .notPermitted }
        let coverage: Coverage
        do {
            coverage = try self.coverage(of: resolved, app: app, provider: provider)
        } catch .noSuchFileOrDirectory {
            // Unlinked while open (a removed temporary of a save, a file
            // deleted on the host): no name leads to it any more, so the
            // grant it was opened through decides, as for a moved item.
            coverage = .hidden
        }
        let caller = handle.user.caller
        let verdict = withPolicy {
            $0.permitDescriptor(handle.access, coverage: coverage, openedThrough: handle.grant, caller: caller)
        }
        if case .failure(let denial) = verdict {
            // The process that asked, not the descriptor's opener: only on
            // a denial, so the allowed path reads no /proc.
            recordDenial(denial.errno, resolved, request.map { callers.caller(of: $0) } ?? caller, operation)
            throw denial.errno
        }
        handle.grantVerified.store(current, ordering: .releasing)
    }
}
