import Glibc
import Policy
import Synchronization

/// Where a node lives in the mount (SPEC S2):
/// `root` / `appDirectory` / `providersDirectory` are synthetic folders;
/// `container` and `provider` nodes are backed by a host file.
enum Place: Hashable, Sendable {
    case root
    case appDirectory(AppID)
    case providersDirectory(AppID)
    case container(AppID)
    case provider(AppID, ProviderID)

    var app: AppID? {
        switch self {
        case .root: nil
        case .appDirectory(let app), .providersDirectory(let app), .container(let app), .provider(let app, _): app
        }
    }

    var isBacked: Bool {
        switch self {
        case .container, .provider: true
        default: false
        }
    }
}

/// A backing file's identity on the host.
struct FileIdentity: Hashable, Sendable {
    var device: UInt64
    var inode: UInt64

    init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}

/// How the node table finds a node again: its view and its file. Each app
/// has its own nodes, even for the same host file, so one app's cached
/// entries and attributes never serve another (SPEC S3); within a view,
/// hard links share one node.
///
/// Plain numbers, no strings: every lookup and every forget hashes and
/// compares one, and the view's place (an app and a provider ID) is
/// interned by the node table (`view(of:)`, `lookupSynthetic`).
struct NodeKey: Hashable {
    /// The interned place: a provider view, a container, or a synthetic
    /// folder of one app.
    var view: UInt32
    /// Zero for a synthetic folder: its view alone names it.
    var identity: FileIdentity
    /// The kind is part of the key: a file system may hand a deleted file's
    /// inode number to a new folder or reference stub while the kernel still
    /// holds the old node, and a node's kind never changes.
    var kind: NodeKind

    init(view: UInt32, identity: FileIdentity?, kind: NodeKind) {
        self.view = view
        self.identity = identity ?? FileIdentity(device: 0, inode: 0)
        self.kind = kind
    }

    /// Inode and device numbers come from the host file system, not from
    /// the app: one multiply (`FibonacciHash`), not SipHash. The device,
    /// view and kind are folded in by odd multiples, so the same inode
    /// number elsewhere lands in another bucket.
    func _rawHashValue(seed: Int) -> Int {
        let kindNumber: UInt64 =
            switch kind {
            case .file: 1
            case .directory: 2
            case .reference: 3
            }
        let mixed =
            identity.inode ^ (identity.device &* 0xC2B2_AE3D_27D4_EB4F)
            ^ (UInt64(view) &* 0x1656_67B1_9E37_79F9) ^ (kindNumber << 58)
        return FibonacciHash.mix(mixed, seed: seed)
    }
}

enum NodeKind: Hashable, Sendable {
    case file
    case directory
    case reference
}

/// The immutable part of an inode. Its links (parent, name, lookup count)
/// live in the node table under the table's lock.
final class Node: Sendable {
    let inode: UInt64
    let place: Place
    /// The place interned by the node table: the view part of its key,
    /// which a backed node's children share.
    let view: UInt32
    let identity: FileIdentity?
    let isDirectory: Bool
    /// Where a backed folder keeps its O_PATH descriptor: children are
    /// reached relative to it, never by path. Nil for files and synthetic
    /// folders. Only domain roots hold theirs for the node's lifetime;
    /// others are cached (`FolderDescriptorCache`) and opened again from
    /// the parent when evicted (`ScopeFileSystem.folderDescriptor(of:)`).
    let folder: FolderSlot?
    /// True for the root of a container or of a provider view.
    let isDomainRoot: Bool
    /// Set for a reference document's stub in a container: the node is
    /// shown as a symbolic link to the item (SPEC S23).
    let reference: ReferenceStub?
    /// Set for a backed folder once the host-change channel reports its
    /// changes: only then may the kernel cache its entries (and their
    /// attributes) for long (`ScopeFileSystem.timeout(under:)`).
    let changesWatched = Atomic<Bool>(false)
    /// Set at a backed folder's first opendir: a large folder's listing is
    /// kept by the kernel only from its second (`cachesListing`).
    let openedBefore = Atomic<Bool>(false)
    /// When a file's content was last written through the mount (coarse
    /// monotonic milliseconds): a host-change channel that cannot say who
    /// wrote (inotify) leaves those changes to the writer's release.
    let lastMountWrite = Atomic<Int64>(0)

    func noteMountWrite() { lastMountWrite.store(Self.coarseMilliseconds(), ordering: .relaxed) }

    func writtenThroughMount(within milliseconds: Int64) -> Bool {
        Self.coarseMilliseconds() - lastMountWrite.load(ordering: .relaxed) <= milliseconds
    }

    private static func coarseMilliseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }

    init(
        inode: UInt64, place: Place, view: UInt32, identity: FileIdentity?, isDirectory: Bool, folder: FolderSlot?,
        isDomainRoot: Bool, reference: ReferenceStub? = nil
    ) {
        self.reference = reference
        self.inode = inode
        self.place = place
        self.view = view
        self.identity = identity
        self.isDirectory = isDirectory
        self.folder = folder
        self.isDomainRoot = isDomainRoot
    }

    /// A forgotten folder gives its descriptor back at once, not when the
    /// cache's hand next passes its slot.
    deinit { _ = folder?.evict() }

    var kind: NodeKind { isDirectory ? .directory : reference != nil ? .reference : .file }

    /// Nil for the root, which is never looked up by key.
    var key: NodeKey? {
        if case .root = place { return nil }
        return NodeKey(view: view, identity: identity, kind: kind)
    }

    /// Part of an app's fixed layout, which only the policy changes:
    /// `Providers`, `Container` and the providers' roots.
    var isLayout: Bool {
        if case .providersDirectory = place { return true }
        return isDomainRoot
    }
}

extension PolicySnapshot {
    /// Whether the place still exists for its app under this policy (for
    /// layout nodes: a provider's root lasts while the app has a grant in it).
    func shows(_ place: Place) -> Bool {
        switch place {
        case .root: true
        case .appDirectory(let app), .providersDirectory(let app), .container(let app): apps[app] != nil
        case .provider(let app, let provider): apps[app] != nil && showsProvider(provider, to: app)
        }
    }
}
