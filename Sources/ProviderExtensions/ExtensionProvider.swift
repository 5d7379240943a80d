import Foundation
import Glibc
import Logging
import Synchronization

/// One provider whose items an extension supplies (SPEC S41–S43): the
/// replica folder the mount serves, kept in step with the extension both
/// ways, and its content downloaded when apps read it.
///
/// - Remote to local (`pull`): the extension's items become placeholders,
///   folders and symlinks in the replica; its changes (on `changed`, or a
///   poll) move, reset and remove them.
/// - Local to remote (`push`): what apps changed through the mount (the
///   replica's tree against the records, and the dirty marks the mount set
///   before each first write) becomes create, modify and delete with the
///   base version, in tree order; a conflict keeps both (a conflict copy).
/// - Downloads (`prepareRead`): on a FUSE worker, by range, shared by
///   concurrent readers, cancelled by the app's signal or a revoke.
///
/// One thread (`run`) does pull and push, so they never race each other;
/// downloads run on the readers' threads and meet sync under `lock`.
public final class ExtensionProvider: @unchecked Sendable {
    public let providerID: String
    let calls: any ExtensionCalls
    let folder: ReplicaFolder
    let writer: any ReplicaWriting
    let store: ReplicaStore
    let staging: String
    let tunables: ReplicaTunables
    let logger: Logger
    let events: @Sendable (ProviderEvent) -> Void
    /// Tells the mount the daemon is about to write a replica file's bytes
    /// without changing the item (a download, an eviction): not news for
    /// presenters (the inotify echo check).
    let ownWrite: @Sendable (UInt64) -> Void

    let lock = NSCondition()
    /// One save at a time (`save`): the store gets the index's changes in
    /// the order they were made.
    let saving = NSLock()
    var index: ReplicaIndex
    /// Downloads in flight, by item id.
    var downloads: [String: [Download]] = [:]
    /// Where each item's last read ended: a read there is sequential and
    /// fetches a larger window (readahead).
    var readAhead: [String: (end: Int64, window: Int64)] = [:]
    /// Open handles by inode (never evicted while open).
    var opens: [UInt64: Int] = [:]
    /// Apps' changes of content in progress and since each upload.
    var writeActivity = WriteActivity()
    /// Downloads writing files and files being replaced (never both).
    var contentWrites = ContentWrites()
    /// Remote changes of each file's content applied to the replica (its
    /// edition), by inode; absent: none since the daemon started.
    var editions: [UInt64: UInt64] = [:]
    /// Apps' downloads, to cancel on a revoke.
    var appDownloads: [String: [RequestControl]] = [:]
    /// The last failed download of each item (`recentFailure`).
    var failedDownloads: [String: [FailedDownload]] = [:]
    /// Items a download found gone from the store (`confirmVanished`).
    var vanished: Set<String> = []
    /// Called with an item's path when its state changed (downloaded,
    /// evicted, pinned, dirty, uploading, uploaded, conflict, error); set
    /// before `start`.
    public var onStateChange: (@Sendable (String) -> Void)?
    /// Called with a replica file's inode once its content was dropped
    /// (evicted): the kernel's cached pages and attributes of it must go
    /// before the owner's command returns, or `st_blocks` and reads would
    /// still show the evicted bytes (issue 47). Set before `start`; never
    /// called on a FUSE worker.
    public var onContentDropped: (@Sendable (UInt64) -> Void)?
    /// Apps that never trigger downloads (an indexer, a backup). An app
    /// set so causes no traffic from then on (S42): what it started, its
    /// read-ahead included, is cancelled, as at a revoke.
    public var neverDownload: Set<String> {
        get { lock.withLock { neverDownloadApps } }
        set {
            let added: Set<String> = lock.withLock {
                defer { neverDownloadApps = newValue }
                return newValue.subtracting(neverDownloadApps)
            }
            for app in added { cancelDownloads(of: app) }
        }
    }
    var neverDownloadApps: Set<String> = []
    /// Items' previews, fetched and saved by apps (SPEC S50).
    let previews = PreviewCache()
    /// Bytes of content kept on disk at most (nil: no quota).
    public var quota: Int64? {
        get { lock.withLock { quotaBytes } }
        set { lock.withLock { quotaBytes = newValue } }
    }
    var quotaBytes: Int64?

    // The sync thread's wake-ups.
    var wanted = Work()
    var stopping = false
    var thread: Thread?
    var finished = DispatchSemaphore(value: 0)
    /// The queue's state for `status`.
    var sync = SyncState()
    /// The capabilities of the extension's last start (`capabilities`).
    var knownCapabilities: ExtensionCapabilities?
    /// Rounds of the sync thread taken and finished (`syncNow` waits for one).
    var roundsStarted = 0
    var roundsDone = 0
    /// When a pull asked for by `changed` may come (`minPullInterval`).
    var nextPullAllowed = 0.0
    /// New items of the pulls in progress, as saved before they are made
    /// (`placing`).
    let placingJournal = Mutex<[String: ExtensionItem]>([:])

    struct Work {
        var pull = false
        var push = false
        var pushAfter: Double?
    }

