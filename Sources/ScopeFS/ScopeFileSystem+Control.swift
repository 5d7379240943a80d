import FuseBridge
import Glibc
import Policy
import SystemPackage

/// The control attributes of docs/API.md (SPEC S6–S8, S12): start and stop
/// accessing, and the caller's counter, through `user.scopefs.*` on a path.
/// They are not content operations: they need visibility, not a scope.
extension ScopeFileSystem {
    static let notNeeded = "not-needed"

    enum ControlAttribute: String {
        case start = "user.scopefs.start"
        case stop = "user.scopefs.stop"
        case scope = "user.scopefs.scope"
    }

    /// Performs a control attribute's action; returns its textual result.
    func control(_ request: Request, inode: UInt64, name: String) throws(Errno) -> String {
        guard let attribute = ControlAttribute(rawValue: name) else { throw .notSupported }
        let caller = callers.caller(of: request)
        let target = try gate(inode, .lookup, caller)
        guard case .provider(let app, let provider) = target.node.place else { return Self.notNeeded }
        guard case .app(_, let process) = caller else { throw .notPermitted }
        guard case .granted(let grant) = coverage(of: target.resolved, app: app, provider: provider) else {
            throw .notPermitted
        }
        let path = displayPath(target.resolved)
        switch attribute {
        case .start:
            guard grant.state == .active else {
                recordDenial(.notPermitted, target.resolved, caller, function: "start")
                throw .notPermitted
            }
            switch scopes.start(pid: process.pid, app: app, grant: grant, path: path) {
            case .started(let count): return String(count)
            case .budgetExhausted: throw Errno(rawValue: EDQUOT)
            }
        case .stop:
            switch scopes.stop(pid: process.pid, app: app, grant: grant, path: path) {
            case .stopped(let count): return String(count)
            case .unbalanced: return "unbalanced"
            }
        case .scope:
            return grant.state == .active ? String(scopes.count(pid: process.pid, grant: grant.id)) : "0"
        }
    }
}
