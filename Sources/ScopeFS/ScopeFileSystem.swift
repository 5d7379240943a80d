import FuseBridge
import Glibc
import Policy
import Synchronization
import SystemPackage

/// Tells who a request comes from (implemented by the daemon's process
/// tracker; the file system never reads /proc itself).
public protocol CallerResolver: Sendable {
    func caller(of request: Request) -> Caller
}

/// Item identifiers and bookmarks, which need the database and the bookmark
/// key: served by the daemon (never on the hot path: only when an app asks
/// for `user.scopefs.item` or `user.scopefs.bookmark`).
public protocol DocumentServices: Sendable {
    func itemIdentifier(provider: ProviderID, path: String) throws(Errno) -> ItemIdentifier
    func bookmark(app: AppID, provider: ProviderID, path: String, access: Access) throws(Errno) -> String
    /// Something was renamed through the mount: item locations may have changed.
    func itemsMayHaveMoved()
    /// A temporary was renamed over the provider item at `path` (an atomic
    /// save, SPEC S48): the item's record must name the file there now, so
    /// its identifier, grants, references and bookmarks follow it. Called
    /// on a FUSE worker: it must only queue.
    func itemReplaced(provider: ProviderID, path: String)
    /// A process of `app` opened (for reading) the item at `path` of its
    /// container: import inboxes count what the app has seen (SPEC S18).
    func containerItemRead(app: AppID, process: ProcessKey, path: String)
    /// Whether `containerItemRead` can matter now (some inbox holds copies):
    /// when not, the gate does not work out the path.
    var followsContainerReads: Bool { get }
    /// A process of `app` changed the content of the provider item at
    /// `path` through the mount (told when it closes the file): other apps'
    /// presenters hear `changed` (issue 17). Called on a FUSE worker: it
    /// must only queue.
    func contentWritten(by app: AppID, provider: ProviderID, path: String, in snapshot: PolicySnapshot)
    /// Whether any app's presenter has ever asked for notices on this
    /// mount: until one does, changes through the mount cost no subitem
    /// bookkeeping (a presenter hears only what happens after it asks).
    var presentersListen: Bool { get }
    /// A process of `app` is about to make `change` to names of a provider
    /// through the mount (its host echo is expected). Called on a FUSE
    /// worker, before the system call: it must only record.
    func subitemWillChange(provider: ProviderID, _ change: SubitemChange)
    /// The system call `subitemWillChange` announced failed.
    func subitemDidNotChange(provider: ProviderID, _ change: SubitemChange)
    /// A process of `app` made `change` through the mount: other apps'
    /// folder presenters hear `appeared`, `moved` or `deleted` (issue 31).
    /// Called on a FUSE worker: it must only queue.
    func subitemChanged(by app: AppID, provider: ProviderID, _ change: SubitemChange, in snapshot: PolicySnapshot)
}

/// What a mount was asked for.
public struct MountConfiguration: Sendable {
    public enum OpenFiles: String, Sendable, CaseIterable {
        /// Revocation also cuts descriptors opened before it (SPEC S14 default).
        case revoke
        /// Descriptors opened before a revocation keep working.
        case keep
    }

    public var openFiles: OpenFiles
    /// `<state>/containers`: each app's container is a folder in it.
    public var containersPath: String
    /// How long the kernel may cache entries (negative ones too) and
    /// attributes of backed items whose folder's host changes are reported
    /// (`hostChanges`); without a channel, of every backed item.
    public var cacheTimeout: Double
    /// The same for items of folders the channel cannot watch.
    public var unwatchedTimeout: Double
    /// How long the kernel may cache the entries of an app's fixed layout:
    /// `Providers`, `Container` and each provider's root. Only the policy
    /// changes them, and a new policy drops them at once (`install`), so
    /// a path walk does not ask for them again every second.
    public var layoutTimeout: Double
    /// The host-change channel; nil: none, every backed item's caches
    /// expire after `cacheTimeout`.
    public var hostChanges: (any HostChangeMarker)?
    /// Backing descriptors one app, and all apps together, may make the
    /// daemon hold (`DescriptorBudget`, SPEC S40).
    public var descriptorsPerApp: Int
    public var descriptorsForApps: Int
    /// Folders that keep a descriptor at a time (`FolderDescriptorCache`).
    public var folderDescriptors: Int
    /// Container files are offered to the kernel for passthrough
    /// (`passthroughOffer`); it takes them where it can.
    public var containerPassthrough: Bool = true
    /// Nodes kept for the kernel before the least recently used are
    /// dropped (`NodeBudget`); `Int.max`: no bound.
    public var maxNodes: Int = .max

