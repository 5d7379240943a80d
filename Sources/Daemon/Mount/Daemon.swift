import CommandErrors
import Control
import Documents
import FleetStore
import Foundation
import FuseBridge
import Glibc
import Logging
import Policy
import PolicyStore
import Processes
import ScopeFS
import Synchronization

/// What `scopefs mount` asks of the daemon.
public struct DaemonOptions: Sendable {
    public var state: StateDirectory
    public var mountpoint: String
    public var openFiles: MountConfiguration.OpenFiles
    public var allowOther: Bool
    public var scopeMode: ScopeTable.Mode
    public var scopeBudget: Int
    /// Days an imported copy waits in an inbox at most (SPEC S18).
    public var inboxDays: Int
    /// Where to write "ready" (or the error) once the mount is up.
    public var readyDescriptor: Int32?
    /// How host changes reach the kernel's caches (issue 21).
    public var hostChanges: HostChangeMode
    /// How long the kernel may cache entries and attributes; nil: 300 s
    /// with a host-change channel, 1 s without.
    public var cacheTimeout: Double?
    /// Backing descriptors one app may hold (SPEC S40); nil: the default
    /// (`DescriptorLimits`).
    public var descriptorsPerApp: Int?
    /// Folders that keep a descriptor at a time (SPEC S40); nil: the
    /// default (`DescriptorLimits`).
    public var folderDescriptors: Int?
    /// Container files are offered to the kernel for passthrough (issue 33).
    public var containerPassthrough: Bool
    /// Nodes kept for the kernel (`NodeBudget`); nil: the default; `Int.max`: no bound.
    public var maxNodes: Int?
    /// Threads per kernel queue for FUSE over io_uring (0: /dev/fuse only).
    public var ringThreads: UInt32

    public init(
        state: StateDirectory, mountpoint: String, openFiles: MountConfiguration.OpenFiles, allowOther: Bool,
        scopeMode: ScopeTable.Mode, scopeBudget: Int, inboxDays: Int = 7, readyDescriptor: Int32?,
        hostChanges: HostChangeMode = .auto, cacheTimeout: Double? = nil, descriptorsPerApp: Int? = nil,
        folderDescriptors: Int? = nil, containerPassthrough: Bool = true, maxNodes: Int? = nil,
        ringThreads: UInt32 = 0
    ) {
        self.maxNodes = maxNodes
        self.ringThreads = ringThreads
        self.containerPassthrough = containerPassthrough
        self.folderDescriptors = folderDescriptors
        self.descriptorsPerApp = descriptorsPerApp
        self.hostChanges = hostChanges
        self.cacheTimeout = cacheTimeout
        self.inboxDays = inboxDays
        self.scopeMode = scopeMode
        self.scopeBudget = scopeBudget
        self.state = state
        self.mountpoint = mountpoint
        self.openFiles = openFiles
        self.allowOther = allowOther
        self.readyDescriptor = readyDescriptor
    }
}

/// One daemon serves one mount and one state directory (SPEC S1): it wires
/// the policy store, the file system, the FUSE session, the process tracker
/// and the control socket, and tears them down in reverse order.
public enum Daemon {
    /// The entry and attribute timeout with a host-change channel: changes
    /// drop them at once, so only memory bounds how long they may live.
    public static let watchedCacheTimeout = 300.0
    /// Without one: host changes show within this time.
    public static let unwatchedCacheTimeout = 1.0

    /// Who app processes run as: never host root (SPEC S5), looked up once.
    static let appAccount = AppAccount.forOwner(getuid())
    /// The app endpoint's path for sandboxes (`SandboxEndpoint`), made once.
    static let sandboxEndpoint = SandboxEndpoint.prepare()

