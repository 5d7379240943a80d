import CommandErrors
import Control
import FleetStore
import Foundation
import FuseBridge
import Logging
import Policy
import PolicyStore
import Processes
import ScopeFS
import Synchronization

/// Keeps the file system's policy snapshot in step with the database
/// (SPEC S13): on a CLI's reload request, and when the database changes
/// behind the daemon's back. After installing a snapshot it drops the
/// kernel's caches of revoked items — always from this (non-FUSE) thread,
/// since the kernel may be waiting on a FUSE worker (docs/DECISIONS.md, decision 3).
///
/// It fails closed (issue 15): when the file it serves from is deleted,
/// replaced, unreadable or corrupt, every grant is served as revoked until
/// a valid database is back at the path — the user could not revoke
/// through a database the daemon no longer reads.
final class PolicyReloader: Sendable {
    private struct Installed {
        var generation: UInt64
        /// The policy version the snapshot reflects; nil while failed closed,
        /// so whatever database comes back is loaded.
        var version: Int64?
        /// The database file as last checked (stat), to notice changes.
        var file: FileState?
        /// Why no grant is served, and since when; nil while serving.
        var failure: (reason: String, since: Double)?
        /// Revocations asked of the daemon that the database does not show
        /// yet (it could not be written): served as revoked over whatever
        /// the database says, and written to it as soon as it takes writes.
        /// Kept with the grant's app and item: a database made anew numbers
        /// its grants from 1 again, and another grant must not be hit.
        var held: [GrantID: Grant] = [:]
    }

    let repository: PolicyRepository
    /// The fleet's shared store when the state directory has one (SPEC
    /// S44): the snapshot comes from there, and the SQLite file keeps only
    /// what is this host's own (events, documents).
    let fleet: FleetLink?
    /// The store the served policy comes from and the owner's commands
    /// change: on a fleet the shared store, whose roles decide (a host's
    /// may not grant), never the local file, which no host serves (SPEC S44).
    var policyStore: any IsolationStore { fleet?.repository ?? repository }
    private let fileSystem: ScopeFileSystem
    private let session: FuseSession
    private let events: any EventSink
    private let logger: Logger
    /// What presenters hear of each change (issue 17).
    let notices: NoticeBoard
    /// Held for a whole check and reload, so snapshots are installed in order.
    private let installed: Mutex<Installed>
    /// Providers a reload brought whose folder overlaps a mount here: never served.
    private let overlaps: ProviderOverlaps
    private let afterInstall = Mutex<(@Sendable (PolicySnapshot, PolicySnapshot) -> Void)?>(nil)
    /// Where the portal's layout reads the version served (issue 52).
    private let page: ServedPolicyPage.Publisher?

    /// `version`: the policy version of the snapshot the file system started with.
    init(
        repository: PolicyRepository, fileSystem: ScopeFileSystem, session: FuseSession, version: Int64,
        events: any EventSink, logger: Logger, notices: NoticeBoard = NoticeBoard(), fleet: FleetLink? = nil,
        page: ServedPolicyPage.Publisher? = nil
    ) {
        self.page = page
        self.fleet = fleet
        self.notices = notices
        self.repository = repository
        self.fileSystem = fileSystem
        self.session = session
        self.events = events
        self.installed = Mutex(
            Installed(
                generation: fileSystem.snapshot.generation, version: version,
                file: repository.database.identity, failure: nil))
        self.logger = logger
        self.overlaps = ProviderOverlaps(initial: fileSystem.snapshot)
    }

    /// Why the daemon serves no grant (for `scopefs status`), nil when it serves the database.
    var failure: String? { installed.withLock { $0.failure?.reason } }

