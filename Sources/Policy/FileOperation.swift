/// The file system's requests, by the names people know from strace and
/// FUSE. Events (SPEC S29) and fault rules name an operation with these
/// raw values, so they are part of the log's format: renaming a Swift
/// method must not change them (PolicyTests pins every one).
public enum FileOperation: String, CaseIterable, Sendable {
    case lookup, getattr, setattr, readlink, access, mknod, mkdir, symlink, link, unlink, rmdir, rename
    case open, create, read, write, fsync, fallocate
    case copyFileRange = "copy_file_range"
    case opendir, readdir, fsyncdir, statfs, getxattr, setxattr, listxattr, removexattr
    /// A control attribute read or written (`user.scopefs.*`, docs/API.md).
    case control
    /// `user.scopefs.start` refused: the grant is not active (SPEC S6).
    case start

    /// The operations a fault rule can name: the file system's requests.
    public static let faultable: [FileOperation] = allCases.filter { $0 != .control && $0 != .start }

    /// Operations on a name in a folder: the gate sees the folder, so a
    /// fault rule's glob on `docs/*` matches them as it matches `docs/x`.
    public var actsInFolder: Bool {
        switch self {
        case .lookup, .mknod, .mkdir, .symlink, .link, .unlink, .rmdir, .rename, .create: return true
        default: return false
        }
    }
}