    public init(
        providerID: String, calls: any ExtensionCalls, folder: ReplicaFolder, writer: any ReplicaWriting,
        store: ReplicaStore, staging: String, tunables: ReplicaTunables = ReplicaTunables(), logger: Logger,
        events: @escaping @Sendable (ProviderEvent) -> Void, ownWrite: @escaping @Sendable (UInt64) -> Void = { _ in }
    ) throws {
        self.providerID = providerID
        self.calls = calls
        self.folder = folder
        self.writer = writer
        self.store = store
        self.staging = staging
        self.tunables = tunables
        self.logger = logger
        self.events = events
        self.ownWrite = ownWrite
        index = ReplicaIndex(try store.records())
        try ensureRoot()
        adoptLeftByKilledPull()
        repairAfterCrash()
    }

    /// The root's record: the replica folder itself.
    private func ensureRoot() throws {
        guard let info = folder.status("") else { throw ReplicaFolder.Failure.system(ENOENT, folder.root) }
        if index[ExtensionItem.rootID]?.inode == UInt64(info.st_ino) { return }
        let root = ExtensionItem(
            id: ExtensionItem.rootID, parent: nil, name: "", kind: .folder, size: 0, mtime: 0, mode: 0o755,
            version: ItemVersion(content: "", metadata: ""))
        var record = ReplicaRecord(item: root, inode: UInt64(info.st_ino))
        record.cachedVersion = ""
        index.put(record)
        try store.save([record])
    }

    // MARK: The sync thread

    /// Starts the thread that pulls and pushes; it pulls at once.
    public func start() {
        lock.withLock {
            wanted.pull = true
            wanted.push = true
        }
        calls.onChanged = { [weak self] in self?.storeChanged() }
        let thread = Thread { [self] in run() }
        thread.name = "replica \(providerID)"
        self.thread = thread
        thread.start()
    }

    /// Stops the thread and waits for it; `beginStop` first when the
    /// thread may be inside a call the extension is slow to answer.
    public func stop() {
        beginStop()
        if thread != nil { finished.wait() }
        thread = nil
    }

    /// Tells the thread to stop after what it is doing (without waiting):
    /// stopping the host then ends a call it is inside at once.
    public func beginStop() {
        lock.withLock {
            stopping = true
            lock.broadcast()
        }
    }

    /// The extension's `changed`: a pull, unless one is waiting out a
    /// failure's back-off (its retry pulls). An extension that sends them
    /// without end costs a pull per `minPullInterval`, not a busy loop.
    func storeChanged() {
        lock.withLock {
            guard sync.failures == 0 else { return }
            wanted.pull = true
            lock.broadcast()
        }
    }

    /// Asks the thread to pull (remote changes) or push (local ones).
    public func wake(pull: Bool = false, push: Bool = false, after delay: Double = 0) {
        lock.withLock {
            if pull { wanted.pull = true }
            if push {
                let due = Date().timeIntervalSince1970 + delay
                wanted.pushAfter = min(wanted.pushAfter ?? due, due)
            }
            lock.broadcast()
        }
    }

    /// Pulls and pushes now and waits for it (at most `timeout` seconds);
    /// returns the state after it.
    public func syncNow(timeout: Double) -> SyncState {
        lock.withLock {
            wanted.pull = true
            wanted.push = true
            nextPullAllowed = 0
            let target = roundsStarted + 1
            lock.broadcast()
            let deadline = Date().addingTimeInterval(timeout)
            while roundsDone < target && !stopping && Date() < deadline {
                _ = lock.wait(until: min(deadline, Date().addingTimeInterval(0.1)))
            }
            return sync
        }
    }

    private func run() {
        defer { finished.signal() }
        var nextPoll = Date().timeIntervalSince1970 + tunables.pollInterval
        while true {
            let (pull, push): (Bool, Bool) = lock.withLock {
                while !stopping {
                    let now = Date().timeIntervalSince1970
                    if let due = wanted.pushAfter, due <= now {
                        wanted.pushAfter = nil
                        wanted.push = true
                    }
                    if now >= nextPoll {
                        wanted.pull = true
                        nextPoll = now + tunables.pollInterval
                    }
                    if wanted.push || (wanted.pull && now >= nextPullAllowed) { break }
                    var deadline = min(wanted.pushAfter ?? nextPoll, nextPoll)
                    if wanted.pull { deadline = min(deadline, nextPullAllowed) }
                    _ = lock.wait(until: Date(timeIntervalSince1970: deadline))
                }
                let now = Date().timeIntervalSince1970
                let work = (wanted.pull && now >= nextPullAllowed, wanted.push)
                if work.0 {
                    wanted.pull = false
                    nextPullAllowed = now + tunables.minPullInterval
                }
                wanted.push = false
                if !stopping { roundsStarted += 1 }
                return stopping ? (false, false) : work
            }
            if !pull && !push { return }
            guard calls.state.isRunning else {
                // Nothing can be done until the extension runs again: the
                // work stays wanted and is looked at again shortly.
                // Not a round: `syncNow` waits for one that ran.
                lock.withLock {
                    sync.offline = "the extension is not running"
                    if pull { wanted.pull = true }
                    if push { wanted.push = true }
                    roundsStarted -= 1
                    if !stopping { _ = lock.wait(until: Date().addingTimeInterval(0.2)) }
                }
                continue
            }
            if pull { pullOrRetry() }
            if push { pushOrRetry() }
            lock.withLock {
                roundsDone += 1
                lock.broadcast()
            }
        }
    }