    public static func run(_ options: DaemonOptions, logger: Logger) throws(CommandError) -> Int32 {
        let state = options.state
        // Local or fleet, decided once for the whole run (issue 51).
        let backend = try IsolationBackend(state)
        let database = try backend.localDatabase()
        let repository = PolicyRepository(database: database)
        let lock = try DaemonLock(state)
        defer { lock.release() }
        let mountpoint = try MountPoint.prepare(options.mountpoint)
        umask(0)  // the kernel already applied the caller's umask
        let descriptorLimit = raiseDescriptorLimit()
        reserveDescriptorTable(limit: descriptorLimit)
        let descriptors = DescriptorLimits(
            limit: descriptorLimit, perApp: options.descriptorsPerApp, folders: options.folderDescriptors)
        logger.info(
            "descriptor limit \(descriptorLimit): \(descriptors.forApps) for apps, \(descriptors.perApp) per app, \(descriptors.folders) folders"
        )

        let ownerUID = getuid()
        let appAccount = Self.appAccount
        if appAccount == nil {
            logger.warning(
                "no \(AppAccount.systemName) account: `scopefs run` refuses sandboxed apps until it exists (\(AppAccount.creation)) and the mount is made again"
            )
        }
        let tracker = ProcessTracker(ownerUID: ownerUID, journal: RunJournal(state: state), mountpoint: mountpoint)
        let recorder = EventRecorder(store: EventStore(database: database), logger: logger)
        let scopes = ScopeRegistry(
            mode: options.scopeMode, budget: options.scopeBudget, lineage: { tracker.lineage(of: $0) }, events: recorder
        )
        tracker.onExit { process in scopes.processExited(pid: process.key.pid) }
        tracker.onExit { process in
            // A run's launcher ends last, but the sandbox's other processes
            // may still be on their way out: its cgroup goes a moment later.
            guard process.parent == nil else { return }
            DispatchQueue.global().asyncAfter(deadline: .now() + 1) { tracker.removeFinishedRuns() }
        }
        let inbox = InboxKeeper(state: state, days: options.inboxDays)
        let notices = NoticeBoard()
        // A fleet's daemon serves the shared store's policy (SPEC S44); it
        // must reach it once to start, then keeps it in memory as always.
        let fleet: FleetLink?
        if let shared = try backend.fleetRepository() {
            let link = FleetLink(repository: shared, logger: logger)
            try link.repository.checkSchema()
            logger.info(
                "host \(link.hostName) serves the fleet's policy from \(link.description), lease \(link.lease) s")
            fleet = link
        } else {
            fleet = nil
        }
        // Whichever store holds the policy (decision 59), read once here;
        // the FUSE path serves this snapshot and its successors from memory.
        let store: any IsolationStore = fleet?.repository ?? repository
        // The item identifiers of `user.scopefs.item` and of new bookmarks
        // come through a connection of their own on a fleet: what an app
        // asks for never queues in front of a revoke's reload.
        let documentFleet = try backend.fleetRepository()
        let documentStore: any IsolationStore = documentFleet ?? repository
        let documents = try DocumentBridge(
            state: state, repository: documentStore,
            locator: try backend.locator(over: repository),
            inbox: inbox, events: recorder, logger: logger, notices: notices)
        let hostChanges = try HostChangeChannel.open(options.hostChanges, probe: state.containersPath, logger: logger)
        let cacheTimeout = options.cacheTimeout ?? (hostChanges == nil ? unwatchedCacheTimeout : watchedCacheTimeout)
        var configuration = MountConfiguration(
            openFiles: options.openFiles, containersPath: state.containersPath, cacheTimeout: cacheTimeout,
            hostChanges: hostChanges,
            unwatchedTimeout: hostChanges == nil ? cacheTimeout : min(unwatchedCacheTimeout, cacheTimeout),
            descriptorsPerApp: descriptors.perApp, descriptorsForApps: descriptors.forApps,
            folderDescriptors: descriptors.folders)
        configuration.containerPassthrough = options.containerPassthrough
        configuration.maxNodes = options.maxNodes ?? NodeBudget.defaultLimit
        let (snapshot, policyVersion) = try store.versionedSnapshot(generation: 1)
        // Before anything is mounted: a mount over a folder the daemon
        // reads would wedge it on its own mount (issue 50).
        try FolderOverlap.refuseMount(at: mountpoint, providers: Array(snapshot.providers.values), state: state.path)
        let fileSystem: ScopeFileSystem
        do {
            fileSystem = try ScopeFileSystem(
                configuration: configuration, callers: tracker, scopes: scopes, events: recorder, documents: documents,
                snapshot: snapshot)
        } catch {
            throw CommandError(.ioError, "cannot open \(state.containersPath): \(error)")
        }
        // What a daemon killed under an `unsynced` rule kept losable is
        // lost now, as at a crash (issue 48); later copies are kept here.
        let lost = fileSystem.unsynced.keep(in: state.unsyncedPath)
        if lost > 0 { logger.notice("\(lost) files back to their last fsync: the last daemon was killed") }
        let access = MountAccess(
            ownerUID: ownerUID, ownerGID: getgid(), appAccount: appAccount, allowOther: options.allowOther)
        let session: FuseSession
        do {
            session = try FuseSession(
                fileSystem: fileSystem, options: access.options, alias: access.alias,
                admittedUsers: access.admittedUsers, ringThreads: options.ringThreads)
            try session.mount(at: mountpoint)
        } catch {
            throw CommandError(
                .cannotMount, "cannot mount at \(mountpoint): \(error) (is /dev/fuse available and fuse3 installed?)")
        }

        let reloader = PolicyReloader(
            repository: repository, fileSystem: fileSystem, session: session, version: policyVersion, events: recorder,
            logger: logger, notices: notices, fleet: fleet, page: ServedPolicyPage.Publisher(state: state))
        if let hostChanges {
            // inotify reports the mount's own changes too (fanotify tells
            // them by pid): presenters must not hear them twice.
            documents.subitemNotices.expectsEchoes.store(hostChanges.kind == .inotify, ordering: .relaxed)
            fileSystem.recordProviderDirectories()
            // A host rename wakes the item locator at once (issue 17's
            // presenters), instead of at its next second; a host write is
            // a `changed` notice.
            Thread.detachNewThread {
                hostChanges.run(
                    fileSystem: fileSystem, session: session,
                    namesChanged: { documents.itemsMayHaveMoved() },
                    contentChanged: { provider, path in
                        documents.contentNotices.changed(
                            provider: provider, path: path, writer: nil, in: fileSystem.snapshot)
                    },
                    subitemChanged: { provider, change in
                        documents.subitemNotices.hostChanged(provider: provider, change, in: fileSystem.snapshot)
                    },
                    changesLost: { documents.contentNotices.mayAllHaveChanged(in: fileSystem.snapshot) })
            }
        }
        // Local providers' previews: the owner's freedesktop cache (S50).
        fileSystem.setLocalThumbnails(FreedesktopThumbnails.ofOwner())
        // Extensions' previews, kept there for the owner's file manager.
        fileSystem.setOwnerPreviews(OwnerPreviewCache(cache: FreedesktopThumbnails.ofOwner(), mountpoint: mountpoint))
        let extensions = ExtensionProviders(
            state: state, mountpoint: mountpoint, fileSystem: fileSystem, events: recorder, logger: logger,
            builtInsOnly: backend.builtInExtensionsOnly,
            stateChanged: { provider, path in
                documents.contentNotices.changed(
                    provider: provider, path: path, writer: nil, in: fileSystem.snapshot, kind: .state)
            },
            contentDropped: { provider, inode in
                // Not on a FUSE worker (an owner's command, the quota): the
                // evicted file is not open, so no read holds its pages.
                for node in fileSystem.kernelNodes(provider: provider, inode: inode) { session.invalidateInode(node) }
            },
            conflictKept: { provider, original, copy in
                ConflictGrants(repository: repository, reloader: reloader, events: recorder, logger: logger)
                    .share(provider: provider, original: original, copy: copy, in: fileSystem.snapshot)
            })
        extensions.follow(snapshot)
        if let fleet {
            Daemon.createContainers(of: snapshot, in: state)
            fleet.reportProcesses {
                tracker.appProcesses.filter { !ProcFS.isBubblewrap(pid: $0.key.pid) }.map {
                    FleetProcess(app: $0.app, pid: $0.key.pid)
                }
            }
        }
        reloader.onInstall { previous, current in
            if previous.providers != current.providers || previous.apps != current.apps { extensions.follow(current) }
            if backend.containersFollowPolicy && previous.apps != current.apps {
                Daemon.createContainers(of: current, in: state)
            }
            // A revoke ends the app's downloads at once (S42).
            for id in current.grantIDsChanged(since: previous) {
                if let grant = previous.grantsByID[id], grant.state == .active, current.grantsByID[id]?.state != .active
                {
                    extensions.cancelDownloads(of: grant.app)
                }
            }
        }
        let channel = ChannelStatus(name: hostChanges?.kind.rawValue ?? "none", cacheTimeout: cacheTimeout)
        _ = inbox.removeExpired(apps: Array(snapshot.apps.keys))
        sweepPartialCopies(state: state)
        // What an earlier daemon's apps left of their saves (S48): off this
        // thread, which starts the loop, as it lists each folder holding a
        // file granted alone.
        DispatchQueue.global(qos: .utility).async {
            let left = fileSystem.removeLeftTemporaries()
            if left > 0 { logger.info("removed \(left) temporaries of saves an earlier daemon left") }
        }
        let stopping = Atomic<Bool>(false)
        let picks = PickBroker()
        // Claims on a fleet's shared provider items are the fleet's (issue 34).
        let fleetClaims = try backend.fleet.map { configuration throws(CommandError) in
            try FleetCoordination(configuration: configuration, notices: reloader.notices, logger: logger)
        }
        fleetClaims?.start()
        if let configuration = backend.fleet {
            let forwarder = try FleetEvents(configuration: configuration, logger: logger)
            recorder.forwardBatches { forwarder.tell($0) }
        }
        let coordinator = Coordinator(
            notices: reloader.notices, fleet: fleetClaims,
            fleetKey: { location in extensions.fleetKey(of: location) ?? location })
        let services = DaemonServices(
            options: options, mountpoint: mountpoint, tracker: tracker, scopes: scopes, reloader: reloader,
            inbox: inbox, documents: documents, fileSystem: fileSystem, picks: picks, coordinator: coordinator,
            channel: channel, extensions: extensions, session: session)
        // A fleet's session grants are this host's rows of the fleet's
        // store (decision 64): their ends go there, and to this host's log
        // as the CLI's changes do (`scopefs events` here shows them).
        let sessions: any IsolationStore =
            documentFleet.map { FleetStoreWithLocalLog(fleet: $0, log: EventStore(database: repository.database)) }
            ?? repository
        followAppExits(services, sessions: sessions, logger: logger)
        let router = ControlRouter(handler: DaemonControl(services: services))
        let servers: [ControlServer]
        do {
            servers = try listen(router: router, state: state, ownerUID: ownerUID, tracker: tracker, logger: logger)
        } catch {
            hostChanges?.stop()
            session.unmount()
            throw error
        }
        servers.forEach { $0.start() }
        startFollowers(services, session: session, recorder: recorder, logger: logger) {
            stopping.load(ordering: .relaxed)
        }
        ReadaheadWindow.widen(mountpoint: mountpoint, to: Int(ScopeFileSystem.readaheadBytes >> 10), logger: logger)
        DaemonInfo(pid: getpid(), mountpoint: mountpoint).write(to: state)
        Self.reportStranded(tracker, recorder: recorder, logger: logger)
        logger.info("mounted \(mountpoint) for \(state.path) (process events: \(tracker.followsEvents))")
        Readiness.report(options.readyDescriptor, .ready)
        ServiceManager.ready(mountpoint: mountpoint)

        session.installSignalHandlers()
        let result = session.loop(
            maxThreads: DaemonTunables.maxWorkerThreads, maxIdleThreads: DaemonTunables.maxIdleWorkerThreads)
        ServiceManager.stopping()
        stopping.store(true, ordering: .relaxed)
        extensions.stopAll()
        // Before the unmount: no invalidation may reach a session that is gone.
        hostChanges?.stop()
        recorder.flush()
        servers.forEach { $0.stop() }
        unlink(state.controlSocketPath)
        unlink(state.appSocketPath)
        if let endpoint = Self.sandboxEndpoint { unlink(endpoint) }
        tracker.removeFinishedRuns()
        session.unmount()
        // A clean stop is no crash: nothing of the `unsynced` rules is lost.
        fileSystem.unsynced.forgetAll()
        DaemonInfo.remove(from: state)
        logger.info("unmounted \(mountpoint) (loop result \(result))")
        return 0
    }

