import CFuse3
import Glibc
import SystemPackage

/// One libfuse low-level session: created with mount options, mounted,
/// served by a multithreaded loop, and unmounted. Also the way to tell the
/// kernel to drop cached data (invalidation).
public final class FuseSession: Sendable {
    // The session pointer is set once in init and only read afterwards;
    // libfuse's own functions are thread-safe for the calls made here.
    nonisolated(unsafe) private let session: OpaquePointer
    private let context: BridgeContext

    /// `options` are mount options as for `-o` (e.g. "default_permissions").
    public init(fileSystem: any FileSystem, options: [String]) throws(Errno) {
        let context = BridgeContext(fileSystem: fileSystem)
        self.context = context
        var arguments = ["scopefs"]
        if !options.isEmpty { arguments += ["-o", options.joined(separator: ",")] }
        var cStrings = arguments.map { strdup($0) }
        var operations = Operations.table()
        let created: OpaquePointer? = cStrings.withUnsafeMutableBufferPointer { argv in
            var args = fuse_args(argc: Int32(argv.count), argv: argv.baseAddress, allocated: 0)
            defer { fuse_opt_free_args(&args) }
            return fuse_session_new(
                &args, &operations, MemoryLayout<fuse_lowlevel_ops>.size,
                Unmanaged.passUnretained(context).toOpaque())
        }
        cStrings.forEach { free($0) }
        guard let created else { throw Errno.invalidArgument }
        session = created
    }

    deinit {
        fuse_session_destroy(session)
    }

    public func mount(at mountpoint: String) throws(Errno) {
        guard fuse_session_mount(session, mountpoint) == 0 else {
            throw Errno(rawValue: errno == 0 ? EIO : errno)
        }
    }

    /// SIGINT, SIGTERM and SIGHUP end the loop (libfuse's handlers).
    public func installSignalHandlers() {
        _ = fuse_set_signal_handlers(session)
    }

    /// Serves requests on up to `maxThreads` threads until unmount or signal.
    public func loop(maxThreads: UInt32, maxIdleThreads: UInt32) -> Int32 {
        guard let config = fuse_loop_cfg_create() else { return -ENOMEM }
        defer { fuse_loop_cfg_destroy(config) }
        fuse_loop_cfg_set_max_threads(config, maxThreads)
        fuse_loop_cfg_set_idle_threads(config, maxIdleThreads)
        // One /dev/fuse descriptor per worker: requests are not funnelled
        // through one shared queue read by every thread.
        fuse_loop_cfg_set_clone_fd(config, 1)
        return fuse_session_loop_mt(session, config)
    }

    public func unmount() {
        fuse_remove_signal_handlers(session)
        fuse_session_unmount(session)
    }

    /// Drops the kernel's cached pages and attributes of `inode`; mapped
    /// pages are unmapped too. Must not be called from a thread serving a
    /// FUSE request: the kernel may be waiting on it (see docs/ARCHITECTURE.md).
    @discardableResult
    public func invalidateInode(_ inode: UInt64) -> Int32 {
        fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(inode), 0, 0)
    }

    /// Drops the kernel's cached directory entry `name` in `parent`.
    @discardableResult
    public func invalidateEntry(parent: UInt64, name: String) -> Int32 {
        name.withCString { cName in
            fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(parent), cName, strlen(cName))
        }
    }
}

/// What the C callbacks get back from `fuse_req_userdata`.
final class BridgeContext: Sendable {
    let fileSystem: any FileSystem

    init(fileSystem: any FileSystem) {
        self.fileSystem = fileSystem
    }
}