    public init(
        openFiles: OpenFiles, containersPath: String, cacheTimeout: Double = 1.0, layoutTimeout: Double = 60,
        hostChanges: (any HostChangeMarker)? = nil, unwatchedTimeout: Double? = nil, descriptorsPerApp: Int = .max,
        descriptorsForApps: Int = .max, folderDescriptors: Int = 4096
    ) {
        self.folderDescriptors = folderDescriptors
        self.descriptorsPerApp = descriptorsPerApp
        self.descriptorsForApps = descriptorsForApps
        self.openFiles = openFiles
        self.containersPath = containersPath
        self.cacheTimeout = cacheTimeout
        self.unwatchedTimeout = unwatchedTimeout ?? cacheTimeout
        self.layoutTimeout = max(layoutTimeout, hostChanges == nil ? 0 : cacheTimeout)
        self.hostChanges = hostChanges
    }
}

/// The ScopeFS file system: per-app views of containers and granted provider
/// items, every operation gated by the policy snapshot (SPEC S2–S4, S9, S14).
public final class ScopeFileSystem: FileSystem {
    let configuration: MountConfiguration
    let callers: any CallerResolver
    let scopes: ScopeRegistry
    let events: any EventSink
    let documents: any DocumentServices
    let table: NodeTable
    /// The descriptors of folder nodes other than domain roots, bounded.
    let folderDescriptors: FolderDescriptorCache
    /// Backing descriptors charged to each app (SPEC S40).
    public let descriptorBudget: DescriptorBudget
    /// The owner's fault and latency rules (issue 18); none by default.
    public let faults = FaultInjector()
    /// What `unsynced` rules let the owner lose on cue (issue 48).
    public let unsynced = UnsyncedWrites()
    private let policy: Mutex<PolicySnapshot>
    /// The installed snapshot's generation, readable without the lock;
    /// stored under the policy lock, so it never runs ahead of the snapshot.
    private let currentGeneration: Atomic<UInt64>
    let mountTime: timespec
    let daemonUID: uid_t
    let daemonGID: gid_t
    /// The containers folder, for statfs of synthetic folders.
    let containers: Int32
    /// Providers' directories with links resolved (`checkHostLocation`).
    let canonicalDirectories = CanonicalDirectories()
    /// Each provider directory's identity at the last sweep (`providerDirectoriesMoved`).
    let providerDirectories = ProviderDirectories()
    /// Providers whose items live elsewhere (extensions, SPEC S41).
    let providerContents = ProviderContents()
    /// Where local providers' previews come from (SPEC S50): the owner's
    /// freedesktop thumbnail cache, set by the daemon.
    let localThumbnails = LocalThumbnailSource()
    let ownerPreviews = OwnerPreviewSource()
    /// Temporaries of atomic saves beside single-file grants (SPEC S48).
    let temporaries = ReplacementTemporaries()

    public init(
        configuration: MountConfiguration, callers: any CallerResolver, scopes: ScopeRegistry, events: any EventSink,
        documents: any DocumentServices, snapshot: PolicySnapshot
    ) throws(Errno) {
        self.documents = documents
        self.scopes = scopes
        self.events = events
        containers = try Sys.openAt(AT_FDCWD, configuration.containersPath, Sys.pathOnly | O_DIRECTORY)
        self.configuration = configuration
        folderDescriptors = FolderDescriptorCache(capacity: configuration.folderDescriptors)
        descriptorBudget = DescriptorBudget(
            perApp: configuration.descriptorsPerApp, total: configuration.descriptorsForApps)
        self.callers = callers
        self.policy = Mutex(snapshot)
        self.currentGeneration = Atomic(snapshot.generation)
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        mountTime = now
        daemonUID = getuid()
        daemonGID = getgid()
        table = NodeTable(
            root: Node(
                inode: NodeTable.rootInode, place: .root, view: 0, identity: nil, isDirectory: true, folder: nil,
                isDomainRoot: false),
            budget: NodeBudget(limit: configuration.maxNodes))
    }

    deinit { Sys.close(containers) }

    public func initialize(_ connection: inout ConnectionSettings) {
        connection.clearsSetIDBits = true
        connection.maxBackground = Self.maxBackgroundRequests
        connection.maxReadahead = max(connection.maxReadahead, Self.readaheadBytes)
        if configuration.containerPassthrough {
            connection.passthroughProbe = passthroughProbe()
            connection.passthroughStackDepth = passthroughStackDepth
        }
    }

    /// The kernel sends RELEASE, the close that gives a backing descriptor
    /// back, as a background request, and keeps at most `max_background` of
    /// those in flight (12 by default) while OPENs are not throttled. 40
    /// processes looping open/read/close queued 19,998 RELEASEs, each
    /// holding a descriptor, until opens failed with EMFILE (issue 29,
    /// finding 1; the kernel's `waiting` count in fusectl showed them). With
    /// room for this many, a RELEASE waits behind no more than the requests
    /// already queued, so the daemon holds about one descriptor per file
    /// open and per close in flight (docs/PERFORMANCE.md, the storm).
    /// Without CAP_SYS_ADMIN the kernel lowers it to `max_user_bgreq`.
    static let maxBackgroundRequests: UInt32 = 1024

