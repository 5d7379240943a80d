import CFuse3
import Dispatch
import Glibc
import HostText
import Synchronization
import SystemPackage

/// One libfuse low-level session: created with mount options, mounted,
/// served by a multithreaded loop, and unmounted. Also the way to tell the
/// kernel to drop cached data (invalidation).
public final class FuseSession: Sendable {
    // The session pointer is set once in init and only read afterwards;
    // libfuse's own functions are thread-safe for the calls made here.
    nonisolated(unsafe) private let session: OpaquePointer
    private let context: BridgeContext
    private let loopThread = Atomic<UInt>(0)
    private let stopped = Atomic<Bool>(false)

    /// `options` are mount options as for `-o` (e.g. "default_permissions").
    /// `alias`: the app account that acts as the owner (`OwnerAlias`);
    /// `admittedUsers`: the only uids served (nil: whoever the kernel lets in);
    /// `ringThreads`: threads per kernel queue for FUSE over io_uring (0:
    /// /dev/fuse only; `FuseRing`).
    public init(
        fileSystem: any FileSystem, options: [String], alias: OwnerAlias? = nil, admittedUsers: AdmittedUsers? = nil,
        ringThreads: UInt32 = 0
    ) throws(Errno) {
        let context = BridgeContext(
            fileSystem: fileSystem, alias: alias, admittedUsers: admittedUsers, ringThreads: ringThreads)
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
        context.session.store(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(created))), ordering: .releasing)
    }

    deinit {
        // No invalidation or backing-file ioctl may reach a destroyed session.
        context.session.store(0, ordering: .releasing)
        context.passthrough.device.store(-1, ordering: .releasing)
        context.invalidations.sync {}
        context.ring.stop()
        exitWatch.withLock { $0?.source.cancel() }
        _ = Self.signalledSession.compareExchange(
            expected: UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(session))), desired: 0,
            ordering: .acquiringAndReleasing)
        fuse_session_destroy(session)
    }

    public func mount(at mountpoint: String) throws(Errno) {
        guard fuse_session_mount(session, mountpoint) == 0 else {
            throw Errno(rawValue: errno == 0 ? EIO : errno)
        }
        // Same descriptor, read and written through the bridge's hooks.
        var io = SetIDClearing.io
        let installed = fuse_session_custom_io(session, &io, fuse_session_fd(session))
        guard installed == 0 else {
            fuse_session_unmount(session)
            throw Errno(rawValue: -installed)
        }
        // The backing-file ioctls go to the session's own descriptor: the
        // workers' clones of it come and go with the workers.
        context.passthrough.device.store(fuse_session_fd(session), ordering: .releasing)
    }

    /// Whether the kernel reads and writes the files the file system
    /// offers for it itself (FUSE passthrough, `PassthroughFiles`).
    public var passthrough: PassthroughReport { context.passthrough.report }

    /// Whether requests come over io_uring, and how many did (`FuseRing`).
    public var ring: FuseRingReport { context.ring.report }

    /// SIGINT, SIGTERM and SIGHUP end the loop (libfuse's handlers).
    public func installSignalHandlers() {
        _ = fuse_set_signal_handlers(session)
        // libfuse's handler only marks the session exited, on whichever
        // thread took the signal; the loop's thread sees the mark only when
        // it is interrupted itself, and a mark made before the loop starts
        // may not be seen at all. `scopefs portal` took over 30 s to end on
        // a SIGHUP sent as it came up, beside a loaded suite (twice in a
        // full run). So the signal is also remembered here, and the handler
        // wakes a watch (a byte down a pipe, which a handler may write)
        // that ends the loop, whoever took the signal and whenever. The
        // watch sleeps until then: no wake-ups while nothing is signalled.
        Self.signalled.store(0, ordering: .relaxed)
        Self.signalledSession.store(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(session))), ordering: .releasing)
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)  // a full pipe never blocks the handler
        }
        Self.wakePipe.store(ends[1], ordering: .releasing)
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { number in
            FuseSession.signalled.store(number, ordering: .releasing)
            let pointer = FuseSession.signalledSession.load(ordering: .acquiring)
            if pointer != 0, let session = OpaquePointer(bitPattern: pointer) { fuse_session_exit(session) }
            var byte: UInt8 = 1
            let saved = errno  // a handler leaves errno as it found it
            _ = write(FuseSession.wakePipe.load(ordering: .acquiring), &byte, 1)
            errno = saved
        }
        sigemptyset(&action.sa_mask)
        for number in [SIGTERM, SIGINT, SIGHUP] { sigaction(number, &action, nil) }
        let watch = DispatchSource.makeReadSource(fileDescriptor: ends[0], queue: .global(qos: .utility))
        watch.setEventHandler { [weak self] in
            var drained = [UInt8](repeating: 0, count: 64)
            while read(ends[0], &drained, drained.count) > 0 {}
            self?.endLoopWhenSignalled()
        }
        watch.setCancelHandler {
            close(ends[0])
            close(Self.wakePipe.exchange(-1, ordering: .acquiringAndReleasing))
        }
        watch.resume()
        exitWatch.withLock { $0 = ExitWatch(source: watch) }
    }

    /// The last of SIGTERM, SIGINT and SIGHUP the process took (0: none),
    /// and the session its handler ends; set by the handler, so atomics.
    private static let signalled = Atomic<Int32>(0)
    private static let signalledSession = Atomic<UInt>(0)
    /// The write end of the watch's pipe (-1: none).
    private static let wakePipe = Atomic<Int32>(-1)

    /// Ends the loop after a signal: marks the session exited and wakes
    /// the loop's thread, again every 100 ms until the loop has ended, for
    /// a wake-up can come just before the thread starts to wait (at most
    /// 10 s: by then the loop has ended, or never began).
    private func endLoopWhenSignalled(attempt: Int = 0) {
        guard Self.signalled.load(ordering: .acquiring) != 0 || fuse_session_exited(session) != 0 else { return }
        fuse_session_exit(session)
        let thread = loopThread.load(ordering: .acquiring)
        if thread != 0 { pthread_kill(pthread_t(thread), Self.wakeSignal) }
        guard attempt < 100, thread != 0 || loopBegan.load(ordering: .acquiring) == false else { return }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + 0.1) { [weak self] in
            self?.endLoopWhenSignalled(attempt: attempt + 1)
        }
    }

    /// A dispatch source is used from its own queue and cancelled once, under the lock.
    private struct ExitWatch: @unchecked Sendable { let source: any DispatchSourceRead }
    private let exitWatch = Mutex<ExitWatch?>(nil)
    /// Whether `loop` was entered: before it, a signal's watch keeps
    /// waking until the loop sees the signal at its start.
    private let loopBegan = Atomic<Bool>(false)

    /// Serves requests on up to `maxThreads` threads until unmount, signal
    /// or `stop()`.
    public func loop(maxThreads: UInt32, maxIdleThreads: UInt32) -> Int32 {
        Self.installWakeHandler
        loopThread.store(UInt(pthread_self()), ordering: .releasing)
        loopBegan.store(true, ordering: .releasing)
        defer { loopThread.store(0, ordering: .releasing) }
        // Asked to end before the loop began: it is not begun.
        if Self.signalled.load(ordering: .acquiring) != 0 { return 0 }
        guard let config = fuse_loop_cfg_create() else { return -ENOMEM }
        defer { fuse_loop_cfg_destroy(config) }
        fuse_loop_cfg_set_max_threads(config, maxThreads)
        fuse_loop_cfg_set_idle_threads(config, maxIdleThreads)
        // One /dev/fuse descriptor per worker: requests are not funnelled
        // through one shared queue read by every thread.
        fuse_loop_cfg_set_clone_fd(config, 1)
        return fuse_session_loop_mt(session, config)
    }

    /// Ends the loop from another thread while the kernel still holds the
    /// connection (another mount namespace keeps a copy of the mount, so no
    /// unmount reaches us). The loop's thread sleeps in `sem_wait` until the
    /// session is marked exited and a signal interrupts it; it then cancels
    /// the workers blocked in `read`. The signal's handler does nothing, so
    /// a wake-up that comes late (the loop ended on its own meanwhile) is
    /// harmless.
    public func stop() {
        stopped.store(true, ordering: .releasing)
        fuse_session_exit(session)
        let thread = loopThread.load(ordering: .acquiring)
        if thread != 0 { pthread_kill(pthread_t(thread), Self.wakeSignal) }
        context.ring.stop()
    }

    private static let wakeSignal = SIGUSR2

    /// A handler that does nothing, installed without SA_RESTART so that
    /// the signal interrupts `sem_wait`.
    private static let installWakeHandler: Void = {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in }
        sigemptyset(&action.sa_mask)
        sigaction(wakeSignal, &action, nil)
    }()

    /// Unmounts the mountpoint unless `stop()` ended the session: then it is
    /// gone from this namespace already, and whatever is mounted there now
    /// is not ours.
    public func unmount() {
        Self.signalledSession.store(0, ordering: .releasing)
        exitWatch.withLock { watch in
            watch?.source.cancel()
            watch = nil
        }
        fuse_remove_signal_handlers(session)
        if !stopped.load(ordering: .acquiring) { fuse_session_unmount(session) }
        // The unmount tore the kernel's queues down: the ring's threads end.
        context.ring.stop()
    }

    /// Drops the kernel's cached pages and attributes of `inode`; mapped
    /// pages are unmapped too. Must not be called from a thread serving a
    /// FUSE request: the kernel may be waiting on it (docs/DECISIONS.md, decision 3).
    /// With `pages` false only the attributes go.
    @discardableResult
    public func invalidateInode(_ inode: UInt64, pages: Bool = true) -> Int32 {
        fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(inode), pages ? 0 : -1, 0)
    }

    /// Sends every invalidation of `invalidation` (see `invalidateInode`
    /// for the thread it may run on).
    public func invalidate(_ invalidation: CacheInvalidation) {
        for inode in invalidation.inodes { invalidateInode(inode) }
        for inode in invalidation.attributes { invalidateInode(inode, pages: false) }
        for entry in invalidation.entries { invalidateEntry(parent: entry.parent, name: entry.name) }
    }

    /// Asks the kernel to drop the nodes `inodes` where nothing uses them
    /// (FUSE_NOTIFY_PRUNE): it sends FORGET for each one it drops, and keeps
    /// any that is open, a current directory or a folder with cached
    /// children. False when the kernel has no such message (before Linux
    /// 6.16): then only `invalidateEntry` can make it forget. Takes no
    /// inode lock in the kernel; still, call it from a thread that serves
    /// no FUSE request.
    public func prune(_ inodes: [UInt64]) -> Bool {
        let device = fuse_session_fd(session)
        guard device >= 0 else { return true }
        return inodes.withUnsafeBufferPointer { numbers in
            // The kernel copies node ids in batches of 512: one message each.
            var start = 0
            while start < numbers.count {
                let count = min(Self.pruneBatch, numbers.count - start)
                let result = scopefs_notify_prune(device, numbers.baseAddress! + start, UInt32(count))
                if result == -EINVAL { return false }
                start += count
            }
            return true
        }
    }

    /// Node ids per prune message.
    public static let pruneBatch = 512

    /// Drops the kernel's cached directory entry `name` in `parent` (by its
    /// host bytes, SPEC S33a: the kernel caches the name it was asked for).
    @discardableResult
    public func invalidateEntry(parent: UInt64, name: String) -> Int32 {
        name.withHostCString { cName in
            fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(parent), cName, strlen(cName))
        }
    }
}

