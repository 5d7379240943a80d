import FuseBridge
import Glibc
import HostText
import Policy
import SystemPackage

/// Extended attributes pass through to the host file (SPEC S35). Names
/// under `user.scopefs.` are ScopeFS's own control attributes and are never
/// stored on host files.
extension ScopeFileSystem {
    static let controlPrefix = ControlAttributeName.prefix

    /// SELinux labels belong to the kernel, not to this file system: where
    /// SELinux runs, the kernel answers `security.selinux` of a FUSE file
    /// itself and never asks the daemon; where it does not, a label read
    /// from the host file would label nothing here. So the mount does not
    /// support the attribute (EOPNOTSUPP, and it is not listed). That
    /// answer also tells `ls -l`, which asks every file for it, to stop
    /// asking on this device after the first (coreutils caches "not
    /// supported" per device): one round trip per file fewer (issue 21).
    static let selinuxLabel = "security.selinux"

    public func setxattr(_ request: Request, inode: UInt64, name: String, value: UnsafeRawBufferPointer, flags: Int32)
        throws(Errno)
    {
        if name == ControlAttributeName.thumbnail.rawValue {
            return try writeThumbnail(request, inode: inode, value: Array(value))
        }
        if name.hasHostPrefix(Self.controlPrefix) {
            _ = try control(request, inode: inode, name: name)
            return
        }
        if name.sameHostName(as: Self.selinuxLabel) { throw .notSupported }
        let target = try gate(inode, .write, callers.caller(of: request), .setxattr)
        try xattrPath(target) { path throws(Errno) in try Sys.setxattr(path, name, value, flags) }
    }

    public func getxattr(_ request: Request, inode: UInt64, name: String, size: Int) throws(Errno) -> [UInt8] {
        // Binary (a PNG), so not one of the textual control answers (S50).
        if name == ControlAttributeName.thumbnail.rawValue { return try readThumbnail(request, inode: inode) }
        if name.hasHostPrefix(Self.controlPrefix) {
            // Host bytes: `user.scopefs.path` is a path (SPEC S33a).
            return try control(request, inode: inode, name: name, probe: size == 0).hostBytes
        }
        if name.sameHostName(as: Self.selinuxLabel) { throw .notSupported }
        let target = try gate(inode, .metadata, callers.caller(of: request), .getxattr)
        // The kernel asks for security.capability before each write to an
        // open file: its descriptor answers without a walk of /proc.
        if target.node.folder == nil, let open = target.resolved.openFile {
            return try Sys.getxattr(open.descriptor, name)
        }
        return try xattrPath(target) { path throws(Errno) in try Sys.getxattr(path, name) }
    }

    public func listxattr(_ request: Request, inode: UInt64) throws(Errno) -> [UInt8] {
        let target = try gate(inode, .metadata, callers.caller(of: request), .listxattr)
        let names = try xattrPath(target) { path throws(Errno) in try Sys.listxattr(path) }
        return Self.withoutSELinuxLabel(names)
    }

    /// A host list of attribute names (each ends in NUL) without the label.
    static func withoutSELinuxLabel(_ names: [UInt8]) -> [UInt8] {
        let label = Array(selinuxLabel.utf8)
        guard names.count > label.count else { return names }
        var kept: [UInt8] = []
        kept.reserveCapacity(names.count)
        for name in names.split(separator: 0, omittingEmptySubsequences: true) where !name.elementsEqual(label) {
            kept += name
            kept.append(0)
        }
        return kept
    }

    public func removexattr(_ request: Request, inode: UInt64, name: String) throws(Errno) {
        if name == ControlAttributeName.thumbnail.rawValue {
            return try writeThumbnail(request, inode: inode, value: nil)
        }
        if name.hasHostPrefix(Self.controlPrefix) || name.sameHostName(as: Self.selinuxLabel) {
            throw .notSupported
        }
        let target = try gate(inode, .write, callers.caller(of: request), .removexattr)
        try xattrPath(target) { path throws(Errno) in try Sys.removexattr(path, name) }
    }

    /// Where the node's host file is for an xattr call: the folder's own
    /// descriptor, or the parent's descriptor plus the name (a final
    /// symlink not followed); see `Sys.XattrPath`.
    private func xattrPath<T>(_ target: Target, _ body: (Sys.XattrPath) throws(Errno) -> T) throws(Errno) -> T {
        guard target.node.place.isBacked else { throw .notSupported }
        // The path names the descriptor: it must stay open until `body`
        // returns.
        let directory = target.node.folder != nil ? try folderDescriptor(of: target.node) : nil
        let parent = directory == nil ? try parentDescriptor(of: target.resolved) : nil
        defer { withExtendedLifetime((directory, parent)) {} }
        return try body(
            BackingStore.xattrPath(directory: directory?.number, parent: parent?.number, name: target.resolved.name))
    }
}