    /// Installs the policy as the database has it now, unless the installed
    /// snapshot already reflects its version: a change is loaded once, by
    /// whichever of the CLI's request and the watch sees it first. Checks
    /// the file first: a stat(2) per call, and a `quick_check` through a
    /// connection of its own when the file changed (a CLI's checkpoint, or
    /// a write behind SQLite's back that the daemon's page cache would hide).
    func reload() throws(CommandError) {
        try installed.withLock { installed throws(CommandError) in
            // What the portal's layout reads (`ServedPolicyPage`): the
            // store's direct writes counted before it is read, and the
            // version served after, before any caller hears of the change.
            let seen = page?.directWrites()
            defer { if let seen { page?.publish(version: installed.version, seen: seen) } }
            if let fleet { return reloadFleet(&installed, fleet) }
            let path = repository.database.location
            let file = FileState(path: path)
            // Failed closed and nothing new at the path: nothing to try again.
            if installed.failure != nil, let file, file == installed.file { return }
            // The snapshot served is the store's at `installed.version`, and
            // what changed since can be applied to it, unless another file
            // is opened now or the snapshot holds more than the store does.
            var appliesChanges = installed.failure == nil && installed.held.isEmpty
            if file == nil || file != installed.file || installed.failure != nil {
                installed.file = file
                guard let file else {
                    let reason =
                        access(path, F_OK) == 0
                        ? "database \(path) cannot be examined: \(String(cString: strerror(errno)))"
                        : "database \(path) was deleted"
                    return failClosed(&installed, reason, file: nil)
                }
                do throws(CommandError) {
                    try PolicyDatabase.verify(path: path)
                    if let opened = repository.database.identity, opened.isSameFile(as: file), installed.failure == nil
                    {
                        // The same file, changed by SQLite (a checkpoint): the
                        // connections' caches follow it.
                    } else {
                        // A new file at the path: let go of the old one first
                        // (see `release`). The same file rewritten: the new
                        // connections open before the old ones close, so
                        // closing them checkpoints nothing into it.
                        if !isOpened(file) { repository.database.release() }
                        try repository.database.reopen()
                        appliesChanges = false
                    }
                } catch {
                    let sameFile = repository.database.identity.map { $0.isSameFile(as: file) } ?? false
                    let reason =
                        sameFile || installed.failure != nil
                        ? error.message : "database \(path) was replaced by a file that is unusable: \(error.message)"
                    return failClosed(&installed, reason, file: file)
                }
            }
            if !installed.held.isEmpty { writeHeld(&installed) }
            do throws(CommandError) {
                guard try repository.policyVersion() != installed.version else { return }
                let generation = installed.generation + 1
                let reading = ContinuousClock.now
                let (current, version, changed) = try read(
                    repository, since: appliesChanges ? installed.version : nil, generation: generation
                ) { () throws(CommandError) in try repository.versionedSnapshot(generation: generation) }
                let took = ContinuousClock.now - reading
                var snapshot = current
                installed.held = installed.held.filter { id, held in
                    snapshot.grantsByID[id].map { $0.state == .active && $0.app == held.app && $0.item == held.item }
                        ?? false
                }
                if !installed.held.isEmpty {
                    snapshot = Self.revoking(Set(installed.held.keys), in: snapshot, generation: generation)
                }
                installed.generation = generation
                installed.version = version
                if let failure = installed.failure {
                    installed.failure = nil
                    logger.notice(
                        "serving \(path) again (failed closed since \(Date(timeIntervalSince1970: failure.since)): \(failure.reason))"
                    )
                    events.record(
                        Event(
                            time: failure.since, kind: .policyFailedClosed, app: nil, path: path,
                            operation: failure.reason,
                            errno: EPERM, lastTime: Date().timeIntervalSince1970))
                }
                install(snapshot, version: version, read: took, changed: changed)
            } catch {
                if error.kind == .badState || error.kind == .ioError {
                    return failClosed(&installed, error.message, file: file)
                }
                throw error
            }
        }
    }