    /// A fleet's apps are added on one host (`scopefs fleet add-app`): each
    /// host makes their containers when it first sees them (S44).
    private static func createContainers(of snapshot: PolicySnapshot, in state: StateDirectory) {
        for app in snapshot.apps.keys { try? state.createContainer(for: app) }
    }

    /// The owner's socket and the app endpoints (the state directory's, and
    /// the one sandboxes bind), all answering through `router`.
    private static func listen(
        router: ControlRouter, state: StateDirectory, ownerUID: uid_t, tracker: ProcessTracker, logger: Logger
    ) throws(CommandError) -> [ControlServer] {
        var endpoints = [(state.controlSocketPath, ControlSender.Endpoint.owner), (state.appSocketPath, .app)]
        if let sandboxEndpoint = Self.sandboxEndpoint { endpoints.append((sandboxEndpoint, .app)) }
        var servers: [ControlServer] = []
        for (path, endpoint) in endpoints {
            do {
                servers.append(
                    try ControlServer(
                        path: path, endpoint: endpoint, ownerUID: ownerUID,
                        appAccount: endpoint == .app ? Self.appAccount : nil, logger: logger,
                        attribution: { tracker.attribution(of: $0) }, router: router))
            } catch {
                servers.forEach { $0.stop() }
                throw CommandError(.ioError, "cannot listen on \(path): \(error)")
            }
        }
        return servers
    }

