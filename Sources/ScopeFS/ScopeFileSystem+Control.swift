import FuseBridge
import Glibc
import Policy
import SystemPackage

/// The control attributes of docs/API.md (SPEC S6–S8, S12): start and stop
/// accessing, and the caller's counter, through `user.scopefs.*` on a path.
/// They are not content operations: they need visibility, not a scope.
extension ScopeFileSystem {
    static let notNeeded = "not-needed"

    /// The answer to a size probe of `start`/`stop`: a probe must not act
    /// (tools ask for the size first, then read), and every result fits.
    static let probeAnswer = String(repeating: " ", count: 16)

    /// Performs a control attribute's action; returns its textual result.
    func control(_ request: Request, inode: UInt64, name: String, probe: Bool = false) throws(Errno) -> String {
        guard let attribute = ControlAttributeName(rawValue: name) else { throw .notSupported }
        if probe && attribute.acts { return Self.probeAnswer }
        let caller = callers.caller(of: request)
        let target = try gate(inode, .lookup, caller, .control)
        guard case .provider(let app, let provider) = target.node.place else {
            // Outside provider views nothing needs a scope; there is no item
            // to describe or bookmark either.
            guard attribute.acts || attribute == .scope else { throw .noData }
            return Self.notNeeded
        }
        guard case .granted(let nearest) = try coverage(of: target.resolved, app: app, provider: provider) else {
            throw .notPermitted
        }
        if let metadata = try itemMetadata(attribute, target: target, provider: provider, grant: nearest) {
            return metadata
        }
        guard case .app(_, let process) = caller else { throw .notPermitted }
        let path = displayPath(target.resolved)
        // The grants covering the item, nearest first (SPEC S6, S9): start
        // raises the nearest active one, so a revoked file grant inside an
        // active folder grant is started through the folder; stop lowers
        // the nearest one this process holds.
        let enclosing = withPolicy { $0.enclosingGrants(of: nearest.id) }
        let covering = [nearest] + enclosing
        // The one access rule (SPEC S47) names the grant the item is
        // reached through now: the nearest active one, else an enclosing.
        let verdict = Decision.permit(
            .metadata, coverage: .granted(nearest), caller: caller, enclosing: { _ in enclosing })
        let allowed: Grant? = try? verdict.get()
        let grant = allowed ?? nearest
        switch attribute {
        case .start, .startUntilExit:
            guard allowed != nil else {
                recordDenial(.notPermitted, target.resolved, caller, .start)
                throw .notPermitted
            }
            switch scopes.start(
                pid: process.pid, app: app, grant: grant, path: path, untilExit: attribute == .startUntilExit)
            {
            case .started(let count): return String(count)
            case .budgetExhausted: throw Errno(rawValue: EDQUOT)
            }
        case .stop:
            let held = covering.first { scopes.count(pid: process.pid, grant: $0.id) > 0 } ?? nearest
            switch scopes.stop(pid: process.pid, app: app, grant: held, path: path) {
            case .stopped(let count): return String(count)
            case .unbalanced: return "unbalanced"
            }
        case .scope:
            return allowed != nil ? String(scopes.count(pid: process.pid, grant: grant.id)) : "0"
        case .bookmark, .readOnlyBookmark:
            // A bookmark for an item the app can access now (SPEC S25).
            guard allowed != nil else { throw .notPermitted }
            let access: Access = attribute == .bookmark ? grant.access : .read
            return try documents.bookmark(app: app, provider: provider, path: try target.path, access: access)
        default:
            throw .notSupported
        }
    }

    /// The reference metadata of SPEC S24, readable by the app and owner processes.
    private func itemMetadata(_ attribute: ControlAttributeName, target: Target, provider: ProviderID, grant: Grant)
        throws(Errno) -> String?
    {
        switch attribute {
        case .item: return try documents.itemIdentifier(provider: provider, path: try target.path)
        case .provider: return provider
        case .providerName: return withPolicy { $0.providers[provider]?.name } ?? provider
        case .path: return try target.path
        case .grantState: return grant.state.rawValue
        case .state, .progress:
            // A local folder's items are always on disk.
            guard let (content, file) = content(of: target.node) else {
                return attribute == .state ? "materialized" : "0/0"
            }
            return (attribute == .state ? content.state(file) : content.progress(file)) ?? "materialized"
        default: return nil
        }
    }
}
