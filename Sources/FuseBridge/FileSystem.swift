import Glibc
import SystemPackage

/// The operations a file system implements, named after the FUSE requests
/// and speaking Swift types only. The bridge turns each request into one
/// call and the call's result (or thrown `Errno`) into exactly one reply.
public protocol FileSystem: AnyObject, Sendable {
    func initialize(_ connection: inout ConnectionSettings)

    func lookup(_ request: Request, parent: UInt64, name: String) throws(Errno) -> Entry
    func forget(_ inode: UInt64, count: UInt64)
    func getattr(_ request: Request, inode: UInt64, handle: UInt64?) throws(Errno) -> Attributes
    func setattr(_ request: Request, inode: UInt64, changes: AttributeChanges, handle: UInt64?)
        throws(Errno) -> Attributes
    func readlink(_ request: Request, inode: UInt64) throws(Errno) -> String
    /// access(2) and chdir's check, when the kernel checks no permission
    /// bits itself (no `default_permissions`); `mask` is R_OK, W_OK, X_OK
    /// or F_OK as access(2) has them.
    func access(_ request: Request, inode: UInt64, mask: Int32) throws(Errno)

    func mknod(_ request: Request, parent: UInt64, name: String, mode: mode_t, device: dev_t) throws(Errno) -> Entry
    func mkdir(_ request: Request, parent: UInt64, name: String, mode: mode_t) throws(Errno) -> Entry
    func symlink(_ request: Request, target: String, parent: UInt64, name: String) throws(Errno) -> Entry
    func link(_ request: Request, inode: UInt64, newParent: UInt64, newName: String) throws(Errno) -> Entry
    func unlink(_ request: Request, parent: UInt64, name: String) throws(Errno)
    func rmdir(_ request: Request, parent: UInt64, name: String) throws(Errno)
    func rename(_ request: Request, parent: UInt64, name: String, newParent: UInt64, newName: String, flags: UInt32)
        throws(Errno)

    func open(_ request: Request, inode: UInt64, flags: Int32) throws(Errno) -> OpenFile
    func create(_ request: Request, parent: UInt64, name: String, mode: mode_t, flags: Int32)
        throws(Errno) -> (Entry, OpenFile)
    func read(_ request: Request, inode: UInt64, handle: UInt64, offset: Int64, size: Int) throws(Errno) -> ReadData
    /// The descriptor a write request's data is copied into (zero-copy).
    func writeTarget(_ request: Request, inode: UInt64, handle: UInt64) throws(Errno) -> Int32
    /// The write a `writeTarget` answered for is on disk, or failed: heard
    /// by a file system that tracks changes in progress (an extension's
    /// replica uploads no snapshot while one is).
    func writeFinished(inode: UInt64, handle: UInt64)
    func release(inode: UInt64, handle: UInt64)
    func fsync(_ request: Request, inode: UInt64, handle: UInt64, dataOnly: Bool) throws(Errno)
    func fallocate(_ request: Request, inode: UInt64, handle: UInt64, mode: Int32, offset: Int64, length: Int64)
        throws(Errno)
    func copyFileRange(
        _ request: Request, from: (inode: UInt64, handle: UInt64, offset: Int64),
        to: (inode: UInt64, handle: UInt64, offset: Int64), length: Int, flags: Int32
    ) throws(Errno) -> Int
    /// `lseek` with SEEK_DATA or SEEK_HOLE (the kernel answers the other
    /// whences itself): where the next data or hole at or after `offset` is.
    func lseek(_ request: Request, inode: UInt64, handle: UInt64, offset: Int64, whence: Int32) throws(Errno) -> Int64

    func opendir(_ request: Request, inode: UInt64) throws(Errno) -> OpenDirectory
    /// Fills `listing` from `offset`; `listing.isPlus` asks for full entries (readdirplus).
    func readdir(_ request: Request, inode: UInt64, handle: UInt64, offset: Int64, listing: inout DirectoryListing)
        throws(Errno)
    func releasedir(inode: UInt64, handle: UInt64)
    func fsyncdir(_ request: Request, inode: UInt64, handle: UInt64, dataOnly: Bool) throws(Errno)