    /// The threads that keep the daemon up to date while it serves: process
    /// events, the event log, memory, item locations, the mount table and
    /// the database, each until `stopping`.
    private static func startFollowers(
        _ services: DaemonServices, session: FuseSession, recorder: EventRecorder, logger: Logger,
        stopping: @escaping @Sendable () -> Bool
    ) {
        let (tracker, fileSystem, reloader) = (services.tracker, services.fileSystem, services.reloader)
        Thread.detachNewThread { tracker.follow(until: stopping) }
        Thread.detachNewThread { recorder.run(until: stopping) }
        Thread.detachNewThread { MemoryTrimmer.run(fileSystem, until: stopping) }
        Thread.detachNewThread { NodePruner.run(fileSystem, session: session, until: stopping) }
        if services.documents.locatesItems {
            Thread.detachNewThread {
                services.documents.followItemLocations(until: stopping) {
                    do { try reloader.reload() } catch { logger.error("reload after items moved: \(error)") }
                }
            }
        }
        let mountpoint = services.mountpoint
        if let device = MountTable.device(at: mountpoint) {
            Thread.detachNewThread {
                MountFollower.run(device: device, until: stopping) {
                    logger.info(
                        "\(mountpoint) was unmounted while app views still held the mount; ending the connection")
                    session.stop()
                }
            }
        }
        Thread.detachNewThread { reloader.follow(until: stopping) }
    }