    /// Serves every grant as revoked (EPERM, SPEC S14), open files included:
    /// apps, providers and items stay as they were, so each app's tree keeps
    /// its shape and nothing it lists turns into ENOENT. Containers keep
    /// working: they are the app's own files, not the policy's, and an app
    /// that cannot write its own data would only fail in new ways.
    private func failClosed(_ installed: inout Installed, _ reason: String, file: FileState?) {
        if installed.failure == nil {
            installed.failure = (reason, Date().timeIntervalSince1970)
            logger.error("failing closed, no grant is served: \(reason)")
        } else {
            installed.failure?.reason = reason
        }
        // Let SQLite close a lost file before a new one at the path is
        // opened. A corrupt file still at the path keeps its connections:
        // closing the last one would checkpoint the daemon's WAL into it,
        // and S34 leaves a corrupt database untouched.
        if fleet == nil && !(file.map(isOpened) ?? false) { repository.database.release() }
        guard installed.version != nil else { return }
        let current = fileSystem.snapshot
        let generation = installed.generation + 1
        installed.generation = generation
        installed.version = nil
        install(Self.revoking(Set(current.grantsByID.keys), in: current, generation: generation))
    }

    /// Revokes through the daemon (the `revoke` control operation): with
    /// its own connection first — it may still write (its WAL) where a CLI
    /// cannot open the file for writing (`chattr +i`) — else held in memory
    /// and served at once (see `Installed.held`). Returns the grants revoked.
    /// `requester`: the process the revoke event names (the owner's CLI).
    func revoke(app: AppID, grant: GrantID?, state: StateDirectory, requester: Int32 = getpid()) throws(CommandError)
        -> (grants: [Grant], held: Bool)
    {
        if let fleet {
            // Stored in the shared store or refused: never held here (SPEC S44).
            let changed = try fleet.repository.setState(.revoked, app: app, grant: grant)
            try reload()
            return (changed, false)
        }
        do throws(CommandError) {
            let changed =
                try OwnerPolicy.apply(
                    .revoke(app: app, grant: grant), repository: repository, state: state,
                    requester: requester
                ).revoked ?? []
            try reload()
            if failure == nil { return (changed, false) }
        } catch  where error.kind == .unknown {
            throw error
        } catch {
            logger.warning("revoke for \(app) cannot be written to the database, held by the daemon: \(error.message)")
        }
        return try installed.withLock { installed throws(CommandError) in
            let current = fileSystem.snapshot
            guard current.apps[app] != nil else { throw CommandError.unknownApp(app) }
            let grants = current.grants(of: app).filter { grant == nil || $0.id == grant }
            if let grant, grants.isEmpty {
                throw CommandError(.unknown, "app \(app) has no grant \(grant); see `scopefs privacy \(app)`")
            }
            // Failed closed, every grant shows as revoked: hold them all, so
            // that the database, once back, does not bring them back.
            let targets = installed.failure == nil ? grants.filter { $0.state == .active } : grants
            for target in targets { installed.held[target.id] = target }
            if installed.failure == nil {
                installed.generation += 1
                install(Self.revoking(Set(installed.held.keys), in: current, generation: installed.generation))
            }
            return (targets.map { $0.with(state: .revoked) }, true)
        }
    }

