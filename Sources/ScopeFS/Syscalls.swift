import CSystemShims
import Glibc
import HostText
import Policy
import Synchronization
import SystemPackage

/// One wrapper per system call used on the backing store: retried on EINTR
/// (never `close`), failures as `Errno`, paths relative to directory
/// descriptors with O_NOFOLLOW wherever a swapped symlink could lead out
/// (SPEC S33).
enum Sys {
    // Constants that do not import into Swift.
    static let pathOnly: Int32 = scopefs_o_path
    static let direct: Int32 = scopefs_o_direct
    static let emptyPath: Int32 = scopefs_at_empty_path
    static let noFollow: Int32 = AT_SYMLINK_NOFOLLOW
    static let removeDirectory: Int32 = AT_REMOVEDIR
    static let renameNoReplace: UInt32 = 1  // RENAME_NOREPLACE
    static let renameExchange: UInt32 = 2  // RENAME_EXCHANGE

    // Names and paths go to the kernel through `withHostCString` (their
    // host bytes, SPEC S33a: see `HostName`), in every
    // wrapper: passing a String where C wants a pointer copies it into a
    // new array every call, and these calls run on every lookup, create,
    // unlink and write (the kernel's security.capability query).

    @inline(__always)
    static func retrying<T: BinaryInteger>(_ body: () -> T) throws(Errno) -> T {
        while true {
            let result = body()
            if result >= 0 { return result }
            if errno != EINTR { throw Errno(rawValue: errno) }
        }
    }

    /// The corresponding C function is `openat`.
    static func openAt(_ directory: Int32, _ name: String, _ flags: Int32, _ mode: mode_t = 0) throws(Errno) -> Int32 {
        try retrying { name.withHostCString { openat(directory, $0, flags | O_CLOEXEC, mode) } }
    }

    /// The corresponding C function is `fstatat` (never following a final symlink).
    static func statAt(_ directory: Int32, _ name: String) throws(Errno) -> stat {
        var info = Glibc.stat()
        _ = try retrying { name.withHostCString { fstatat(directory, $0, &info, noFollow) } }
        return info
    }

    /// The corresponding C function is `fstat`.
    static func stat(_ descriptor: Int32) throws(Errno) -> stat {
        var info = Glibc.stat()
        _ = try retrying { fstat(descriptor, &info) }
        return info
    }

    static func close(_ descriptor: Int32) {
        _ = Glibc.close(descriptor)
    }

    static func mkdirAt(_ directory: Int32, _ name: String, _ mode: mode_t) throws(Errno) {
        _ = try retrying { name.withHostCString { mkdirat(directory, $0, mode) } }
    }

    static func mknodAt(_ directory: Int32, _ name: String, _ mode: mode_t, _ device: dev_t) throws(Errno) {
        _ = try retrying { name.withHostCString { mknodat(directory, $0, mode, device) } }
    }

    static func symlinkAt(_ target: String, _ directory: Int32, _ name: String) throws(Errno) {
        _ = try retrying {
            target.withHostCString { target in name.withHostCString { symlinkat(target, directory, $0) } }
        }
    }

    static func linkAt(_ fromDirectory: Int32, _ fromName: String, _ toDirectory: Int32, _ toName: String) throws(Errno)
    {
        _ = try retrying {
            fromName.withHostCString { from in
                toName.withHostCString { linkat(fromDirectory, from, toDirectory, $0, 0) }
            }
        }
    }

    /// The corresponding system call is `faccessat2` (flags: AT_EMPTY_PATH,
    /// AT_SYMLINK_NOFOLLOW), checked with the daemon's real ids.
    static func accessAt(_ directory: Int32, _ name: String, _ mask: Int32, _ flags: Int32) throws(Errno) {
        _ = try retrying { name.withHostCString { faccessat(directory, $0, mask, flags) } }
    }

    static func unlinkAt(_ directory: Int32, _ name: String, _ flags: Int32) throws(Errno) {
        _ = try retrying { name.withHostCString { unlinkat(directory, $0, flags) } }
    }

    /// The corresponding system call is `renameat2` (flags: RENAME_NOREPLACE, RENAME_EXCHANGE).
    static func renameAt(_ from: Int32, _ fromName: String, _ to: Int32, _ toName: String, _ flags: UInt32)
        throws(Errno)
    {
        _ = try retrying {
            fromName.withHostCString { fromName in toName.withHostCString { renameat2(from, fromName, to, $0, flags) } }
        }
    }