    func statfs(_ request: Request, inode: UInt64) throws(Errno) -> statvfs

    func setxattr(_ request: Request, inode: UInt64, name: String, value: UnsafeRawBufferPointer, flags: Int32)
        throws(Errno)
    /// Returns the value; the bridge answers size probes and ERANGE itself.
    /// `size` is the caller's buffer size (0 for a probe), for attributes
    /// whose reading has an effect.
    func getxattr(_ request: Request, inode: UInt64, name: String, size: Int) throws(Errno) -> [UInt8]
    /// Returns the NUL-separated list of names.
    func listxattr(_ request: Request, inode: UInt64) throws(Errno) -> [UInt8]
    func removexattr(_ request: Request, inode: UInt64, name: String) throws(Errno)
}

/// The caller of one request, as the kernel reports it.
public struct Request: Sendable {
    /// The calling *thread's* id (not the process id).
    public var threadID: Int32
    public var uid: uid_t
    public var gid: gid_t
    public var umask: mode_t
    /// Set on a write, a truncating setattr or an O_TRUNC open by a caller
    /// without CAP_FSETID: the file system clears the file's setuid and
    /// setgid bits as the kernel would have (FUSE_HANDLE_KILLPRIV_V2, see
    /// `SetIDClearing`).
    public var clearsSetIDBits: Bool
    /// The libfuse request's address, for what the kernel does not send
    /// with it (`supplementaryGroups`); valid only while it is handled.
    let libfuseRequest: UInt

    public init(
        threadID: Int32, uid: uid_t, gid: gid_t, umask: mode_t, clearsSetIDBits: Bool = false,
        libfuseRequest: OpaquePointer? = nil
    ) {
        self.threadID = threadID
        self.uid = uid
        self.gid = gid
        self.umask = umask
        self.clearsSetIDBits = clearsSetIDBits
        self.libfuseRequest = UInt(bitPattern: libfuseRequest)
    }

    /// Whether the caller is in group `group`: its own group, or one of its
    /// supplementary groups (read from /proc only when asked).
    public func isMember(of group: gid_t) -> Bool {
        group == gid || supplementaryGroups().contains(group)
    }
}

/// Attributes with how long the kernel may cache them.
public struct Attributes {
    public var stat: stat
    public var timeout: Double

    public init(stat: stat, timeout: Double) {
        self.stat = stat
        self.timeout = timeout
    }
}

/// A lookup's answer: the inode the kernel will refer to, its attributes,
/// and cache lifetimes. Each returned entry adds one to the inode's lookup
/// count, which the kernel later returns through `forget`.
public struct Entry {
    public var inode: UInt64
    public var attributes: stat
    public var attributeTimeout: Double
    public var entryTimeout: Double

    public init(inode: UInt64, attributes: stat, attributeTimeout: Double, entryTimeout: Double) {
        self.inode = inode
        self.attributes = attributes
        self.attributeTimeout = attributeTimeout
        self.entryTimeout = entryTimeout
    }

    /// A miss the kernel may cache for `timeout` seconds (a negative
    /// entry: inode 0); it takes no lookup count.
    public static func negative(timeout: Double) -> Entry {
        Entry(inode: 0, attributes: stat(), attributeTimeout: 0, entryTimeout: timeout)
    }
}

public struct OpenFile: Sendable {
    public var handle: UInt64
    /// Keep the page cache from earlier opens (the file did not change).
    public var keepCache: Bool
    public var directIO: Bool
    /// Whether the kernel may read and write the file without the daemon
    /// (FUSE passthrough, where the session has it); nil: never.
    public var passthrough: PassthroughOffer?

    public init(handle: UInt64, keepCache: Bool = false, directIO: Bool = false, passthrough: PassthroughOffer? = nil) {
        self.handle = handle
        self.keepCache = keepCache
        self.directIO = directIO
        self.passthrough = passthrough
    }
}

