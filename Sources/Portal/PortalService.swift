import CPortalBus
import CommandErrors
import Foundation
import FuseBridge
import Glibc
import PolicyStore
import Synchronization

/// `scopefs portal`: owns org.freedesktop.portal.Documents on the session
/// bus and serves it until killed. A lost bus (the session's dbus-daemon
/// restarted or gone) is not the end: the service reconnects every
/// second and takes the name again, so clients' next call finds it.
///
/// `@unchecked Sendable`: once `runWithLayout` starts it, only the bus
/// thread runs `run` (and touches `served`); the layout shares only the
/// `DocumentPortal`, which is Sendable.
public final class PortalService: @unchecked Sendable {
    public static let busName = "org.freedesktop.portal.Documents"
    public static let objectPath = "/org/freedesktop/portal/documents"
    /// The FileChooser backend's name; `scopefs.portal` (installed in
    /// xdg-desktop-portal's portals folder) tells the frontend about it.
    public static let backendName = "org.freedesktop.impl.portal.desktop.scopefs"

    private let object: DocumentsObject
    private let transfer: FileTransferObject
    private let chooser: FileChooserObject
    private let mailbox = BusMailbox()
    private let log: @Sendable (String) -> Void

    public init(
        state: StateDirectory, mountPoint: String, policy: PortalPolicy, log: @escaping @Sendable (String) -> Void
    ) {
        let portal = DocumentPortal(state: state, mountPoint: mountPoint, policy: policy)
        self.object = DocumentsObject(portal: portal)
        self.transfer = FileTransferObject(portal: portal)
        self.chooser = FileChooserObject(portal: portal, mailbox: mailbox, log: log)
        self.log = log
    }