    static func readlinkAt(_ directory: Int32, _ name: String) throws(Errno) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = try retrying { name.withHostCString { readlinkat(directory, $0, &buffer, buffer.count - 1) } }
        return String(hostBytes: buffer[..<count].lazy.map { UInt8(bitPattern: $0) })
    }

    /// Where the kernel says a descriptor's file is now: the link
    /// `/proc/self/fd/N`, read into a stack buffer, not a zeroed array (the
    /// location check runs it on the request path, once a second per folder
    /// in use). The
    /// corresponding C function is `readlink`.
    static func location(of descriptor: Int32) throws(Errno) -> String {
        try withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(PATH_MAX)) { buffer throws(Errno) in
            let path = procPath(descriptor)
            let count = try retrying { path.withHostCString { readlink($0, buffer.baseAddress!, buffer.count) } }
            return UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[..<count]).withMemoryRebound(
                to: UInt8.self
            ) { String(hostBytes: $0) }
        }
    }

    /// Changes owner without following a symlink: `fchownat(fd, name, ..., AT_SYMLINK_NOFOLLOW)`.
    static func chownAt(_ directory: Int32, _ name: String, _ uid: uid_t, _ gid: gid_t) throws(Errno) {
        let flags = noFollow | (name.isEmpty ? emptyPath : 0)
        _ = try retrying { name.withHostCString { fchownat(directory, $0, uid, gid, flags) } }
    }

    /// The path through which a descriptor's own file is named again
    /// (chmod, utimens, truncate and xattrs have no O_PATH variant).
    static func procPath(_ descriptor: Int32, _ name: String? = nil) -> String {
        name.map { "/proc/self/fd/\(descriptor)/\($0)" } ?? "/proc/self/fd/\(descriptor)"
    }

    static func chmod(_ path: String, _ mode: mode_t) throws(Errno) {
        _ = try retrying { path.withHostCString { Glibc.chmod($0, mode) } }
    }

    /// chmod of an O_PATH descriptor's own file: fchmodat2 with
    /// AT_EMPTY_PATH, else (kernels before 6.6) through /proc/self/fd.
    static func chmod(_ descriptor: Int32, _ mode: mode_t) throws(Errno) {
        do {
            _ = try retrying { scopefs_fchmodat2(descriptor, "", UInt32(mode), emptyPath) }
        } catch .noFunction, .invalidArgument {
            try chmod(procPath(descriptor), mode)
        }
    }

    /// utimensat of an O_PATH descriptor's own file (AT_EMPTY_PATH, Linux
    /// 5.8+), else through /proc/self/fd.
    static func utimens(_ descriptor: Int32, _ times: [timespec]) throws(Errno) {
        do {
            _ = try retrying { utimensat(descriptor, "", times, emptyPath) }
        } catch .invalidArgument {
            try utimens(AT_FDCWD, procPath(descriptor), times, flags: 0)
        }
    }

    static func truncate(_ path: String, _ size: Int64) throws(Errno) {
        _ = try retrying { path.withHostCString { Glibc.truncate($0, off_t(size)) } }
    }

    static func ftruncate(_ descriptor: Int32, _ size: Int64) throws(Errno) {
        _ = try retrying { Glibc.ftruncate(descriptor, off_t(size)) }
    }

    static func utimens(_ directory: Int32, _ name: String, _ times: [timespec], flags: Int32) throws(Errno) {
        _ = try retrying { name.withHostCString { utimensat(directory, $0, times, flags) } }
    }

    static func fsync(_ descriptor: Int32, dataOnly: Bool) throws(Errno) {
        _ = try retrying { dataOnly ? fdatasync(descriptor) : Glibc.fsync(descriptor) }
    }

    /// The corresponding C function is `lseek`.
    static func seek(_ descriptor: Int32, _ offset: Int64, _ whence: Int32) throws(Errno) -> Int64 {
        Int64(try retrying { Glibc.lseek(descriptor, off_t(offset), whence) })
    }

    static func fallocate(_ descriptor: Int32, _ mode: Int32, _ offset: Int64, _ length: Int64) throws(Errno) {
        _ = try retrying { CSystemShims.fallocate(descriptor, mode, off_t(offset), off_t(length)) }
    }

    static func copyFileRange(_ from: Int32, _ fromOffset: Int64, _ to: Int32, _ toOffset: Int64, _ length: Int)
        throws(Errno) -> Int
    {
        var inOffset = off_t(fromOffset)
        var outOffset = off_t(toOffset)
        return try retrying { copy_file_range(from, &inOffset, to, &outOffset, length, 0) }
    }

    static func statvfs(_ descriptor: Int32) throws(Errno) -> Glibc.statvfs {
        var info = Glibc.statvfs()
        _ = try retrying { fstatvfs(descriptor, &info) }
        return info
    }

    static func pread(_ descriptor: Int32, _ size: Int, _ offset: Int64) throws(Errno) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: size)
        let count = try retrying { Glibc.pread(descriptor, &buffer, size, off_t(offset)) }
        buffer.removeSubrange(count...)
        return buffer
    }

    // MARK: Extended attributes
    //
    // A file is named by its parent's descriptor and its name, and a final
    // symlink is not followed, so that no symlink in the backing store is
    // followed. A folder is named by its own O_PATH descriptor (as ".").
    // The *xattrat calls (Linux 6.13) take the descriptor itself; older
    // kernels get the descriptor's /proc/self/fd path, with the l* calls
    // for an entry and the plain calls for a folder (that path is a magic
    // link to the descriptor's folder, which the plain calls follow; the
    // l* calls would act on the link itself and refuse user.* names with
    // EPERM; it cannot be swapped, so following it leads nowhere else).
    // The /proc walk costs about 3 µs a call on this machine's kernel
    // (`ls -l` asks every file for its ACL; docs/PERFORMANCE.md).

    /// Where an extended attribute call is aimed.
    enum XattrPath {
        /// The entry `name` of the folder open as `parent`: a final symlink is not followed.
        case entry(parent: Int32, name: String)
        /// A folder through its own O_PATH descriptor.
        case folder(Int32)

        /// `atCall(dirfd, path, at_flags)` where the kernel has the *xattrat
        /// calls, else `pathCall(path, follow)` with the /proc path.
        fileprivate func call(
            _ atCall: (Int32, UnsafePointer<CChar>, UInt32) -> Int,
            _ pathCall: (UnsafePointer<CChar>, _ follow: Bool) -> Int
        ) -> Int {
            if !Sys.xattrAtMissing.load(ordering: .relaxed) {
                let result =
                    switch self {
                    case .entry(let parent, let name): name.withHostCString { atCall(parent, $0, UInt32(Sys.noFollow)) }
                    case .folder(let folder): atCall(folder, ".", 0)
                    }
                guard result == -1 && errno == ENOSYS else { return result }
                Sys.xattrAtMissing.store(true, ordering: .relaxed)
            }
            return switch self {
            case .entry(let parent, let name): Sys.procPath(parent, name).withHostCString { pathCall($0, false) }
            case .folder(let folder): Sys.procPath(folder).withHostCString { pathCall($0, true) }
            }
        }
    }

    /// Set once a *xattrat call answered ENOSYS (a kernel before 6.13);
    /// tests set it to try the /proc paths.
    static let xattrAtMissing = Atomic<Bool>(false)

    /// The corresponding C functions are `getxattrat`, `lgetxattr` and `getxattr`.
    static func getxattr(_ path: XattrPath, _ name: String) throws(Errno) -> [UInt8] {
        try readXattr { buffer, size in
            name.withHostCString { name in
                path.call(
                    { scopefs_getxattrat($0, $1, $2, name, buffer, size) },
                    { $1 ? CSystemShims.getxattr($0, name, buffer, size) : lgetxattr($0, name, buffer, size) })
            }
        }
    }

    /// Through a descriptor of the file itself (an open file, not O_PATH):
    /// no /proc path for the kernel to walk.
    static func getxattr(_ descriptor: Int32, _ name: String) throws(Errno) -> [UInt8] {
        try readXattr { buffer, size in name.withHostCString { fgetxattr(descriptor, $0, buffer, size) } }
    }

    /// Asks for the size, then reads; again if the value (or the list of
    /// names) grew in between.
    private static func readXattr(_ call: (UnsafeMutableRawPointer?, Int) -> Int) throws(Errno) -> [UInt8] {
        while true {
            let size = try retrying { call(nil, 0) }
            var buffer = [UInt8](repeating: 0, count: size)
            let count = buffer.withUnsafeMutableBytes { call($0.baseAddress, size) }
            if count >= 0 {
                buffer.removeLast(size - count)  // in place: no second array
                return buffer
            }
            if errno != ERANGE && errno != EINTR { throw Errno(rawValue: errno) }
        }
    }

    /// The corresponding C functions are `listxattrat`, `llistxattr` and `listxattr`.
    static func listxattr(_ path: XattrPath) throws(Errno) -> [UInt8] {
        try readXattr { buffer, size in
            let names = buffer?.assumingMemoryBound(to: CChar.self)
            return path.call(
                { scopefs_listxattrat($0, $1, $2, names, size) },
                { $1 ? CSystemShims.listxattr($0, names, size) : llistxattr($0, names, size) })
        }
    }

    /// The corresponding C functions are `setxattrat`, `lsetxattr` and `setxattr`.
    static func setxattr(_ path: XattrPath, _ name: String, _ value: UnsafeRawBufferPointer, _ flags: Int32)
        throws(Errno)
    {
        let (bytes, count) = (value.baseAddress, value.count)
        _ = try retrying {
            name.withHostCString { name in
                path.call(
                    { Int(scopefs_setxattrat($0, $1, $2, name, bytes, count, flags)) },
                    {
                        Int(
                            $1
                                ? CSystemShims.setxattr($0, name, bytes, count, flags)
                                : lsetxattr($0, name, bytes, count, flags))
                    })
            }
        }
    }

    /// The corresponding C functions are `removexattrat`, `lremovexattr` and `removexattr`.
    static func removexattr(_ path: XattrPath, _ name: String) throws(Errno) {
        _ = try retrying {
            name.withHostCString { name in
                path.call(
                    { Int(scopefs_removexattrat($0, $1, $2, name)) },
                    { Int($1 ? CSystemShims.removexattr($0, name) : lremovexattr($0, name)) })
            }
        }
    }
}

extension stat {
    var isDirectory: Bool { (st_mode & S_IFMT) == S_IFDIR }
    var isSymlink: Bool { (st_mode & S_IFMT) == S_IFLNK }
    var isRegular: Bool { (st_mode & S_IFMT) == S_IFREG }
}
