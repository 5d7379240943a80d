import CSystemShims
import CommandErrors
import Dispatch
import FuseBridge
import Glibc
import HostText
import Logging
import Policy
import PolicyStore
import ScopeFS
import Synchronization

/// Which host-change channel a mount uses (`scopefs mount --host-changes`).
public enum HostChangeMode: String, Sendable, CaseIterable {
    /// fanotify when the daemon may mark file systems (CAP_SYS_ADMIN), else inotify.
    case auto
    case fanotify
    case inotify
    /// No channel: the kernel's caches of backed items expire after
    /// `--cache-timeout` (1 s by default).
    case none
}

/// Tells the kernel at once when a file of a folder it holds changes on
/// the host, so that entries (negative ones too), attributes and pages can
/// be cached for long (SPEC S37, docs/DECISIONS.md, decisions 3 and 33).
///
/// The file system registers each folder node it makes (`watch`) and lets
/// go of it when the kernel forgets it (`unwatch`); one host folder has a
/// node per view, counted here. A thread of its own (`run`) reads the
/// events, maps each to the folder's nodes in every view and sends the
/// invalidations — never a FUSE worker, on which the kernel may wait.
/// When the kernel's queue overflowed, events were lost: every cached
/// answer the table knows of is dropped, never left stale.
///
/// Lock order: `index` is a leaf; system calls made under it (marks,
/// watches) do not reach the mount.
final class HostChangeChannel: HostChangeMarker {
    enum Kind: String { case fanotify, inotify }

    let kind: Kind
    private let descriptor: Int32
    private let logger: Logger

    private struct Folder {
        /// Nodes of the folder the kernel holds, over all views.
        var nodes: Int
        var watched: Bool
        /// fanotify: the folder's key (`scopefs_directory_key`).
        var key: [UInt8]?
        /// inotify: its watch descriptor.
        var watch: Int32
    }

    private struct Index {
        var folders: [HostDirectoryID: Folder] = [:]
        var byKey: [[UInt8]: HostDirectoryID] = [:]
        var byWatch: [Int32: HostDirectoryID] = [:]
        /// fanotify: whether each file system could be marked.
        var marked: [UInt64: Bool] = [:]
        /// Watches that could not be made, logged once.
        var failuresLogged = false
    }

    private let index = Mutex(Index())
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let ownPID = getpid()

    private init(kind: Kind, descriptor: Int32, logger: Logger) {
        self.kind = kind
        self.descriptor = descriptor
        self.logger = logger
    }

    deinit { close(descriptor) }

    /// Opens the channel `mode` asks for; nil for `none`. `auto` takes
    /// fanotify when the file system of `probe` (the containers folder) can
    /// be marked, else inotify. An explicit channel that cannot be had is
    /// an error.
    static func open(_ mode: HostChangeMode, probe: String, logger: Logger) throws(CommandError) -> HostChangeChannel? {
        switch mode {
        case .none:
            return nil
        case .inotify:
            return try openInotify(logger: logger)
        case .fanotify, .auto:
            let descriptor = scopefs_fanotify_init()
            var failure = errno
            if descriptor >= 0 {
                if scopefs_fanotify_mark_filesystem(descriptor, probe) == 0 {
                    let channel = HostChangeChannel(kind: .fanotify, descriptor: descriptor, logger: logger)
                    var info = stat()
                    if lstat(probe, &info) == 0 {
                        channel.index.withLock { $0.marked[UInt64(info.st_dev)] = true }
                    }
                    return channel
                }
                failure = errno
                close(descriptor)
            }
            let reason = String(cString: strerror(failure))
            if mode == .fanotify {
                throw CommandError(
                    .cannotMount,
                    "cannot watch host changes with fanotify (\(reason)): it needs CAP_SYS_ADMIN and a file system with file handles; use --host-changes inotify or auto"
                )
            }
            logger.debug("fanotify unavailable (\(reason)): host changes come from inotify")
            return try openInotify(logger: logger)
        }
    }

    private static func openInotify(logger: Logger) throws(CommandError) -> HostChangeChannel {
        let descriptor = scopefs_inotify_init()
        guard descriptor >= 0 else {
            throw CommandError(
                .cannotMount, "cannot watch host changes with inotify: \(String(cString: strerror(errno)))")
        }
        return HostChangeChannel(kind: .inotify, descriptor: descriptor, logger: logger)
    }

    // MARK: Folders (called by FUSE workers)