    /// The fleet's version of `reload`: a new snapshot when the shared
    /// store's version moved; without the store, the grants stay served
    /// until the lease runs out, then every one is served as revoked.
    private func reloadFleet(_ installed: inout Installed, _ fleet: FleetLink) {
        do throws(CommandError) {
            let version = try fleet.repository.policyVersion()
            fleet.reached()
            guard version != installed.version || installed.failure != nil else { return }
            let generation = installed.generation + 1
            let reading = ContinuousClock.now
            // A whole read may take longer than a call: a second or so per
            // 100,000 grants (issue 34's million took about 3 s).
            let allowance = Double(fileSystem.snapshot.grantsByID.count) / 100_000
            let (snapshot, loaded, changed) = try read(
                fleet.repository, since: installed.failure == nil ? installed.version : nil, generation: generation
            ) { () throws(CommandError) in
                try fleet.repository.versionedSnapshot(generation: generation, allowance: allowance)
            }
            let took = ContinuousClock.now - reading
            installed.generation = generation
            installed.version = loaded
            if let failure = installed.failure {
                installed.failure = nil
                logger.notice(
                    "serving the fleet's policy again (failed closed since \(failure.since)): \(failure.reason)")
                let event = Event(
                    time: failure.since, kind: .policyFailedClosed, app: nil, path: fleet.description,
                    operation: failure.reason, errno: EPERM, lastTime: Date().timeIntervalSince1970)
                events.record(event)
                // The fleet hears of it too, with this host's name (its role may write events).
                do throws(CommandError) { try fleet.repository.record(event) } catch {
                    logger.warning("cannot record the fail-closed period in the fleet's events: \(error.message)")
                }
            }
            install(snapshot, version: loaded, read: took, changed: changed)
        } catch {
            fleet.lost(error.message)
            if let expired = fleet.leaseExpired() {
                return failClosed(&installed, expired, file: nil)
            }
            logger.warning("fleet database unreachable, serving within the lease: \(error.message)")
        }
    }

    /// The policy version served; nil while failed closed.
    var servedVersion: Int64? { installed.withLock { $0.version } }

    private func isOpened(_ file: FileState) -> Bool {
        repository.database.identity?.isSameFile(as: file) ?? false
    }

    /// Writes held revocations to the database when it takes writes again.
    private func writeHeld(_ installed: inout Installed) {
        for (id, held) in installed.held.sorted(by: { $0.key < $1.key }) {
            do throws(CommandError) {
                // Only the same grant: same app and item (see `Installed.held`).
                let stored = try repository.grants(app: held.app).first { $0.id == id }
                if let stored, stored.item == held.item {
                    _ = try repository.setState(.revoked, app: held.app, grant: id)
                }
                installed.held[id] = nil
            } catch  where error.kind == .unknown {
                installed.held[id] = nil  // its app is gone from the database
            } catch {
                return  // not readable or writable yet: try again on the next check
            }
        }
    }

    private static func revoking(_ held: Set<GrantID>, in snapshot: PolicySnapshot, generation: UInt64)
        -> PolicySnapshot
    {
        PolicySnapshot(
            generation: generation, apps: Array(snapshot.apps.values), providers: Array(snapshot.providers.values),
            grants: snapshot.grantsByID.values.map { held.contains($0.id) ? $0.with(state: .revoked) : $0 },
            items: snapshot.items)
    }

    /// Called after each install with the previous and the new snapshot
    /// (extension providers follow the policy's providers and revokes).
    func onInstall(_ handler: @escaping @Sendable (PolicySnapshot, PolicySnapshot) -> Void) {
        afterInstall.withLock { $0 = handler }
    }

    /// The store's policy now: the snapshot served with what changed since
    /// `served` when the store can say (`IsolationStore.changes(since:)`),
    /// else `whole()`. Returns how many grants the changes named (nil:
    /// read whole). A revoke among a million grants reads one grant and
    /// rebuilds one app's indexes, where a whole read took seconds.
    private func read(
        _ store: any IsolationStore, since served: Int64?, generation: UInt64,
        whole: () throws(CommandError) -> (snapshot: PolicySnapshot, version: Int64)
    ) throws(CommandError) -> (snapshot: PolicySnapshot, version: Int64, changed: Int?) {
        if let served, let changes = try changesUnlessRefused(store, since: served) {
            let snapshot = fileSystem.snapshot.applying(changes, generation: generation)
            return (snapshot, changes.version, changes.grants.count + changes.removedGrants.count)
        }
        let (snapshot, version) = try whole()
        return (snapshot, version, nil)
    }

    /// `store.changes(since:)`, or nil where the store refuses it (a fleet
    /// host role without the right to read the change log): the whole
    /// policy is read then, as before the log existed, never failed closed.
    private func changesUnlessRefused(_ store: any IsolationStore, since served: Int64) throws(CommandError)
        -> PolicyChanges?
    {
        do {
            return try store.changes(since: served)
        } catch  where error.kind == .refused {
            logger.warning("reading the whole policy after each change: \(error.message)")
            return nil
        }
    }

