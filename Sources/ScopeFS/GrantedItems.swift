import FuseBridge
import Policy
import SystemPackage

/// A grant is made for one item, a file the user chose, and records that
/// item's path; the policy decides coverage by paths. Between a host rename
/// and the item locator catching up (a few milliseconds, up to a second),
/// the path names whatever the owner put there: swap a granted folder for
/// an ungranted one (`mv shared s0; mv hidden shared`) and, by path alone,
/// `hidden` is granted until the locator records `shared` at `s0` (issue
/// 28, finding 2: 56 ungranted reads in 41 swaps). So the file found at a
/// grant's path must be the grant's item — the same device and inode the
/// locator last found it as — before the grant covers it or anything below
/// it (SPEC S2, S33). One comparison per node whose coverage is worked out
/// (it is then cached per policy generation and tree epoch), none on the
/// cached path. An item marked missing is not checked: its path stands for
/// whatever is there, as before (an editor's save replaces the file).
struct GrantRootCheck {
    var grant: Grant
    /// The host file the grant was made for; nil: the path alone decides.
    var file: ItemFile?
    /// How many folders above the node the grant's root is (0: the node).
    var levelsUp: Int
}

extension PolicySnapshot {
    /// The grants that may cover an item at `position`, nearest first (its
    /// coverage's grant, then those on folders above it), each with the
    /// file its root must be. `depth` is the number of components of the
    /// item's path; nil when the position's grant is on the item itself.
    /// Empty when nothing needs checking.
    func grantRootChecks(for position: CoveragePosition, depth: Int?) -> [GrantRootCheck] {
        guard case .granted(let nearest) = position.coverage else { return [] }
        let itemDepth = depth ?? RelativePath.components(of: nearest.relativePath).count
        return ([nearest] + enclosingGrants(of: nearest.id)).map { grant in
            GrantRootCheck(
                grant: grant, file: itemFile(of: grant),
                levelsUp: itemDepth - RelativePath.components(of: grant.relativePath).count)
        }
    }
}

extension ScopeFileSystem {
    /// `position` if the node's path leads through the file its grant was
    /// made for; else the position under the nearest enclosing grant whose
    /// root is its item, or hidden with everything below (the owner put
    /// another file where the grant's item was).
    func checkedGrantRoots(_ position: CoveragePosition, _ checks: [GrantRootCheck], of resolved: NodeTable.Resolved)
        -> CoveragePosition
    {
        guard let nearest = checks.first else { return position }
        for check in checks where leadsThroughItem(resolved, check) {
            return check.grant.id == nearest.grant.id ? position : position.notGrantRoot(coveredBy: check.grant)
        }
        return position.notGrantRoot(coveredBy: nil)
    }

    /// Whether the node's ancestor at the grant's root (or the node itself)
    /// is the grant's item. Compared by the table's parent links, which are
    /// what its path — and so its coverage — is built from.
    private func leadsThroughItem(_ resolved: NodeTable.Resolved, _ check: GrantRootCheck) -> Bool {
        guard let file = check.file else { return true }
        guard check.levelsUp >= 0 else { return false }
        let identity =
            check.levelsUp == 0
            ? resolved.node.identity : table.identity(of: resolved.node.inode, levelsUp: check.levelsUp)
        guard let identity else { return false }
        if identity.device == file.device && identity.inode == file.inode { return true }
        // A save renamed a new file over the grant's (S48): it is the item
        // now, before the served policy records it.
        let replaced = temporaries.replacedFile(of: check.grant.id, recorded: file)
        return replaced.map { identity.device == $0.device && identity.inode == $0.inode } ?? false
    }

    /// A file the owner put at a grant's path, under a bare folder, is as
    /// invisible as any ungranted name (SPEC S2): its lookup and its
    /// readdirplus entry are refused at once, so the kernel never holds an
    /// entry, attributes or a listing of it. Under a granted folder the
    /// grant enclosing it covers it anyway, and the gate checks each use.
    func requireGrantedItem(_ node: Node, app: AppID, provider: ProviderID) throws(Errno) {
        guard let resolved = table.resolve(node.inode, generation: generation) else { return }
        let coverage: Coverage
        do { coverage = try self.coverage(of: resolved, app: app, provider: provider) } catch {
            forget(node.inode, count: 1)
            throw error
        }
        if case .hidden = coverage {
            forget(node.inode, count: 1)
            throw .noSuchFileOrDirectory
        }
    }
}