/// What the C callbacks get back from `fuse_req_userdata`.
final class BridgeContext: Sendable {
    let fileSystem: any FileSystem
    let alias: OwnerAlias?
    let admittedUsers: AdmittedUsers?
    let wire: WireState
    let passthrough = PassthroughFiles()
    /// FUSE over io_uring, when the mount asked for it (`FuseRing`).
    let ring: FuseRing
    /// The session, once made (0 before and after): for invalidations the
    /// bridge sends itself (`RefusedWrites`).
    let session = Atomic<UInt>(0)
    /// Runs the bridge's own invalidations off the request threads, in order.
    let invalidations = DispatchQueue(label: "scopefs.invalidations")

    init(fileSystem: any FileSystem, alias: OwnerAlias?, admittedUsers: AdmittedUsers?, ringThreads: UInt32 = 0) {
        self.fileSystem = fileSystem
        self.alias = alias
        self.admittedUsers = admittedUsers
        self.ring = FuseRing(threadsPerQueue: ringThreads)
        self.wire = WireState(ringRequested: ringThreads > 0)
    }

    static func from(_ userdata: UnsafeMutableRawPointer) -> BridgeContext {
        Unmanaged<BridgeContext>.fromOpaque(userdata).takeUnretainedValue()
    }
}

/// Kernel caches to drop (after a policy change or a host change), from a
/// thread that is not serving a FUSE request (`FuseSession.invalidate`).
public struct CacheInvalidation: Sendable {
    /// Inodes whose attributes and pages go.
    public var inodes: [UInt64] = []
    /// Inodes whose attributes go (their pages stay).
    public var attributes: [UInt64] = []
    public var entries: [(parent: UInt64, name: String)] = []
    public init() {}
    public var isEmpty: Bool { inodes.isEmpty && attributes.isEmpty && entries.isEmpty }
    public var count: Int { inodes.count + attributes.count + entries.count }
}