    // MARK: Events

    func report(
        _ kind: ProviderEvent.Kind, _ path: String?, _ message: String, errno: Int32? = nil, original: String? = nil
    ) {
        events(
            ProviderEvent(
                kind: kind, provider: providerID, path: path, message: message, errno: errno, original: original))
        logger.info("\(providerID): \(message)")
    }

    /// Writes every record changed in the index since the last save (those
    /// of `records` and `removing` among them) as the index has it now, so
    /// a save that runs late never writes an older copy over a newer one
    /// (issue 47: a lost dirty mark is a lost write after a crash, S43).
    func save(_ records: [ReplicaRecord] = [], removing: [String] = []) {
        saving.withLock {
            let (changed, removed) = lock.withLock {
                index.markUnsaved(records.map(\.item.id) + removing)
                return index.takeUnsaved()
            }
            do { try store.save(changed, removing: removed) } catch {
                lock.withLock { index.markUnsaved(changed.map(\.item.id) + removed) }
                logger.error("\(providerID): cannot save the replica's records: \(error)")
            }
        }
        tellStateChanges()
    }

    /// Presenters hear of items whose `user.scopefs.state` changed (S42).
    func tellStateChanges() {
        guard let told = onStateChange else { return }
        let paths = lock.withLock { index.takeStateChanges().compactMap { index.path(of: $0) } }
        for path in paths { told(path) }
    }
}

/// What the replica tells the daemon's event log (`scopefs events`).
public struct ProviderEvent: Sendable {
    public enum Kind: String, Sendable {
        /// An extension call failed (the message names the method).
        case error
        /// The local edit was kept as a conflict copy at `path`.
        case conflict
        /// The provider went offline or came back, or a sync finished.
        case state
    }
    public var kind: Kind
    public var provider: String
    /// The item's path in the provider.
    public var path: String?
    public var message: String
    public var errno: Int32?
    /// A conflict copy's item: the file whose local edit it keeps.
    public var original: String?
}

/// The replica's knobs (`scopefs mount --extension-*` and tests).
public struct ReplicaTunables: Sendable {
    /// How often `changes` is called without a `changed` (poll remotes;
    /// a notify remote is polled too, in case a signal was lost).
    public var pollInterval: Double = 30
    /// Pulls asked for by `changed` come at most this often.
    public var minPullInterval: Double = 0.1
    /// Local changes wait this long for more before they are pushed.
    public var pushDelay: Double = 0.2
    /// A file open for writing is uploaded once it has been quiet this
    /// long (at once after an fsync or its close): not half-way through.
    public var writeQuiet: Double = 2
    /// The time conflict copies are named by (docs/PROVIDERS.md): the wall
    /// clock; a test's own clock, so that a seed replays the same names.
    public var conflictClock: @Sendable () -> Date = { Date() }
    /// Back-off of a failed push: from `retryBase` doubling to `retryCap`.
    public var retryBase: Double = 1
    public var retryCap: Double = 300
    /// Files up to this size are fetched whole; larger ones by block.
    public var wholeFileLimit: Int64 = 8 << 20
    public var block: Int64 = 1 << 20
    /// The largest window a sequential reader's readahead grows to.
    public var maxWindow: Int64 = 128 << 20
    /// How much each window of a reader that goes on is larger than the
    /// last: a whole 512 MiB file is 7 requests (1, 8, 64, then 128 MiB
    /// windows), not 10 by doubling; a store's per-request cost (moto: 0.45 s
    /// for a ranged GET of a large object, whatever the range) dominated.
    public var windowGrowth: Int64 = 8
    /// The window of a reader that goes on, from an extension that streams
    /// its fetches (`streamsFetch`): the rest of the file, up to this.
    public var streamedWindow: Int64 = 1 << 30
    /// Streams whose readers left with their bytes that may run on at once
    /// (per provider); a new stream cancels the oldest past it.
    public var maxLeftStreams = 4
    /// How many windows ahead of a sequential reader are fetched.
    public var prefetchWindows = 2
    /// How long a failed download answers the next read of its bytes: the
    /// kernel's retry of a readahead comes within a millisecond
    /// (ExtensionProvider+FailedDownloads). 0 in the replica's model,
    /// whose reads are an app's own and must each fetch.
    public var failureRetryWindow: Double = 0.25

    public init() {}
}

/// The queue's state, for `status`.
public struct SyncState: Sendable, Equatable {
    /// Why the provider cannot reach its store, when it cannot.
    public var offline: String?
    public var lastError: String?
    public var lastPull: Double?
    public var lastPush: Double?
    /// Consecutive failed pushes (the back-off's exponent).
    public var failures = 0
    /// The items being uploaded now (several go up in parallel).
    public var uploadingNow: Set<String> = []
}
