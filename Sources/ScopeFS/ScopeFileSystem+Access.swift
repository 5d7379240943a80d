import FuseBridge
import Glibc
import Policy
import SystemPackage

/// access(2) and chdir (SPEC S9, S47): the kernel asks the file system
/// whenever it does not check permission bits itself (no
/// `default_permissions`, MountAccess). Without an answer it took every
/// access for granted, so `access(W_OK)` of a read-only grant said yes to
/// an app, whatever its owner. The answer is the one an open would get:
/// the one access rule through the gate, then the host's permissions.
extension ScopeFileSystem {
    public func access(_ request: Request, inode: UInt64, mask: Int32) throws(Errno) {
        let target = try gate(inode, Self.accessClass(mask), callers.caller(of: request), .access)
        guard target.node.place.isBacked, mask & (R_OK | W_OK | X_OK) != 0 else { return }
        // The host checks the daemon's credentials, which are the caller's
        // (only the owner's processes and its apps are served, as the owner).
        if target.node.isDirectory {
            let folder = try folderDescriptor(of: target.node)
            defer { withExtendedLifetime(folder) {} }
            try Sys.accessAt(folder.number, "", mask, Sys.emptyPath)
        } else {
            guard let parent = try parentDescriptor(of: target.resolved) else { return }
            defer { withExtendedLifetime(parent) {} }
            try Sys.accessAt(parent.number, target.resolved.name, mask, Sys.noFollow)
        }
    }

    /// What an access mask asks of the rule: what the open it probes for
    /// would ask. Searching a folder or naming a file (X_OK, F_OK; chdir
    /// sends X_OK) is a lookup, which needs no scope (S9).
    static func accessClass(_ mask: Int32) -> OperationClass {
        if mask & W_OK != 0 { return .write }
        if mask & R_OK != 0 { return .read }
        return .lookup
    }
}
