import Foundation
import FuseBridge
import Glibc
import HostText
import Policy
import Synchronization
import SystemPackage

/// Where a local provider's previews come from (SPEC S50): the owner's
/// freedesktop thumbnail cache (the daemon's `FreedesktopThumbnails`).
public protocol LocalThumbnails: Sendable {
    /// The preview of the host file at the absolute `path`, or nil.
    func thumbnail(hostPath path: String) -> [UInt8]?
}

final class LocalThumbnailSource: Sendable {
    private let source = Mutex<(any LocalThumbnails)?>(nil)
    func set(_ new: (any LocalThumbnails)?) { source.withLock { $0 = new } }
    var current: (any LocalThumbnails)? { source.withLock { $0 } }
}

/// `user.scopefs.thumbnail` (SPEC S50, docs/API.md): an item's preview,
/// a PNG. Reading it is metadata: a process that may see the item reads
/// it without a scope on the document and without a download of its
/// content (an extension is asked for the preview alone); a process that
/// may not see the item gets what it gets for any item it cannot see
/// (ENOENT), and learns nothing. Writing it is a write of the file (the
/// one access rule, S47: read-write grant and, in strict mode, a scope);
/// on an extension's provider it goes to the store with the next upload.
extension ScopeFileSystem {
    public func setLocalThumbnails(_ source: (any LocalThumbnails)?) {
        localThumbnails.set(source)
    }

    func readThumbnail(_ request: Request, inode: UInt64) throws(Errno) -> [UInt8] {
        // The one access rule (S47), through the gate: a preview is
        // metadata of the item, which needs no scope.
        let target = try gate(inode, .metadata, callers.caller(of: request), .getxattr)
        guard case .provider(_, let provider) = target.node.place, !target.node.isDirectory else { throw .noData }
        if let (content, file) = content(of: target.node) {
            guard let bytes = content.thumbnail(file) else { throw .noData }
            return bytes
        }
        guard let source = localThumbnails.current,
            let directory = withPolicy({ $0.providers[provider]?.directory })
        else { throw .noData }
        let relative = try target.path
        let hostPath = relative.isEmpty ? directory : directory + "/" + relative
        guard let bytes = source.thumbnail(hostPath: hostPath), ThumbnailLimits.problem(bytes) == nil else {
            throw .noData
        }
        return bytes
    }

    /// An app saves (or, `value` nil, removes) the preview of a file it
    /// may write. Only an extension's provider keeps one: a local folder's
    /// previews are the owner's file manager's (ENOTSUP).
    func writeThumbnail(_ request: Request, inode: UInt64, value: [UInt8]?) throws(Errno) {
        // The gate asks the one access rule (S47) for a write of the file.
        let target = try gate(inode, .write, callers.caller(of: request), .setxattr)
        guard !target.node.isDirectory, let (content, file) = content(of: target.node) else { throw .notSupported }
        if let value {
            // EINVAL, as for any attribute value the file system cannot hold.
            guard ThumbnailLimits.problem(value) == nil else {
                throw value.count > ThumbnailLimits.bytes ? Errno(rawValue: E2BIG) : .invalidArgument
            }
        }
        content.saveThumbnail(file, value)
    }
}
