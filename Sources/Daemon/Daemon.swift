import CommandErrors
import Control
import Documents
import Foundation
import FuseBridge
import Glibc
import Logging
import Policy
import PolicyStore
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

    public init(
        state: StateDirectory, mountpoint: String, openFiles: MountConfiguration.OpenFiles, allowOther: Bool,
        scopeMode: ScopeTable.Mode, scopeBudget: Int, inboxDays: Int = 7, readyDescriptor: Int32?,
        hostChanges: HostChangeMode = .auto, cacheTimeout: Double? = nil, descriptorsPerApp: Int? = nil,
        folderDescriptors: Int? = nil
    ) {
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
        let database = try PolicyDatabase.open(state)
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
        let documents = try DocumentBridge(
            state: state, repository: repository, inbox: inbox, events: recorder, logger: logger, notices: notices)
        let hostChanges = try HostChanges.open(options.hostChanges, probe: state.containersPath, logger: logger)
        let cacheTimeout = options.cacheTimeout ?? (hostChanges == nil ? unwatchedCacheTimeout : watchedCacheTimeout)
        let configuration = MountConfiguration(
            openFiles: options.openFiles, containersPath: state.containersPath, cacheTimeout: cacheTimeout,
            hostChanges: hostChanges,
            unwatchedTimeout: hostChanges == nil ? cacheTimeout : min(unwatchedCacheTimeout, cacheTimeout),
            descriptorsPerApp: descriptors.perApp, descriptorsForApps: descriptors.forApps,
            folderDescriptors: descriptors.folders)
        let (snapshot, policyVersion) = try repository.versionedSnapshot(generation: 1)
        let fileSystem: ScopeFileSystem
        do {
            fileSystem = try ScopeFileSystem(
                configuration: configuration, callers: tracker, scopes: scopes, events: recorder, documents: documents,
                snapshot: snapshot)
        } catch {
            throw CommandError(.ioError, "cannot open \(state.containersPath): \(error)")
        }
        var mountOptions = ["fsname=scopefs", "subtype=scopefs"]
        var alias: OwnerAlias? = nil
        var admittedUsers: AdmittedUsers? = nil
        if ownerUID == 0 {
            // Apps run as the app account, which the kernel lets in only
            // with allow_other; to the file system they act as the owner
            // (`OwnerAlias`). Without --allow-other any other uid gets
            // EACCES as the kernel gave it (`AdmittedUsers`); with it, the
            // kernel checks other users as before (ARCHITECTURE.md, 8, 43).
            mountOptions.append("allow_other")
            if options.allowOther {
                mountOptions.append("default_permissions")
            } else {
                admittedUsers = AdmittedUsers([ownerUID] + (appAccount.map { [$0.uid] } ?? []))
            }
            alias = appAccount.map {
                OwnerAlias(appUID: $0.uid, appGID: $0.gid, ownerUID: ownerUID, ownerGID: getgid())
            }
        } else if options.allowOther {
            // Without allow_other the kernel lets only the daemon's own user
            // in, so the host file system's checks (made with the daemon's
            // credentials) are the caller's; the kernel's would repeat them
            // and cost a GETATTR of the folder after every create or
            // unlink. Other users' processes are checked by the kernel
            // (ARCHITECTURE.md, 8).
            mountOptions += ["allow_other", "default_permissions"]
        }
        let session: FuseSession
        do {
            session = try FuseSession(
                fileSystem: fileSystem, options: mountOptions, alias: alias, admittedUsers: admittedUsers)
            try session.mount(at: mountpoint)
        } catch {
            throw CommandError(
                .cannotMount, "cannot mount at \(mountpoint): \(error) (is /dev/fuse available and fuse3 installed?)")
        }

        let reloader = PolicyReloader(
            repository: repository, fileSystem: fileSystem, session: session, version: policyVersion, events: recorder,
            logger: logger, notices: notices)
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
                    })
            }
        }
        let channel = ChannelStatus(name: hostChanges?.kind.rawValue ?? "none", cacheTimeout: cacheTimeout)
        // Not a FUSE worker: removing entries from the kernel's cache may
        // wait for one (docs/ARCHITECTURE.md). Serial: exits in order.
        let exits = DispatchQueue(label: "scopefs.app-exits")
        tracker.onExit { process in
            let lastOfApp = !tracker.appProcesses.contains { $0.app == process.app }
            exits.async {
                var removed = inbox.processExited(process.key)
                removed.merge(inbox.removeExpired(apps: Array(fileSystem.snapshot.apps.keys))) { $0 + $1 }
                for (app, paths) in removed {
                    reloader.dropEntries(fileSystem.containerEntries(app: app, paths: paths))
                }
                if lastOfApp {
                    endSessionGrants(
                        of: process.app, state: state, repository: repository, reloader: reloader,
                        fileSystem: fileSystem, logger: logger)
                }
            }
        }
        _ = inbox.removeExpired(apps: Array(snapshot.apps.keys))
        sweepPartialCopies(state: state)
        let stopping = Atomic<Bool>(false)
        let picks = PickBroker()
        let coordinator = Coordinator(notices: reloader.notices)
        tracker.onExit { process in coordinator.processExited(pid: process.key.pid) }
        var servers: [ControlServer] = []
        let sandboxEndpoint = Self.sandboxEndpoint
        var endpoints = [(state.controlSocketPath, ControlServer.Endpoint.owner), (state.appSocketPath, .app)]
        if let sandboxEndpoint { endpoints.append((sandboxEndpoint, .app)) }
        for (path, endpoint) in endpoints {
            do {
                servers.append(
                    try ControlServer(
                        path: path, endpoint: endpoint, ownerUID: ownerUID,
                        appAccount: endpoint == .app ? appAccount : nil, logger: logger,
                        appOf: { tracker.app(of: $0) }
                    ) { request, peer, peerApp in
                        Self.handle(
                            request, at: endpoint, peer: peer, peerApp: peerApp, tracker: tracker, scopes: scopes,
                            reloader: reloader,
                            inbox: inbox,
                            documents: documents, fileSystem: fileSystem, mountpoint: mountpoint, options: options,
                            picks: picks, coordinator: coordinator, channel: channel)
                    })
            } catch {
                servers.forEach { $0.stop() }
                hostChanges?.stop()
                session.unmount()
                throw CommandError(.ioError, "cannot listen on \(path): \(error)")
            }
        }
        servers.forEach { $0.start() }
        Thread.detachNewThread { tracker.follow(until: { stopping.load(ordering: .relaxed) }) }
        Thread.detachNewThread { recorder.run(until: { stopping.load(ordering: .relaxed) }) }
        Thread.detachNewThread { MemoryTrimmer.run(fileSystem, until: { stopping.load(ordering: .relaxed) }) }
        Thread.detachNewThread {
            documents.watch(until: { stopping.load(ordering: .relaxed) }) {
                do { try reloader.reload() } catch { logger.error("reload after items moved: \(error)") }
            }
        }
        if let device = MountPoint.device(at: mountpoint) {
            Thread.detachNewThread {
                MountWatcher.run(device: device, until: { stopping.load(ordering: .relaxed) }) {
                    logger.info(
                        "\(mountpoint) was unmounted while app views still held the mount; ending the connection")
                    session.stop()
                }
            }
        }
        Thread.detachNewThread { reloader.watch(until: { stopping.load(ordering: .relaxed) }) }
        DaemonInfo(pid: getpid(), mountpoint: mountpoint).write(to: state)
        Self.reportStranded(tracker, recorder: recorder, logger: logger)
        logger.info("mounted \(mountpoint) for \(state.path) (process events: \(tracker.followsEvents))")
        Readiness.report(options.readyDescriptor, .ready)
        ServiceManager.ready(mountpoint: mountpoint)

        session.installSignalHandlers()
        let result = session.loop(maxThreads: Tunables.maxWorkerThreads, maxIdleThreads: Tunables.maxIdleWorkerThreads)
        ServiceManager.stopping()
        stopping.store(true, ordering: .relaxed)
        // Before the unmount: no invalidation may reach a session that is gone.
        hostChanges?.stop()
        recorder.flush()
        servers.forEach { $0.stop() }
        unlink(state.controlSocketPath)
        unlink(state.appSocketPath)
        if let sandboxEndpoint { unlink(sandboxEndpoint) }
        tracker.removeFinishedRuns()
        session.unmount()
        DaemonInfo.remove(from: state)
        logger.info("unmounted \(mountpoint) (loop result \(result))")
        return 0
    }

    /// What killed copies staged (SPEC S34) is swept now and every
    /// `Tunables.partialCopySweepSeconds`, whether or not a command runs.
    private static func sweepPartialCopies(state: StateDirectory) {
        let partials = PartialCopies(state: state)
        partials.sweep()
        Thread.detachNewThread {
            while true {
                Thread.sleep(forTimeInterval: Tunables.partialCopySweepSeconds)
                partials.sweep()
            }
        }
    }

    /// A session grant ends when its app's last process exits, with the
    /// references to its item (Android's non-persisted URI grants).
    private static func endSessionGrants(
        of app: AppID, state: StateDirectory, repository: PolicyRepository, reloader: PolicyReloader,
        fileSystem: ScopeFileSystem, logger: Logger
    ) {
        do throws(CommandError) {
            let ended = try repository.forget(app: app, grant: nil, sessionOnly: true, reason: "session-ended")
            guard !ended.isEmpty else { return }
            let references = try DocumentPicker(state: state, repository: repository)
                .removeReferences(app: app, to: Set(ended.map(\.item)))
            try reloader.reload()
            reloader.dropEntries(fileSystem.containerEntries(app: app, paths: references))
            logger.info("\(app): last process exited, session grants \(ended.map(\.id)) ended")
        } catch {
            // Fail closed: a session must not outlive its app because the
            // database took no write; the daemon holds them revoked.
            logger.error("\(app): cannot end session grants, revoking them in the daemon: \(error.message)")
            for grant in fileSystem.snapshot.grants(of: app) where grant.isSession && grant.state == .active {
                _ = try? reloader.revoke(app: app, grant: grant.id)
            }
        }
    }

    private static func handle(
        _ request: ControlRequest, at endpoint: ControlServer.Endpoint, peer: UnixSocket.PeerCredentials,
        peerApp: AppID?, tracker: ProcessTracker, scopes: ScopeRegistry, reloader: PolicyReloader, inbox: InboxKeeper,
        documents: DocumentBridge,
        fileSystem: ScopeFileSystem, mountpoint: String, options: DaemonOptions, picks: PickBroker,
        coordinator: Coordinator, channel: ChannelStatus
    ) -> ControlResponse {
        // SPEC S5: app processes may resolve bookmarks and ask who they are;
        // changing or surveying the isolation layer is the owner's.
        if !request.op.isForApps {
            if endpoint == .app {
                return .failure(
                    CommandError.Kind.refused.rawValue,
                    "refused: the app endpoint serves bookmark resolution only; '\(request.op.rawValue)' is the owner's (SPEC S5)"
                )
            }
            if let app = peerApp {
                return .failure(
                    CommandError.Kind.refused.rawValue,
                    "refused: the sender is an app process of \(app); only the owner may '\(request.op.rawValue)' (SPEC S5)"
                )
            }
        }
        switch request.op {
        case .whoami:
            var response = ControlResponse(ok: true)
            response.app = peerApp
            return response
        case .reload:
            do {
                try reloader.reload()
                if let app = request.app, let paths = request.containerPaths {
                    reloader.dropEntries(fileSystem.containerEntries(app: app, paths: paths))
                }
                if let app = request.app, let imported = request.imported {
                    let running = tracker.appProcesses.filter { $0.app == app }.map(\.key)
                    inbox.imported(app: app, paths: imported, running: running)
                }
                return ControlResponse(ok: true)
            } catch {
                return .failure(error.exitCode, error.message)
            }
        case .revoke:
            guard let app = request.app else {
                return .failure(CommandError.Kind.usage.rawValue, "revoke needs an app")
            }
            do {
                let (revoked, held) = try reloader.revoke(app: app, grant: request.grant)
                var response = ControlResponse(ok: true)
                response.revoked = revoked
                if held { response.message = "held by the daemon until the database takes writes again" }
                return response
            } catch {
                return .failure(error.exitCode, error.message)
            }
        case .restore:
            guard let app = request.app else {
                return .failure(CommandError.Kind.usage.rawValue, "restore needs an app")
            }
            do {
                var response = ControlResponse(ok: true)
                response.restored = try reloader.restore(app: app, grant: request.grant, requester: peer.pid)
                return response
            } catch {
                return .failure(error.exitCode, error.message)
            }
        case .register:
            guard let app = request.app else {
                return .failure(CommandError.Kind.usage.rawValue, "register needs an app")
            }
            guard fileSystem.snapshot.apps[app] != nil else {
                return .failure(CommandError.Kind.unknown.rawValue, CommandError.unknownApp(app).message)
            }
            switch tracker.register(pid: peer.pid, app: app) {
            case .success:
                var response = ControlResponse(ok: true, mountpoint: mountpoint)
                response.daemon = getpid()
                response.runAs = Self.appAccount
                response.appEndpoint = Self.sandboxEndpoint
                return response
            case .failure(.alreadyApp(let existing)):
                return .failure(
                    CommandError.Kind.refused.rawValue,
                    "refused: this process already is an app process of \(existing); an app cannot start an app (SPEC S5)"
                )
            case .failure(.gone):
                return .failure(CommandError.Kind.refused.rawValue, "the registering process is gone")
            case .failure(.noCgroup):
                return .failure(
                    CommandError.Kind.ioError.rawValue,
                    "cannot make or join a cgroup for this run (\(tracker.attribution)): \(String(cString: strerror(errno)))"
                )
            }
        case .resolve:
            guard let token = request.bookmark else {
                return .failure(CommandError.Kind.usage.rawValue, "resolve needs a bookmark")
            }
            guard let app = peerApp else {
                return .failure(
                    CommandError.Kind.refused.rawValue,
                    "only an app process can resolve its bookmarks; run the resolver with `scopefs run --app APP`")
            }
            do {
                let resolution = try documents.resolve(token, by: app, pid: peer.pid)
                var response = ControlResponse(ok: true, mountpoint: mountpoint)
                response.resolution = resolution
                response.path = mountpoint + "/" + app + "/" + resolution.pathInApp
                return response
            } catch {
                return .failure(error.exitCode, error.message)
            }
        case .faultAdd, .faultList, .faultClear:
            return FaultHandling.handle(request, faults: fileSystem.faults)
        case .pick, .agentNext, .agentAnswer:
            return PickHandling.handle(request, peer: peer, peerApp: peerApp, picks: picks)
        case .query:
            guard let app = peerApp else {
                return .failure(CommandError.Kind.refused.rawValue, "only an app process can query its documents")
            }
            return QueryHandling.handle(request, app: app, state: options.state) { fileSystem.snapshot }
        case .claimForTransfer:
            return CoordinationHandling.claimForTransfer(
                request, pid: peer.pid, coordinator: coordinator, snapshot: fileSystem.snapshot,
                containers: options.state.containersPath)
        case .release where peerApp == nil:
            // The owner's transfer ends its claims.
            guard let claim = request.claim, coordinator.release(claim, pid: peer.pid) else {
                return .failure(CommandError.Kind.unknown.rawValue, "this process holds no such claim")
            }
            return ControlResponse(ok: true)
        case .coordinate, .release:
            guard let app = peerApp else {
                return .failure(
                    CommandError.Kind.refused.rawValue, "only an app process coordinates its access to documents")
            }
            return CoordinationHandling.handle(
                request, app: app, pid: peer.pid, coordinator: coordinator, snapshot: fileSystem.snapshot,
                appRoot: mountpoint + "/" + app, containers: options.state.containersPath)
        case .watch:
            guard let app = peerApp else {
                return .failure(CommandError.Kind.refused.rawValue, "only an app process can watch its documents")
            }
            // A presenter holds an app connection while it waits: short polls.
            let (notices, cursor) = reloader.notices.notices(
                for: app, after: request.after, wait: min(max(request.waitSeconds ?? 10, 0), 10))
            var response = ControlResponse(ok: true)
            response.notices = notices
            response.cursor = cursor
            return response
        case .status:
            let counters = scopes.processes
            // bubblewrap's own processes (the sandbox's keeper and its pid 1)
            // are in the run's cgroup but are not the app's (issue 31).
            let processes = tracker.appProcesses.filter { !Sandbox.isBubblewrap(pid: $0.key.pid) }.map { process in
                let held = counters[process.key.pid]
                return DaemonStatus.AppProcessStatus(
                    pid: process.key.pid, app: process.app, parent: process.parent,
                    scopes: (held?.counts ?? [:]).sorted { $0.key < $1.key }.map {
                        DaemonStatus.ScopeStatus(grant: $0.key, path: held?.paths[$0.key] ?? "", count: $0.value)
                    },
                    budgetUsed: held?.outstanding ?? 0, budgetExhausted: held?.exhausted ?? false)
            }
            let status = DaemonStatus(
                pid: getpid(), mountpoint: mountpoint, stateDirectory: options.state.path,
                openFiles: options.openFiles.rawValue, scopes: options.scopeMode.rawValue,
                scopeBudget: options.scopeBudget,
                followsProcessEvents: tracker.followsEvents, attribution: tracker.attribution,
                policyGeneration: fileSystem.snapshot.generation, policyFailure: reloader.failure,
                inodes: fileSystem.inodeCount,
                processes: processes, stranded: strandedStatus(tracker),
                faults: fileSystem.faults.rules, hostChanges: channel.name, cacheTimeout: channel.cacheTimeout)
            return ControlResponse(ok: true, mountpoint: mountpoint, status: status)
        }
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

    private static func strandedStatus(_ tracker: ProcessTracker) -> [DaemonStatus.StrandedProcessStatus] {
        (tracker.stranded?.processes ?? []).flatMap { record, pids in
            pids.map {
                DaemonStatus.StrandedProcessStatus(
                    pid: $0, app: record.app, daemon: record.daemon, mountpoint: record.mountpoint,
                    state: "on a dead mount")
            }
        }
    }
}

/// The host-change channel and cache timeout a mount runs with (status).
struct ChannelStatus: Sendable {
    var name: String
    var cacheTimeout: Double
}