    /// The readahead window the mount asks for: the largest READ the
    /// kernel sends for page-cache reads of a provider file. The kernel
    /// takes the smaller of this and its bdi's window (128 KiB unless root
    /// widened it before the INIT reply: the daemon's `ReadaheadWindow`),
    /// so a non-root owner keeps 128 KiB. docs/PERFORMANCE.md has the
    /// figures for 128 KiB to 4 MiB.
    public static let readaheadBytes: UInt32 = 512 << 10

    // MARK: Policy

    /// The current snapshot; decisions read it under a short lock.
    func withPolicy<T>(_ body: (borrowing PolicySnapshot) -> T) -> T {
        policy.withLock { body($0) }
    }

    public var snapshot: PolicySnapshot { policy.withLock { $0 } }

    /// Installs a new snapshot and returns what the kernel must forget:
    /// inodes covered by grants that were revoked or removed (their cached
    /// pages and mappings must go, SPEC S14), entries of removed grants and
    /// the listings of folders whose shown children changed.
    public func install(_ snapshot: PolicySnapshot) -> CacheInvalidation {
        let previous = policy.withLock { current in
            let previous = current
            current = snapshot
            currentGeneration.store(snapshot.generation, ordering: .releasing)
            return previous
        }
        var invalidation = CacheInvalidation()
        // The app's layout is cached for long: drop the parts it lost. Most
        // changes (grant, revoke, restore within a provider) keep it, and
        // then the node table is not scanned.
        if !snapshot.hasSameLayout(as: previous) {
            for entry in table.layoutEntries() where !snapshot.shows(entry.place) {
                invalidation.entries.append((entry.parent, entry.name))
            }
        }
        // Only the grants the change named, when the snapshot says which
        // (`PolicySnapshot.applying`): a revoke among a million grants
        // compares one, not a million.
        let changed = snapshot.grantIDsChanged(since: previous)
        invalidation.inodes += keptListingsAltered(from: previous, to: snapshot, changed: changed)
        scopes.grantsRemoved(Set(changed.filter { previous.grantsByID[$0] != nil && snapshot.grantsByID[$0] == nil }))
        var cut: Set<GrantID> = []
        for id in changed {
            let (old, new) = (previous.grantsByID[id], snapshot.grantsByID[id])
            if let old, old.state == .active, new?.state != .active {
                cut.insert(id)
                for node in table.nodes(app: old.app, provider: old.provider, within: old.relativePath) {
                    invalidation.inodes.append(node.inode)
                    if new == nil { invalidation.entries.append((node.parent, node.name)) }
                }
            }
            // A grant made or restored: whatever the kernel cached on the way
            // to its item (a miss, S2's ENOENT) goes, so it shows at once.
            if let new, new.state == .active, old?.state != .active {
                invalidation.entries += table.entriesToward(
                    app: new.app, provider: new.provider, path: new.relativePath)
            }
        }
        removeTemporaries(replacing: cut)
        return invalidation
    }

    /// Listings a policy change may alter (SPEC S2), when the kernel keeps
    /// listings at all: the folders on the way to each grant made,
    /// restored, revoked or removed show only the children leading to
    /// grants, and the grant's own folders switch between that and
    /// everything. While the kernel keeps none, there is nothing to drop.
    private func keptListingsAltered(from previous: PolicySnapshot, to snapshot: PolicySnapshot, changed ids: [GrantID])
        -> [UInt64]
    {
        guard Self.kernelKeepsListings else { return [] }
        var changed: [Grant] = []
        for id in ids {
            let (old, new) = (previous.grantsByID[id], snapshot.grantsByID[id])
            if let old {
                if old.state != new?.state || old.relativePath != new?.relativePath { changed.append(old) }
                if let new, old.relativePath != new.relativePath || old.provider != new.provider { changed.append(new) }
            } else if let new {
                changed.append(new)
            }
        }
        var folders: [UInt64] = []
        for grant in changed {
            folders += table.foldersListing(
                app: grant.app, provider: grant.provider, toward: grant.relativePath)
        }
        return folders
    }

    /// Cached entries to drop after the CLI changed an app's container
    /// behind the mount (a moved-out file, a new reference stub).
    /// Entries of new files count too: the kernel may hold a miss for the
    /// name (a negative entry), cached in the folder's node.
    public func containerEntries(app: AppID, paths: [String]) -> [(parent: UInt64, name: String)] {
        let normalized = paths.compactMap(RelativePath.normalize)
        var entries = table.containerEntries(app: app, paths: Set(normalized))
        let folders = Dictionary(grouping: normalized.filter { !$0.isEmpty }) { RelativePath.parent(of: $0) ?? "" }
        for folder in table.containerNodes(app: app, paths: Set(folders.keys)) {
            for path in folders[folder.path] ?? [] {
                entries.append((folder.inode, RelativePath.lastComponent(of: path)))
            }
        }
        return entries
    }

    /// How many inodes the kernel holds (for status and leak checks).
    public var inodeCount: Int { table.count }

    /// Shrinks the node table's storage after the kernel forgot most nodes.
    public func compactNodeTable() { table.compact() }

    /// The policy snapshot's number: caches keyed by it go stale with it.
    var generation: UInt64 { currentGeneration.load(ordering: .acquiring) }
}