public struct OpenDirectory: Sendable {
    public var handle: UInt64
    /// The kernel may keep the folder's listing in its page cache and serve
    /// later readdirs from it (FOPEN_CACHE_DIR and FOPEN_KEEP_CACHE): only
    /// where every change to the listing is pushed to it as an invalidation.
    public var cachesListing: Bool

    public init(handle: UInt64, cachesListing: Bool = false) {
        self.handle = handle
        self.cachesListing = cachesListing
    }
}

public enum ReadData {
    /// `size` bytes of `descriptor` at `offset`, sent without a copy.
    case descriptor(Int32, offset: Int64, size: Int)
    case bytes([UInt8])
}

/// Which attributes a setattr request changes.
public struct AttributeChanges {
    public var mode: mode_t?
    public var uid: uid_t?
    public var gid: gid_t?
    public var size: Int64?
    /// nil: leave; .now: current time; .time: the given time.
    public var accessTime: TimeChange?
    public var modificationTime: TimeChange?

    public enum TimeChange {
        case now
        case time(timespec)
    }

    // UTIME_NOW and UTIME_OMIT do not import into Swift.
    private static let nowTime = (1 << 30) - 1
    private static let omitTime = (1 << 30) - 2

    /// The access and modification times as `utimensat(2)` takes them:
    /// UTIME_OMIT for a time left alone, UTIME_NOW for "now".
    public var utimensTimes: [timespec] {
        func spec(_ change: TimeChange?) -> timespec {
            switch change {
            case nil: timespec(tv_sec: 0, tv_nsec: Self.omitTime)
            case .now: timespec(tv_sec: 0, tv_nsec: Self.nowTime)
            case .time(let time): time
            }
        }
        return [spec(accessTime), spec(modificationTime)]
    }

    public init() {}
}

/// Negotiated at mount time (the `init` request).
public struct ConnectionSettings {
    public var maxWrite: UInt32
    public var maxReadahead: UInt32
    public var wantSplice: Bool
    public var wantReaddirplus: Bool
    /// The file system clears set-id bits itself when `Request` says so,
    /// and the kernel may skip its `security.capability` check before
    /// most writes (FUSE_HANDLE_KILLPRIV_V2, where the kernel offers it).
    public var clearsSetIDBits: Bool
    /// How many background requests (RELEASE above all) the kernel keeps
    /// in flight at once; 0 keeps the kernel's default of 12.
    public var maxBackground: UInt32 = 0
    /// A regular file on the file system whose files the file system will
    /// offer for FUSE passthrough (`OpenFile.passthrough`): the bridge
    /// registers it once after INIT to learn whether the kernel takes them,
    /// and closes it. Nil: no passthrough.
    public var passthroughProbe: Int32?
    /// How deep that file system stacks on others, plus one (the kernel's
    /// `max_stack_depth`, 1 or 2): 2 for an overlay or a FUSE file system.
    public var passthroughStackDepth: UInt32 = 1

    public init(
        maxWrite: UInt32, maxReadahead: UInt32, wantSplice: Bool, wantReaddirplus: Bool, clearsSetIDBits: Bool = false
    ) {
        self.maxWrite = maxWrite
        self.maxReadahead = maxReadahead
        self.wantSplice = wantSplice
        self.wantReaddirplus = wantReaddirplus
        self.clearsSetIDBits = clearsSetIDBits
    }
}

extension FileSystem {
    /// Nothing to track by default.
    public func writeFinished(inode: UInt64, handle: UInt64) {}
}

extension FileSystem {
    /// A file system that checks nothing more than the kernel: ENOSYS, and
    /// the kernel takes every access for granted from then on.
    public func access(_ request: Request, inode: UInt64, mask: Int32) throws(Errno) {
        throw .noFunction
    }
}

extension FileSystem {
    /// A file system that keeps no holes of its own: ENOSYS, and the kernel
    /// takes every file for data from then on (its generic answer).
    public func lseek(_ request: Request, inode: UInt64, handle: UInt64, offset: Int64, whence: Int32)
        throws(Errno) -> Int64
    {
        throw .noFunction
    }
}