    /// `install` of a snapshot read from the store: logs how long the read
    /// and the install took (at scale, what bounds a change's way to EPERM).
    private func install(_ snapshot: PolicySnapshot, version: Int64, read: Duration, changed: Int?) {
        let installing = ContinuousClock.now
        install(snapshot)
        let installed = ContinuousClock.now - installing
        let how = changed.map { "\($0) changed grants of \(snapshot.grantsByID.count)" } ?? "the whole policy"
        logger.debug(
            "policy version \(version): read \(how) in \(Self.milliseconds(read)) ms, installed in \(Self.milliseconds(installed)) ms"
        )
    }

    private static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(format: "%.1f", Double(seconds) * 1000 + Double(attoseconds) / 1e15)
    }

    private func install(_ read: PolicySnapshot) {
        let (snapshot, refusals) = overlaps.served(read)
        refusals.forEach(tell)
        dropPagesEarly(fileSystem.pagesLosingAccess(to: snapshot))
        let previous = fileSystem.snapshot
        let invalidation = fileSystem.install(snapshot)
        afterInstall.withLock { $0 }?(previous, snapshot)
        notices.post(from: previous, to: snapshot)
        session.invalidate(invalidation)
        if !invalidation.isEmpty {
            logger.debug("policy \(snapshot.generation): dropped caches of \(invalidation.inodes.count) inodes")
        }
    }

    /// A provider left out (`ProviderOverlaps`), in the daemon's log and
    /// events, and on a fleet in the fleet's events, which name this host:
    /// the owner who added it on another host learns why it is not here.
    /// The event says how the folders lie (the fleet keeps 256 characters of it).
    private func tell(_ overlap: FolderOverlap.ProviderFolderOverlap) {
        logger.error("provider \(overlap.provider) is not served on this host: \(overlap.sentence)")
        let event = Event(
            time: Date().timeIntervalSince1970, kind: .providerRefused, app: nil,
            path: "/" + MountLayout.providerPath(provider: overlap.provider, path: ""),
            operation: String(String.UnicodeScalarView(overlap.summary.unicodeScalars.prefix(256))), errno: ENOENT)
        events.record(event)
        guard let fleet else { return }
        do throws(CommandError) { try fleet.repository.record(event) } catch {
            logger.warning("cannot record the refused provider in the fleet's events: \(error.message)")
        }
    }

    /// The pages a revoke takes away go before it is in force as well as
    /// after (SPEC S14, `pagesLosingAccess`), but the install never waits
    /// on them for long: a page an app's read holds locked while it waits
    /// for a download is released only once the revoke is installed and
    /// `afterInstall` cancels that download, so dropping it here would
    /// hold the revoke for as long as the download takes (30 s seen). The
    /// drop goes on on its own thread and ends with that read.
    private func dropPagesEarly(_ inodes: [UInt64]) {
        guard !inodes.isEmpty else { return }
        let session = session
        let dropped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            for inode in inodes { session.invalidateInode(inode) }
            dropped.signal()
        }
        _ = dropped.wait(timeout: .now() + DaemonTunables.earlyPageDropWait)
    }

    func dropEntries(_ entries: [(parent: UInt64, name: String)]) {
        for entry in entries { session.invalidateEntry(parent: entry.parent, name: entry.name) }
    }

    /// Polls for policy changes made without telling the daemon (a CLI
    /// that could not reach it, another tool writing the database) and for
    /// the database file going away.
    func follow(until stop: @escaping @Sendable () -> Bool) {
        if let fleet { return fleet.follow(self, until: stop) }
        while !stop() {
            usleep(DaemonTunables.policyPollPeriod)
            do { try reload() } catch { logger.error("reload failed: \(error)") }
        }
    }
}
