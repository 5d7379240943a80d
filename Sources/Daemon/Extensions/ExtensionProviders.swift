import CommandErrors
import Control
import Foundation
import Glibc
import Logging
import Policy
import PolicyStore
import ProviderExtensions
import ScopeFS
import Synchronization
import SystemPackage

/// The daemon's extension providers (SPEC S41): for each provider with an
/// extension, its supervised process (`ExtensionHost`), its replica
/// (`ExtensionProvider`) and the mount's hook into it. Started with the
/// daemon and when the policy adds one; stopped when it is removed.
final class ExtensionProviders: Sendable {
    private let state: StateDirectory
    private let mountpoint: String
    private let fileSystem: ScopeFileSystem
    private let events: any EventSink
    private let logger: Logger
    /// Presenters' `state` notices (S42): an item's state changed.
    private let stateChanged: @Sendable (ProviderID, String) -> Void
    /// Drops what the kernel caches of a replica file (its pages and
    /// attributes, in every view) after its content went (an evict).
    private let contentDropped: @Sendable (ProviderID, UInt64) -> Void
    /// A conflict copy was made: `ConflictGrants` shows it to the apps that
    /// hold only the original (provider, original, copy).
    private let conflictKept: @Sendable (ProviderID, String, String) -> Void
    private let running = Mutex<[ProviderID: Running]>([:])
    /// Apps' waits for downloads, bounded across every provider (S40).
    private let downloadWaits = DownloadWaits()
    /// On a fleet the providers come from the shared store, which holds
    /// data for this host, never code: only built-in extensions start,
    /// and no `--writable` path is opened (decision 63).
    private let builtInsOnly: Bool

    struct Running: Sendable {
        var spec: ProviderExtensionSpec
        var host: ExtensionHost
        var replica: ExtensionProvider
        var writer: ReplicaWriterProcess
        /// The owner's remote rules and edits, between replica and host.
        var remote: RemoteFaults
    }

    init(
        state: StateDirectory, mountpoint: String, fileSystem: ScopeFileSystem, events: any EventSink, logger: Logger,
        builtInsOnly: Bool, stateChanged: @escaping @Sendable (ProviderID, String) -> Void,
        contentDropped: @escaping @Sendable (ProviderID, UInt64) -> Void,
        conflictKept: @escaping @Sendable (ProviderID, String, String) -> Void
    ) {
        self.contentDropped = contentDropped
        self.conflictKept = conflictKept
        self.builtInsOnly = builtInsOnly
        self.stateChanged = stateChanged
        self.state = state
        self.mountpoint = mountpoint
        self.fileSystem = fileSystem
        self.events = events
        self.logger = logger
    }

    /// Brings the running extensions in line with the policy: its
    /// providers, and the apps that never download.
    func follow(_ snapshot: PolicySnapshot) {
        follow(Array(snapshot.providers.values))
        let never = Set(snapshot.apps.values.filter { $0.downloads == .never }.map(\.id))
        for entry in running.withLock({ Array($0.values) }) where entry.replica.neverDownload != never {
            entry.replica.neverDownload = never
        }
    }

    private func follow(_ providers: [Provider]) {
        let wanted = Dictionary(
            providers.compactMap { provider in provider.extension.map { (provider.id, (provider, $0)) } },
            uniquingKeysWith: { a, _ in a })
        let (stale, missing) = running.withLock { running in
            (
                running.filter { wanted[$0.key]?.1 != $0.value.spec }.map(\.key),
                wanted.filter { running[$0.key] == nil || running[$0.key]?.spec != $0.value.1 }.map(\.value)
            )
        }
        for id in stale { stop(id) }
        for (provider, spec) in missing {
            do { try start(provider, spec) } catch {
                logger.error("cannot start the extension of provider \(provider.id): \(error)")
                record(provider.id, operation: "failed", message: "\(error)", errno: EIO)
            }
        }
    }

    func stopAll() {
        for id in running.withLock({ Array($0.keys) }) { stop(id) }
    }

