import CSystemShims
import Foundation
import Glibc

private let O_PATH = scopefs_o_path
private let UTIME_OMIT = (1 << 30) - 2
private let RENAME_NOREPLACE: UInt32 = 1

/// The replica's folder on disk: the provider's directory that the mount
/// serves, where each of the extension's items is a file, folder or
/// symlink at its path. A file not downloaded is a placeholder: a sparse
/// file of the item's size, times and mode (SPEC S42).
///
/// Paths are the items' names joined by "/", walked one component at a
/// time without following symlinks: an app may have made any symlink in
/// the replica, and a remote change must never write through one.
public struct ReplicaFolder: Sendable {
    public let root: String

    public init(root: String) { self.root = root }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case system(Int32, String)

        /// For people (status, events, logs): what failed and the errno's
        /// text, never the enum's dump (issue 47, finding 8).
        public var description: String {
            switch self {
            case .system(let code, let what): "\(what): \(String(cString: strerror(code)))"
            }
        }
    }

    /// The mode the replica gives an item of `mode` (issue 46, 5b):
    /// permission bits only. An extension's item never becomes a set-uid
    /// or set-gid file on the host (the owner's, root's when the daemon
    /// runs as root), nor a set-gid or sticky folder that would hand its
    /// group or deletion rule to what the mount creates in it. Items are
    /// read with this mode (`ItemDecoding`) and the replica's own files
    /// are compared with it (a push), so the stripped bits are neither
    /// shown nor sent back as a local chmod.
    public static func permissions(_ mode: UInt32) -> UInt32 { mode & 0o777 }

    /// The folder holding `path` (open, O_PATH|O_DIRECTORY) and the last name.
    func parent(of path: String) throws(Failure) -> (Int32, String) {
        var components = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard let name = components.popLast() else { throw .system(EINVAL, "the replica's root has no parent") }
        var folder = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { throw .system(errno, "cannot open the replica \(root)") }
        for component in components {
            let next = openat(folder, component, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            let error = errno
            close(folder)
            guard next >= 0 else { throw .system(error, "cannot open folder \(component) of \(path)") }
            folder = next
        }
        return (folder, name)
    }

    func inParent<T>(of path: String, _ body: (Int32, String) throws(Failure) -> T) throws(Failure) -> T {
        let (folder, name) = try parent(of: path)
        defer { close(folder) }
        return try body(folder, name)
    }

    /// A new placeholder; its inode.
    public func placeholder(_ path: String, size: Int64, mtime: Double, mode: UInt32) throws(Failure) -> UInt64 {
        try inParent(of: path) { folder, name throws(Failure) in
            let file = openat(folder, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard file >= 0 else { throw .system(errno, "cannot create \(path)") }
            defer { close(file) }
            try Self.shape(file, path, size: size, mtime: mtime, mode: mode)
            return try Self.inode(file, path)
        }
    }

    /// The item's content changed elsewhere: the file becomes a placeholder
    /// of the new size (its bytes are dropped). `inode`: the file the
    /// caller means; another at `path` (moved there since the caller
    /// looked) is ESTALE, untouched.
    public func reset(_ path: String, inode: UInt64, size: Int64, mtime: Double, mode: UInt32) throws(Failure) {
        try withFile(path, O_WRONLY, inode: inode) { file throws(Failure) in
            // Its bytes go, not its size: emptied first, the file showed
            // size 0 to a stat between the two truncates, and an app read
            // an empty version of an item that has none (S49; seen after a
            // conflict copy, test_remote_faults). A file system without
            // holes is emptied, as before.
            var info = stat()
            let punched =
                fstat(file, &info) == 0
                && (info.st_size == 0 || fallocate(file, Self.punchHole, 0, info.st_size) == 0)
            if !punched { guard ftruncate(file, 0) == 0 else { throw .system(errno, "cannot empty \(path)") } }
            try Self.shape(file, path, size: size, mtime: mtime, mode: mode)
        }
    }

    /// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE (linux/falloc.h).
    private static let punchHole: Int32 = 0x02 | 0x01

    public func setAttributes(_ path: String, mtime: Double, mode: UInt32) throws(Failure) {
        try inParent(of: path) { folder, name throws(Failure) in
            var info = stat()
            guard fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { throw .system(errno, "no \(path)") }
            if info.st_mode & S_IFMT == S_IFLNK { return }
            if info.st_mode & 0o7777 != Self.permissions(mode) {
                guard fchmodat(folder, name, Self.permissions(mode), 0) == 0 else {
                    throw .system(errno, "chmod \(path)")
                }
            }
            var times = [timespec(tv_sec: 0, tv_nsec: UTIME_OMIT), Self.time(mtime)]
            guard utimensat(folder, name, &times, AT_SYMLINK_NOFOLLOW) == 0 else {
                throw .system(errno, "cannot set the times of \(path)")
            }
        }
    }

    public func makeFolder(_ path: String, mode: UInt32, mtime: Double) throws(Failure) -> UInt64 {
        try inParent(of: path) { folder, name throws(Failure) in
            guard mkdirat(folder, name, 0o700) == 0 else { throw .system(errno, "cannot make folder \(path)") }
            var times = [timespec(tv_sec: 0, tv_nsec: UTIME_OMIT), Self.time(mtime)]
            _ = utimensat(folder, name, &times, AT_SYMLINK_NOFOLLOW)
            _ = fchmodat(folder, name, Self.permissions(mode), 0)
            return try Self.inode(at: folder, name, path)
        }
    }

    public func makeSymlink(_ path: String, target: String) throws(Failure) -> UInt64 {
        try inParent(of: path) { folder, name throws(Failure) in
            guard symlinkat(target, folder, name) == 0 else { throw .system(errno, "cannot make symlink \(path)") }
            return try Self.inode(at: folder, name, path)
        }
    }

    /// Moves an item; never replaces one (RENAME_NOREPLACE).
    public func rename(_ from: String, to: String) throws(Failure) {
        let (fromFolder, fromName) = try parent(of: from)
        defer { close(fromFolder) }
        try inParent(of: to) { toFolder, toName throws(Failure) in
            guard renameat2(fromFolder, fromName, toFolder, toName, RENAME_NOREPLACE) == 0 else {
                throw .system(errno, "cannot move \(from) to \(to)")
            }
        }
    }

    /// Removes a file, a symlink or a folder with everything in it.
    public func remove(_ path: String) throws(Failure) {
        try inParent(of: path) { folder, name throws(Failure) in try Self.remove(name, in: folder, path) }
    }

    /// A copy of `from`'s content at `to` (a conflict copy); its inode.
    public func copy(_ from: String, to: String) throws(Failure) -> UInt64 {
        try withFile(from, O_RDONLY) { source throws(Failure) in
            var info = stat()
            fstat(source, &info)
            return try inParent(of: to) { folder, name throws(Failure) in
                let copy = openat(
                    folder, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, info.st_mode & 0o777)
                guard copy >= 0 else { throw .system(errno, "cannot create \(to)") }
                defer { close(copy) }
                try Self.copyContent(source, to: copy, length: Int64(info.st_size), to)
                return try Self.inode(copy, to)
            }
        }
    }

    /// Opens a file of the replica (not a symlink), checked to be `inode`
    /// when given.
    public func withFile<T>(_ path: String, _ flags: Int32, inode: UInt64? = nil, _ body: (Int32) throws(Failure) -> T)
        throws(Failure) -> T
    {
        try inParent(of: path) { folder, name throws(Failure) in
            let file = openat(folder, name, flags | O_NOFOLLOW | O_CLOEXEC)
            guard file >= 0 else { throw .system(errno, "cannot open \(path)") }
            defer { close(file) }
            if let inode, try Self.inode(file, path) != inode { throw .system(ESTALE, "\(path) was replaced") }
            return try body(file)
        }
    }

    /// What is at `path` now, without following a symlink.
    /// The target of the symlink at `path` (nil: none there).
    public func linkTarget(_ path: String) -> String? {
        try? inParent(of: path) { folder, name throws(Failure) in
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let length = readlinkat(folder, name, &buffer, buffer.count - 1)
            guard length >= 0 else { throw .system(errno, path) }
            return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    public func status(_ path: String) -> stat? {
        if path.isEmpty {
            var info = stat()
            return lstat(root, &info) == 0 ? info : nil
        }
        return try? inParent(of: path) { folder, name throws(Failure) in
            var info = stat()
            guard fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { throw .system(errno, path) }
            return info
        }
    }

    // MARK: Helpers

    static func shape(_ file: Int32, _ path: String, size: Int64, mtime: Double, mode: UInt32) throws(Failure) {
        guard ftruncate(file, off_t(size)) == 0 else { throw .system(errno, "cannot size \(path)") }
        guard fchmod(file, Self.permissions(mode)) == 0 else { throw .system(errno, "cannot chmod \(path)") }
        try restoreTime(file, mtime, path)
    }

    /// Sets the modification time back after the replica wrote bytes that
    /// did not change the item (a download).
    static func restoreTime(_ file: Int32, _ mtime: Double, _ path: String) throws(Failure) {
        var times = [timespec(tv_sec: 0, tv_nsec: UTIME_OMIT), time(mtime)]
        guard futimens(file, &times) == 0 else { throw .system(errno, "cannot set the times of \(path)") }
    }

    static func time(_ seconds: Double) -> timespec {
        let whole = seconds.rounded(.down)
        return timespec(tv_sec: Int(whole), tv_nsec: min(999_999_999, Int((seconds - whole) * 1e9)))
    }

    static func inode(_ file: Int32, _ path: String) throws(Failure) -> UInt64 {
        var info = stat()
        guard fstat(file, &info) == 0 else { throw .system(errno, "cannot stat \(path)") }
        return UInt64(info.st_ino)
    }

    static func inode(at folder: Int32, _ name: String, _ path: String) throws(Failure) -> UInt64 {
        var info = stat()
        guard fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { throw .system(errno, "no \(path)") }
        return UInt64(info.st_ino)
    }

    /// Copies `length` bytes at the same offsets (copy_file_range: a reflink
    /// where the file system can).
    static func copyContent(
        _ source: Int32, from offset: Int64 = 0, to target: Int32, at targetOffset: Int64 = 0, length: Int64,
        _ path: String
    ) throws(Failure) {
        var input = off_t(offset)
        var output = off_t(targetOffset)
        var left = length
        while left > 0 {
            let copied = copy_file_range(source, &input, target, &output, Int(min(left, 1 << 30)), 0)
            if copied < 0 && errno == EINTR { continue }
            guard copied > 0 else { throw .system(copied < 0 ? errno : EIO, "cannot copy into \(path)") }
            left -= Int64(copied)
        }
    }

    private static func remove(_ name: String, in folder: Int32, _ path: String) throws(Failure) {
        if unlinkat(folder, name, 0) == 0 || errno == ENOENT { return }
        guard errno == EISDIR else { throw .system(errno, "cannot remove \(path)") }
        let child = openat(folder, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard child >= 0 else { throw .system(errno, "cannot open \(path)") }
        guard let stream = fdopendir(child) else {
            close(child)
            throw .system(errno, "cannot list \(path)")
        }
        var names: [String] = []
        while let entry = readdir(stream) {
            let entryName = withUnsafeBytes(of: entry.pointee.d_name) {
                String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
            }
            if entryName != "." && entryName != ".." { names.append(entryName) }
        }
        for entryName in names { try remove(entryName, in: dirfd(stream), path + "/" + entryName) }
        closedir(stream)
        guard unlinkat(folder, name, AT_REMOVEDIR) == 0 || errno == ENOENT else {
            throw .system(errno, "cannot remove folder \(path)")
        }
    }
}