    /// What an app process's exit ends: its inbox copies, and with the
    /// app's last process its session grants. Not on a FUSE worker:
    /// removing entries from the kernel's cache may wait for one
    /// (docs/DECISIONS.md, decision 3). Serial: exits in order.
    private static func followAppExits(_ services: DaemonServices, sessions: any IsolationStore, logger: Logger) {
        let (tracker, inbox, fileSystem, reloader) = (
            services.tracker, services.inbox, services.fileSystem, services.reloader
        )
        let exits = DispatchQueue(label: "scopefs.app-exits")
        // Session grants whose end the store did not take (a fleet's
        // database away), by app: held revoked here, and ended again every
        // few seconds until the store takes it. One retry per app at a time.
        let pending = Mutex<[AppID: Set<GrantID>]>([:])
        @Sendable func endSessions(of app: AppID, _ grants: Set<GrantID>) {
            let left = endSessionGrants(
                grants, of: app, state: services.state, repository: sessions, reloader: reloader,
                fileSystem: fileSystem, logger: logger)
            guard !left.isEmpty else { return }
            let first = pending.withLock { pending in
                defer { pending[app, default: []].formUnion(left) }
                return pending[app] == nil
            }
            guard first else { return }
            exits.asyncAfter(deadline: .now() + DaemonTunables.sessionEndRetrySeconds) {
                endSessions(of: app, pending.withLock { $0.removeValue(forKey: app) } ?? [])
            }
        }
        tracker.onExit { process in
            let lastOfApp = !tracker.appProcesses.contains { $0.app == process.app }
            // The session this exit ends is the grants served now: one made
            // after it is the app's next run's, however late the queue runs.
            let sessionGrants =
                lastOfApp
                ? Set(fileSystem.snapshot.grants(of: process.app).filter(\.isSession).map(\.id)) : []
            exits.async {
                // A save its app did not finish never will (S48).
                if lastOfApp { fileSystem.removeTemporaries(of: process.app) }
                var removed = inbox.processExited(process.key)
                removed.merge(inbox.removeExpired(apps: Array(fileSystem.snapshot.apps.keys))) { $0 + $1 }
                for (app, paths) in removed {
                    reloader.dropEntries(fileSystem.containerEntries(app: app, paths: paths))
                }
                if !sessionGrants.isEmpty { endSessions(of: process.app, sessionGrants) }
            }
        }
        tracker.onExit { process in services.coordinator.processExited(pid: process.key.pid) }
    }