    /// A revoke: the app's downloads end at once (EINTR), on every provider.
    func cancelDownloads(of app: AppID) {
        for entry in running.withLock({ Array($0.values) }) { entry.replica.cancelDownloads(of: app) }
    }

    func replica(_ provider: ProviderID) -> ExtensionProvider? { running.withLock { $0[provider]?.replica } }

    /// The process of a provider's extension (its state, a restart).
    func host(_ provider: ProviderID) -> ExtensionHost? { running.withLock { $0[provider]?.host } }
    func remoteFaults(_ provider: ProviderID) -> RemoteFaults? { running.withLock { $0[provider]?.remote } }

    /// A fleet claim's key for the provider item `p/PROVIDER/PATH` of an
    /// extension: `x/PROVIDER/ID`, the extension's identifier, which every
    /// host's replica gives the same item and a remote rename keeps
    /// (decision 63); nil for a local folder's item or one the replica
    /// does not know.
    func fleetKey(of location: String) -> String? {
        let parts = location.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "p", let replica = replica(String(parts[1])),
            let id = replica.itemIdentifier(at: String(parts[2]))
        else { return nil }
        return "x/\(parts[1])/\(id)"
    }

    var statuses: [ProviderExtensionStatus] {
        running.withLock { Array($0) }.sorted { $0.key < $1.key }.map { id, entry in
            let status = entry.replica.status
            return ProviderExtensionStatus(
                provider: id, extension: entry.spec.name ?? entry.spec.command?.first ?? "?",
                state: Self.describe(entry.host.state), items: status.items, cachedBytes: status.cachedBytes,
                quotaBytes: status.quotaBytes, pinned: status.pinned, queued: status.queued,
                uploading: status.uploading, conflicts: status.conflicts, errors: status.errors,
                offline: status.offline, lastError: status.lastError)
        }
    }

    static func describe(_ state: ExtensionState) -> String {
        switch state {
        case .starting: "starting"
        case .running(let info): "running (\(info.name) \(info.version))"
        case .restarting(let reason, let attempt): "restarting (attempt \(attempt): \(reason))"
        case .failed(let reason): "failed: \(reason)"
        case .stopped: "stopped"
        }
    }

    private func start(_ provider: Provider, _ spec: ProviderExtensionSpec) throws {
        if builtInsOnly, let why = spec.refusedOnFleet { throw ExtensionCommands.Failure.notBuiltIn(why) }
        let layout = ExtensionLayout(state: state, provider: provider.id)
        try layout.create()
        let command = try ExtensionCommands.resolve(spec)
        let id = provider.id
        let host = ExtensionHost(
            providerID: id, command: command, options: spec.options, stagingDirectory: layout.staging,
            sandbox: ExtensionCommands.sandbox(for: spec, hiding: [state.path, mountpoint]),
            tunables: ExtensionCommands.tunables, logger: logger,
            events: { [weak self] event in self?.recordHostEvent(id, event) })
        let writer = ReplicaWriterProcess(executable: ExtensionCommands.ownExecutable, root: provider.directory)
        let remote = RemoteFaults(
            host, provider: id, faults: fileSystem.faults, stallLimit: ExtensionCommands.tunables.stallLimit,
            record: { [events] event in events.record(event) })
        let replica = try ExtensionProvider(
            providerID: id, calls: remote, folder: ReplicaFolder(root: provider.directory), writer: writer,
            store: ReplicaStore(path: layout.database), staging: layout.staging,
            tunables: ExtensionCommands.replicaTunables, logger: logger,
            events: { [weak self] event in self?.recordReplicaEvent(event) },
            ownWrite: { [fileSystem] inode in fileSystem.noteOwnWrite(provider: id, inode: inode) })
        replica.quota = spec.cacheQuota
        replica.onStateChange = { [stateChanged] path in stateChanged(id, path) }
        replica.onContentDropped = { [contentDropped] inode in contentDropped(id, inode) }
        replica.neverDownload = Set(
            fileSystem.snapshot.apps.values.filter { $0.downloads == .never }.map(\.id))
        running.withLock { $0[id] = Running(spec: spec, host: host, replica: replica, writer: writer, remote: remote) }
        host.start()
        replica.start()
        fileSystem.setContent(
            ExtensionContent(replica: replica, provider: id, waits: downloadWaits, events: events), for: id)
        logger.info("provider \(id): extension \(command.joined(separator: " ")) started")
    }