    func mark(directory: Int32, _ folder: HostDirectoryID) -> Bool {
        index.withLock { index in
            if var known = index.folders[folder] {
                known.nodes += 1
                index.folders[folder] = known
                return known.watched
            }
            var entry = Folder(nodes: 1, watched: false, key: nil, watch: -1)
            switch kind {
            case .fanotify: entry.key = fanotifyKey(directory, folder, &index)
            case .inotify: entry.watch = scopefs_inotify_watch(descriptor, "/proc/self/fd/\(directory)")
            }
            if let key = entry.key {
                entry.watched = true
                index.byKey[key] = folder
            } else if entry.watch >= 0 {
                entry.watched = true
                index.byWatch[entry.watch] = folder
            } else if !index.failuresLogged {
                index.failuresLogged = true
                logger.warning(
                    "cannot watch a folder for host changes (\(String(cString: strerror(errno)))): its caches expire after 1 s; further failures are not logged"
                )
            }
            index.folders[folder] = entry
            return entry.watched
        }
    }

    func unmark(_ folder: HostDirectoryID) {
        index.withLock { index in
            guard var known = index.folders[folder] else { return }
            known.nodes -= 1
            guard known.nodes <= 0 else {
                index.folders[folder] = known
                return
            }
            index.folders[folder] = nil
            if let key = known.key, index.byKey[key] == folder { index.byKey[key] = nil }
            if known.watch >= 0 {
                if index.byWatch[known.watch] == folder { index.byWatch[known.watch] = nil }
                _ = scopefs_inotify_unwatch(descriptor, known.watch)
            }
        }
    }