    /// Mounts the document layout at the mount point and serves it on this
    /// thread, the bus on another, until SIGTERM, SIGINT or SIGHUP; then
    /// unmounts. The name is owned before the mount is made, so a second
    /// portal fails before it touches the mount point.
    public func runWithLayout() throws(CommandError) -> Never {
        // The session and its signal handlers come first: a SIGTERM that
        // arrives while the name is taken or the layout mounted ends the
        // loop at once, after which the layout is unmounted (the default
        // action would kill the process and leave a dead mount).
        let mountPoint = object.portal.mountPoint
        let layout = DocumentLayout(portal: object.portal)
        let session: FuseSession
        do {
            session = try FuseSession(
                fileSystem: layout,
                options: ["fsname=scopefs-portal", "subtype=scopefs-portal"] + Self.accessOptions)
        } catch {
            throw CommandError(.cannotMount, "cannot start the document layout for \(mountPoint): \(error)")
        }
        session.installSignalHandlers()
        // libfuse's handlers only mark the session exited; the loop ends
        // when its own thread (this one) is interrupted. A signal the bus
        // thread takes instead leaves the loop waiting for a request that
        // may never come (SIGHUP beside a loaded suite: no exit in 30 s).
        // The bus thread starts with them blocked; libfuse's workers block
        // every signal themselves.
        var ending = sigset_t()
        sigemptyset(&ending)
        for number in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&ending, number) }
        pthread_sigmask(SIG_BLOCK, &ending, nil)
        let ready = DispatchSemaphore(value: 0)
        let failure = Mutex<CommandError?>(nil)
        let bus = Thread { [self] in
            do throws(CommandError) {
                try run(announce: { ready.signal() })
            } catch {
                failure.withLock { $0 = error }
                ready.signal()
            }
        }
        bus.start()
        // Saves no one will finish (an app that crashed mid-save, a
        // revoke) leave no temporaries behind while the layout serves.
        let sweeper = Thread { [log] in
            while true {
                sleep(DocumentLayout.abandonedSweepInterval)
                let removed = layout.removeAbandonedTemporaries()
                if removed > 0 { log("portal: \(removed) temporaries of saves no one will finish removed") }
            }
        }
        sweeper.start()
        pthread_sigmask(SIG_UNBLOCK, &ending, nil)
        ready.wait()
        if let error = failure.withLock({ $0 }) { throw error }
        // Only once the name is ours: a second portal, refused, leaves the
        // first one's documents alone.
        endEarlierTransients()
        let left = layout.removeEarlierPortalsTemporaries()
        if left > 0 { log("portal: \(left) temporaries of unfinished saves of the last portal removed") }
        do {
            try session.mount(at: mountPoint)
        } catch {
            throw CommandError(.cannotMount, "cannot mount the document layout at \(mountPoint): \(error)")
        }
        log("portal: document layout mounted at \(mountPoint)")
        let status = session.loop(maxThreads: 8, maxIdleThreads: 2)
        session.unmount()
        layout.removeLeftTemporaries()
        // libfuse's loop answers the signal that ended it: being asked to
        // stop is a clean end (a systemd unit stays "inactive", not "failed").
        exit(status == 0 || [SIGTERM, SIGINT, SIGHUP].contains(status) ? 0 : 1)
    }

    /// Serves the bus alone (`--no-mount`) until SIGTERM, SIGINT or
    /// SIGHUP, which end it with 0 as they end the layout's loop (a
    /// systemd unit stays "inactive"); the last portal's transient
    /// documents end once the name is ours, as with a layout.
    public func runBusOnly() throws(CommandError) -> Never {
        for number in [SIGTERM, SIGINT, SIGHUP] { signal(number) { _ in _exit(0) } }
        try run(announce: { [self] in endEarlierTransients() })
    }

    /// Ends the transient documents (S45) a portal that did not stop
    /// cleanly left: their session grants must not outlive that session.
    private func endEarlierTransients() {
        switch object.portal.endEarlierTransients() {
        case .success(let ended) where ended > 0: log("portal: \(ended) transient documents of the last portal ended")
        case .success: break
        case .failure(let error): log("portal: the last portal's transient documents did not end: \(error)")
        }
    }

    /// The layout checks every caller and operation itself, for either
    /// owner (`DocumentLayout.checkCaller`, its `access`), as the reference
    /// portal does: without `default_permissions` its answers are its own
    /// (EPERM, EISDIR, EXDEV as the reference's), not the kernel's EACCES
    /// from the modes it shows. A root owner's apps run as app accounts
    /// (`scopefs run`), which reach their `by-app/APP` folder only through
    /// `allow_other`; another owner's apps keep the owner's uid.
    private static var accessOptions: [String] { geteuid() == 0 ? ["allow_other"] : [] }

    /// Whether the name was ever owned: before that, a failure ends the
    /// command (no session bus, the name taken); after, it is a lost bus.
    private var served = false

    /// Serves until the process ends; throws only when the first
    /// connection fails.
    public func run(announce: () -> Void = {}) throws(CommandError) -> Never {
        while true {
            do throws(CommandError) {
                try serveOneConnection(announce: announce)
            } catch {
                if !served { throw error }
                log("portal: \(error.message); connecting again in 1 s")
            }
            sleep(1)
        }
    }

    /// Connects, takes the name and processes calls until the bus goes.
    private func serveOneConnection(announce: () -> Void) throws(CommandError) {
        var bus: OpaquePointer?
        var result = sd_bus_open_user(&bus)
        guard result >= 0, let bus else {
            throw CommandError(.noDaemon, "no session bus (\(String(cString: strerror(-result))))")
        }
        defer { sd_bus_flush_close_unref(bus) }
        let context = Unmanaged.passUnretained(object).toOpaque()
        result = scopefs_portal_add_object(
            bus, nil, Self.objectPath,
            { message, context, error in
                guard let message, let context else { return -EINVAL }
                return Unmanaged<DocumentsObject>.fromOpaque(context).takeUnretainedValue().handle(message, error)
            }, context)
        guard result >= 0 else {
            throw CommandError(
                .internalError, "cannot add the Documents object (\(String(cString: strerror(-result))))")
        }
        let transferContext = Unmanaged.passUnretained(transfer).toOpaque()
        result = scopefs_portal_add_transfer(
            bus, Self.objectPath,
            { message, context, error in
                guard let message, let context else { return -EINVAL }
                return Unmanaged<FileTransferObject>.fromOpaque(context).takeUnretainedValue().handle(message, error)
            }, transferContext)
        guard result >= 0 else {
            throw CommandError(
                .internalError, "cannot add the FileTransfer object (\(String(cString: strerror(-result))))")
        }
        let chooserContext = Unmanaged.passUnretained(chooser).toOpaque()
        result = scopefs_portal_add_chooser(
            bus, FileChooserObject.objectPath,
            { message, context, error in
                guard let message, let context else { return -EINVAL }
                return Unmanaged<FileChooserObject>.fromOpaque(context).takeUnretainedValue().handle(message, error)
            },
            { message, context, error in
                guard let message, let context else { return -EINVAL }
                return Unmanaged<FileChooserObject>.fromOpaque(context).takeUnretainedValue().close(message, error)
            }, chooserContext)
        guard result >= 0 else {
            throw CommandError(
                .internalError, "cannot add the FileChooser backend (\(String(cString: strerror(-result))))")
        }
        result = sd_bus_request_name(bus, Self.busName, 0)
        guard result >= 0 else {
            throw CommandError(
                .refused,
                "cannot own \(Self.busName) (\(String(cString: strerror(-result)))): another document portal runs; see docs/PORTAL.md"
            )
        }
        // The backend's name after the store's: a second portal fails on the first.
        result = sd_bus_request_name(bus, Self.backendName, 0)
        guard result >= 0 else {
            throw CommandError(
                .refused,
                "cannot own \(Self.backendName) (\(String(cString: strerror(-result)))): another document portal runs")
        }
        if !served { announce() }
        served = true
        log("portal: serving \(Self.busName) at \(Self.objectPath), mount point \(object.portal.mountPoint)")
        while true {
            result = sd_bus_process(bus, nil)
            if result < 0 {
                throw CommandError(.noDaemon, "lost the session bus (\(String(cString: strerror(-result))))")
            }
            if result > 0 { continue }
            result = wait(bus)
            if result < 0 && result != -EINTR {
                throw CommandError(.noDaemon, "lost the session bus (\(String(cString: strerror(-result))))")
            }
            mailbox.deliver()
        }
    }

    /// sd_bus_wait, also woken by replies posted to the mailbox.
    private func wait(_ bus: OpaquePointer) -> Int32 {
        let events = sd_bus_get_events(bus)
        if events < 0 { return events }
        var deadline: UInt64 = 0
        var result = sd_bus_get_timeout(bus, &deadline)
        if result < 0 { return result }
        var timeout: Int32 = -1
        if deadline != UInt64.max {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let microseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
            timeout = deadline <= microseconds ? 0 : Int32(min((deadline - microseconds + 999) / 1000, 60_000))
        }
        var descriptors = [
            pollfd(fd: sd_bus_get_fd(bus), events: Int16(events), revents: 0),
            pollfd(fd: mailbox.wakeDescriptor, events: Int16(POLLIN), revents: 0),
        ]
        result = poll(&descriptors, 2, timeout)
        return result < 0 ? -errno : 0
    }
}