    private func stop(_ id: ProviderID) {
        guard let entry = running.withLock({ $0.removeValue(forKey: id) }) else { return }
        fileSystem.setContent(nil, for: id)
        // The host first: a pull or push the sync thread is inside ends
        // with it (its calls fail), so the unmount never waits for a slow
        // extension's answer, up to the stall limit.
        entry.replica.beginStop()
        entry.host.stop()
        entry.replica.stop()
        entry.writer.stop()
    }

    private func recordHostEvent(_ provider: ProviderID, _ event: ExtensionEvent) {
        let errno: Int32? =
            if case .error(_, let code, _) = event {
                ExtensionErrorCode(rawValue: code).map { ExtensionFailure($0, "").errno }
            } else { nil }
        record(provider, operation: event.name, message: event.message, errno: errno)
    }

    private func recordReplicaEvent(_ event: ProviderEvent) {
        if event.kind == .conflict, let original = event.original, let copy = event.path {
            conflictKept(event.provider, original, copy)
        }
        let path = "/Providers/\(event.provider)" + (event.path.map { "/" + $0 } ?? "")
        events.record(
            Event(
                time: Date().timeIntervalSince1970, kind: event.kind == .conflict ? .conflict : .extension, app: nil,
                path: path, operation: event.kind == .conflict ? "conflict" : event.message, errno: event.errno))
    }

    private func record(_ provider: ProviderID, operation: String, message: String, errno: Int32?) {
        logger.info("provider \(provider): \(message)")
        events.record(
            Event(
                time: Date().timeIntervalSince1970, kind: .extension, app: nil, path: "/Providers/\(provider)",
                operation: "\(operation): \(message)", errno: errno))
    }
}

/// The mount's hook into one replica (`ProviderContent`): errors become
/// the errnos docs/PROVIDERS.md names, a signal to the app cancels its
/// download (EINTR).
final class ExtensionContent: ProviderContent {
    let replica: ExtensionProvider
    private let provider: ProviderID
    private let waits: DownloadWaits
    private let events: any EventSink

    init(replica: ExtensionProvider, provider: ProviderID, waits: DownloadWaits, events: any EventSink) {
        self.replica = replica
        self.provider = provider
        self.waits = waits
        self.events = events
    }

    func prepareRead(_ file: ContentFile, offset: Int64, length: Int, edition: UInt64?, interruption: Interruption)
        throws(Errno)
    {
        // Changed remotely since this descriptor's open: its earlier reads
        // were of the old version, so none of the new one (issue 47).
        let state = replica.readState(inode: file.inode)
        if let edition, state.edition != edition { throw .staleNFSFileHandle }
        // A warm read sets up no wait: no control, no libfuse interrupt hook.
        guard state.missing != nil else { return }
        try waiting(file, "read", interruption) { control throws(ExtensionFailure) in
            try replica.prepareRead(
                inode: file.inode, offset: offset, length: length, app: file.app, control: control, edition: edition,
                interrupted: { interruption.signalPending() })
        }
    }

    func prepareOpen(_ file: ContentFile, writes: Bool, truncates: Bool, interruption: Interruption) throws(Errno) {
        // Only a writer that keeps the content waits for it.
        guard writes && !truncates && replica.missingContent(inode: file.inode) != nil else {
            replica.opened(inode: file.inode)
            return
        }
        try waiting(file, "open", interruption) { control throws(ExtensionFailure) in
            try replica.prepareOpen(
                inode: file.inode, writes: writes, truncates: truncates, app: file.app, control: control,
                interrupted: { interruption.signalPending() })
        }
    }