    /// The folder's key, marking its file system first if it is new.
    private func fanotifyKey(_ directory: Int32, _ folder: HostDirectoryID, _ index: inout Index) -> [UInt8]? {
        if index.marked[folder.device] == nil {
            let marked = scopefs_fanotify_mark_filesystem(descriptor, "/proc/self/fd/\(directory)") == 0
            if !marked {
                logger.warning(
                    "cannot watch host changes on file system \(folder.device) (\(String(cString: strerror(errno)))): its caches expire after 1 s"
                )
            }
            index.marked[folder.device] = marked
        }
        guard index.marked[folder.device] == true else { return nil }
        // Kept at its length: an array cut down keeps its full capacity,
        // and every folder node the kernel holds has its key here.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Int(SCOPEFS_DIRECTORY_KEY_MAX)) { buffer in
            let length = scopefs_directory_key(directory, buffer.baseAddress!, buffer.count)
            return length > 0 ? Array(buffer.prefix(Int(length))) : nil
        }
    }

    /// How many host folders are watched (for status and tests of bounds).
    var watchedFolders: Int { index.withLock { $0.folders.count } }

    // MARK: Events (the channel's own thread)

    /// Reads events until `stop`, sending the kernel what each one makes
    /// stale. `namesChanged` runs (once per batch) when a name came or went
    /// on the host in a folder the kernel holds: an item may have moved.
    /// `contentChanged` runs for each provider item a host write changed,
    /// `subitemChanged` for each provider item that came, went or moved;
    /// `changesLost` when the queue overflowed and which items changed is
    /// not known.
    func run(
        fileSystem: ScopeFileSystem, session: FuseSession, namesChanged: () -> Void,
        contentChanged: (ProviderID, String) -> Void, subitemChanged: (ProviderID, SubitemChange) -> Void,
        changesLost: () -> Void
    ) {
        defer { finished.signal() }
        // Bounded: one read's worth of events at a time, however many come.
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var sweptAt = ContinuousClock.now
        var renames = RenamePairing()
        while !stopping.load(ordering: .relaxed) {
            for (provider, change) in renames.expired() { subitemChanged(provider, change) }
            // The providers' own directories, whose moves no watch reports:
            // at least every 200 ms, so a move shows well within S33's 1 s.
            if ContinuousClock.now - sweptAt >= .milliseconds(200) {
                sweptAt = ContinuousClock.now
                let moved = fileSystem.invalidationForMovedProviderDirectories()
                if !moved.isEmpty {
                    logger.info("a provider's directory moved on the host: dropping its cached entries")
                    session.invalidate(moved)
                    namesChanged()
                }
            }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            // A rename's "from" waits for its "to": a short poll then.
            guard poll(&poller, 1, renames.isWaiting ? 20 : 200) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { continue }
            let (changes, overflowed, renamed) = buffer.withUnsafeBytes { decode($0, count: count) }
            if renamed || overflowed { namesChanged() }
            if overflowed {
                let everything = fileSystem.invalidationOfEverything()
                logger.warning(
                    "the host-change queue overflowed (\(kind.rawValue)): events were lost, dropping every cached entry and attribute (\(everything.count) invalidations)"
                )
                session.invalidate(everything)
                changesLost()
                continue
            }
            guard !changes.isEmpty else { continue }
            // Whose change it was is worked out first, as close to the
            // event as can be (inotify's echo check looks at how recently
            // the mount wrote); presenters hear of it once the kernel has
            // dropped what it cached, so a read on hearing sees the change.
            let changedItems = changes.filter { $0.content && !$0.onlyIfShared }.flatMap {
                fileSystem.changedProviderItems($0, writerKnown: kind == .fanotify)
            }
            let namedItems = changes.flatMap { change in
                fileSystem.namedProviderItems(change).map { (change.naming!, $0.provider, $0.path) }
            }
            session.invalidate(Self.merged(changes.map(fileSystem.invalidation(for:))))
            for item in changedItems { contentChanged(item.provider, item.path) }
            for (provider, change) in renames.changes(namedItems) { subitemChanged(provider, change) }
        }
    }

    /// Ends `run` and waits for it.
    func stop() {
        stopping.store(true, ordering: .relaxed)
        finished.wait()
    }

    private func decode(_ bytes: UnsafeRawBufferPointer, count: Int)
        -> ([HostChange], overflowed: Bool, namesChanged: Bool)
    {
        var changes: [HostChange] = []
        var namesChanged = false
        var offset = 0
        var event = scopefs_host_event()
        while true {
            let next =
                kind == .fanotify
                ? scopefs_fanotify_event(bytes.baseAddress, count, offset, &event)
                : scopefs_inotify_event(bytes.baseAddress, count, offset, &event)
            guard next > 0 else { break }
            offset = next
            if event.overflow != 0 { return ([], true, true) }
            if let change = change(from: event) {
                changes.append(change)
                if !change.onlyIfShared && event.mask & Self.nameEvents != 0 { namesChanged = true }
            }
        }
        return (changes, false, namesChanged)
    }

    /// The change an event reports, or nil for a folder no node holds (a
    /// file system mark sees every change on the file system: those are
    /// dropped after one hash).
    private func change(from event: scopefs_host_event) -> HostChange? {
        // The daemon's own changes (made through the mount) are known to
        // the kernel in the view they came through; other views need them:
        // only a folder with nodes in several views matters then.
        let own = event.pid == ownPID
        let folder: HostDirectoryID? = index.withLock { index in
            let folder: HostDirectoryID?
            switch kind {
            case .fanotify:
                guard let key = event.key else { return nil }
                folder = index.byKey[[UInt8](UnsafeBufferPointer(start: key, count: event.key_length))]
            case .inotify:
                folder = index.byWatch[event.watch]
            }
            guard let folder, !own || (index.folders[folder]?.nodes ?? 0) > 1 else { return nil }
            return folder
        }
        guard let folder else { return nil }
        let name = event.name.map { HostName.string(cString: $0) }
        // FAN_MODIFY and IN_MODIFY are the same bit.
        let content = event.mask & UInt64(IN_MODIFY) != 0
        // FAN_ONDIR and IN_ISDIR are the same bit too.
        let isFolder = event.mask & UInt64(IN_ISDIR) != 0
        return HostChange(
            folder: folder, name: name, content: content, isFolder: isFolder, onlyIfShared: own,
            naming: Self.naming(event))
    }

    /// How the event changed its name, if it did (FAN_CREATE, FAN_DELETE,
    /// FAN_MOVED_FROM and FAN_MOVED_TO are inotify's bits).
    private static func naming(_ event: scopefs_host_event) -> HostChange.Naming? {
        let mask = UInt32(truncatingIfNeeded: event.mask)
        if mask & UInt32(IN_CREATE) != 0 { return .created }
        if mask & UInt32(IN_DELETE) != 0 { return .deleted }
        if mask & UInt32(IN_MOVED_FROM) != 0 { return .movedFrom(cookie: event.cookie) }
        if mask & UInt32(IN_MOVED_TO) != 0 { return .movedTo(cookie: event.cookie) }
        return nil
    }

    /// Names that came or went (the same bits in fanotify and inotify).
    private static let nameEvents = UInt64(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)

    /// One invalidation per entry and inode, however many events named it.
    private static func merged(_ parts: [CacheInvalidation]) -> CacheInvalidation {
        struct EntryKey: Hashable {
            var parent: UInt64
            var name: String
        }
        var inodes = Set<UInt64>()
        var attributes = Set<UInt64>()
        var entries = Set<EntryKey>()
        var merged = CacheInvalidation()
        for part in parts {
            for inode in part.inodes where inodes.insert(inode).inserted { merged.inodes.append(inode) }
            for inode in part.attributes where !inodes.contains(inode) && attributes.insert(inode).inserted {
                merged.attributes.append(inode)
            }
            for entry in part.entries where entries.insert(EntryKey(parent: entry.parent, name: entry.name)).inserted {
                merged.entries.append(entry)
            }
        }
        return merged
    }
}
