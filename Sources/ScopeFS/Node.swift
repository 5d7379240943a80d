import Glibc
import Policy

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
}

/// How the node table finds a node again. Each app has its own nodes, even
/// for the same host file, so one app's cached entries and attributes never
/// serve another (SPEC S3); within a view, hard links share one node.
enum NodeKey: Hashable, Sendable {
    case appDirectory(AppID)
    case providersDirectory(AppID)
    /// The kind is part of the key: a file system may hand a deleted file's
    /// inode number to a new folder or reference stub while the kernel still
    /// holds the old node, and a node's kind never changes.
    case backed(Place, FileIdentity, NodeKind)

    /// Leaves out the place: its app and provider IDs were most of the cost
    /// of hashing a key (every lookup and every new node hash one), and the
    /// nodes of one host file in two views still differ by `==`.
    func hash(into hasher: inout Hasher) {
        switch self {
        case .appDirectory(let app):
            hasher.combine(0)
            hasher.combine(app)
        case .providersDirectory(let app):
            hasher.combine(1)
            hasher.combine(app)
        case .backed(_, let identity, let kind):
            hasher.combine(identity)
            hasher.combine(kind)
        }
    }

    /// A backed key's inode number comes from the host file system, not
    /// from the app, so it needs no SipHash: every lookup and every forget
    /// hashes one key (`FibonacciHash`). The device and kind are folded in
    /// by odd multiples, so the same inode number in another kind or
    /// device lands elsewhere.
    func _rawHashValue(seed: Int) -> Int {
        guard case .backed(_, let identity, let kind) = self else {
            var hasher = Hasher()
            hasher.combine(seed)
            hash(into: &hasher)
            return hasher.finalize()
        }
        let kindNumber: UInt64 = switch kind {
        case .file: 1
        case .directory: 2
        case .reference: 3
        }
        return FibonacciHash.mix(identity.inode ^ (identity.device &* 0xC2B2_AE3D_27D4_EB4F) ^ (kindNumber << 58), seed: seed)
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
    let identity: FileIdentity?
    let isDirectory: Bool
    /// An O_PATH descriptor of a backed directory, held for the node's
    /// lifetime: children are reached relative to it, never by path.
    let directory: Int32?
    /// True for the root of a container or of a provider view.
    let isDomainRoot: Bool
    /// Set for a reference document's stub in a container: the node is
    /// shown as a symbolic link to the item (SPEC S23).
    let reference: ReferenceStub?

    init(
        inode: UInt64, place: Place, identity: FileIdentity?, isDirectory: Bool, directory: Int32?, isDomainRoot: Bool,
        reference: ReferenceStub? = nil
    ) {
        self.reference = reference
        self.inode = inode
        self.place = place
        self.identity = identity
        self.isDirectory = isDirectory
        self.directory = directory
        self.isDomainRoot = isDomainRoot
    }

    deinit {
        if let directory { Sys.close(directory) }
    }

    var kind: NodeKind { isDirectory ? .directory : reference != nil ? .reference : .file }

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