    func prepareTruncate(_ file: ContentFile, toZero: Bool, interruption: Interruption) throws(Errno) {
        guard !toZero else { return }
        try waiting(file, "truncate", interruption) { control throws(ExtensionFailure) in
            try replica.materializeWhole(
                inode: file.inode, app: file.app, control: control, interrupted: { interruption.signalPending() })
        }
    }

    func closed(_ file: ContentFile, wrote: Bool) {
        replica.released(inode: file.inode)
        if wrote { replica.settled(inode: file.inode) }
    }

    func edition(_ file: ContentFile) -> UInt64 { replica.edition(inode: file.inode) }
    func willWrite(_ file: ContentFile, edition: UInt64?) throws(Errno) {
        guard replica.willWrite(inode: file.inode, edition: edition) else { throw .staleNFSFileHandle }
    }
    func didWrite(_ file: ContentFile) { replica.didWrite(inode: file.inode) }
    func created(_ file: ContentFile, open: Bool) {
        replica.created(inode: file.inode)
        if open { replica.opened(inode: file.inode) }
    }
    func synced(_ file: ContentFile) { replica.settled(inode: file.inode) }
    func namespaceChanged(provider: ProviderID) { replica.localChanged() }

    func refusal(of operation: FileOperation, provider: ProviderID) -> Errno? {
        guard let capabilities = replica.capabilities else { return nil }
        switch operation {
        case .link, .mknod: return .notPermitted
        case .symlink: return capabilities.symlinks ? nil : .notPermitted
        case .rename: return capabilities.rename ? nil : .improperLink
        default: return nil
        }
    }

    func presentedBlocks(_ file: ContentFile, _ info: stat) -> blkcnt_t {
        blkcnt_t(replica.presentedBlocks(inode: file.inode, size: Int64(info.st_size), blocks: Int64(info.st_blocks)))
    }

    func state(_ file: ContentFile) -> String? { replica.state(inode: file.inode) }
    func progress(_ file: ContentFile) -> String? { replica.progress(inode: file.inode) }
    func dataRanges(_ file: ContentFile) -> [Range<Int64>]? { replica.presentRanges(inode: file.inode) }
    /// A preview the extension must be asked for holds a worker of the
    /// mount as a download does: within the app's bound of waits (S40);
    /// past it, none now (ENODATA), and nothing is kept of the refusal.
    func thumbnail(_ file: ContentFile) -> [UInt8]? {
        if let known = replica.knownThumbnail(inode: file.inode) { return known }
        if let app = file.app {
            guard waits.enter(app) else { return nil }
        }
        defer { if let app = file.app { waits.leave(app) } }
        return replica.thumbnail(inode: file.inode)
    }
    func saveThumbnail(_ file: ContentFile, _ bytes: [UInt8]?) { replica.saveThumbnail(inode: file.inode, bytes) }

    /// Runs `body`, which may wait for a download, within the app's bound
    /// of waits (S40) and ended by a signal to it.
    private func waiting(
        _ file: ContentFile, _ operation: String, _ interruption: Interruption,
        _ body: (RequestControl) throws(ExtensionFailure) -> Void
    ) throws(Errno) {
        if let app = file.app {
            guard waits.enter(app) else {
                events.record(
                    Event(
                        time: Date().timeIntervalSince1970, kind: .downloadBudgetExhausted, app: app,
                        path: "/Providers/\(provider)", operation: operation, errno: EAGAIN, count: waits.perApp))
                throw .resourceTemporarilyUnavailable
            }
        }
        defer { if let app = file.app { waits.leave(app) } }
        let control = RequestControl()
        do {
            try interruption.whileInterruptible({ control.cancel() }) { () throws(ExtensionFailure) in
                try body(control)
            }
        } catch {
            if ExtensionProvider.isPolicyRefusal(error) {
                throw Errno(rawValue: ExtensionProvider.neverDownloadErrno)
            }
            throw Errno(rawValue: error.errno)
        }
    }
}