    /// What killed copies staged (SPEC S34) is swept now and every
    /// `DaemonTunables.partialCopySweepSeconds`, whether or not a command runs.
    private static func sweepPartialCopies(state: StateDirectory) {
        let partials = PartialCopies(state: state)
        partials.sweep()
        Thread.detachNewThread {
            while true {
                Thread.sleep(forTimeInterval: DaemonTunables.partialCopySweepSeconds)
                partials.sweep()
            }
        }
    }

    /// A session grant ends when its app's last process exits, with the
    /// references to its item (Android's non-persisted URI grants).
    /// Returns the grants the store took no end of: they are held revoked.
    private static func endSessionGrants(
        _ grants: Set<GrantID>, of app: AppID, state: StateDirectory, repository: any IsolationStore,
        reloader: PolicyReloader, fileSystem: ScopeFileSystem, logger: Logger
    ) -> Set<GrantID> {
        var left = grants
        var ended: [Grant] = []
        do throws(CommandError) {
            for id in grants.sorted() {
                do {
                    ended += try repository.forget(app: app, grant: id, sessionOnly: true, reason: "session-ended")
                } catch  where error.kind == .unknown {
                    // Forgotten meanwhile, or the app removed: ended anyway.
                }
                left.remove(id)
            }
        } catch {
            // Fail closed: a session must not outlive its app because the
            // store took no write; the daemon holds them revoked.
            logger.error(
                "\(app): cannot end session grants \(left.sorted()), revoking them in the daemon: \(error.message)")
            for id in left { _ = try? reloader.revoke(app: app, grant: id, state: state) }
        }
        guard !ended.isEmpty else { return left }
        do throws(CommandError) {
            let references = try PickerActions(state: state, repository: repository)
                .removeReferences(app: app, to: Set(ended.map(\.item)))
            try reloader.reload()
            reloader.dropEntries(fileSystem.containerEntries(app: app, paths: references))
            logger.info("\(app): last process exited, session grants \(ended.map(\.id)) ended")
        } catch {
            logger.error("\(app): session grants \(ended.map(\.id)) ended, but: \(error.message)")
        }
        return left
    }

    /// SPEC S30, S34: app processes that a crashed daemon left on its dead
    /// mount are named, once, in the log and the event trail.
    private static func reportStranded(_ tracker: ProcessTracker, recorder: EventRecorder, logger: Logger) {
        let now = Date().timeIntervalSince1970
        for (record, pids) in tracker.stranded?.processes ?? [] {
            logger.warning(
                "\(pids.count) process(es) of \(record.app) still run on the dead mount of daemon \(record.daemon) at \(record.mountpoint): \(pids)"
            )
            for pid in pids {
                recorder.record(
                    Event(
                        time: now, kind: .stranded, app: record.app, pid: pid, path: record.mountpoint,
                        operation: "on a dead mount (daemon \(record.daemon) is gone)", errno: ENOTCONN))
            }
        }
    }
}

/// The host-change channel and cache timeout a mount runs with (status).
struct ChannelStatus: Sendable {
    var name: String
    var cacheTimeout: Double
}
