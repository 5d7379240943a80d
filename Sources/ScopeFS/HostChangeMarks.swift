import FuseBridge
import Glibc
import Policy
import SystemPackage

/// A host folder, as the host-change channel names it.
public struct HostDirectoryID: Hashable, Sendable {
    public var device: UInt64
    public var inode: UInt64

    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    init(_ identity: FileIdentity) {
        self.init(device: identity.device, inode: identity.inode)
    }

    var identity: FileIdentity { FileIdentity(device: device, inode: inode) }
}

/// What the file system asks of a host-change channel (fanotify or
/// inotify, in the daemon): to report changes in the folders the kernel
/// holds, so that their entries and attributes can be cached for long and
/// dropped exactly when the host changes them (docs/DECISIONS.md, decision 3).
///
/// Called from FUSE workers, with no lock of the file system held: the
/// calls may make system calls, never wait on the kernel's FUSE side.
public protocol HostChangeMarker: AnyObject, Sendable {
    /// A node of the folder open at `descriptor` (O_PATH) was made; the
    /// channel counts one more. Returns whether the folder's changes are
    /// reported: one that cannot be watched keeps short timeouts.
    func mark(directory descriptor: Int32, _ folder: HostDirectoryID) -> Bool
    /// A node of that folder is gone (one `watch` each).
    func unmark(_ folder: HostDirectoryID)
}

/// What changed in a host folder, as far as cached answers care.
public struct HostChange: Sendable {
    public var folder: HostDirectoryID
    /// The entry that changed; nil for the folder itself.
    public var name: String?
    /// Whether a file's content changed (its cached pages must go too).
    public var content: Bool
    /// Whether the entry is a folder (IN_ISDIR, FAN_ONDIR): a folder renamed
    /// or removed takes the kept listings of everything below it along.
    public var isFolder: Bool
    /// Only the nodes of folders that more than one view holds: a change
    /// the daemon made through the mount, which the kernel already knows
    /// for the view it came through (not for the other apps' views).
    public var onlyIfShared: Bool
    /// Whether the entry's name came, went or moved (presenters' subitem
    /// notices, issue 31); nil for a change of content or attributes.
    public var naming: Naming?

    /// How a name changed. A rename is two events, from and to, joined by
    /// inotify's cookie (fanotify reports 0: they come one after the other).
    public enum Naming: Sendable, Equatable {
        case created, deleted
        case movedFrom(cookie: UInt32)
        case movedTo(cookie: UInt32)
    }

    public init(
        folder: HostDirectoryID, name: String?, content: Bool, isFolder: Bool = false, onlyIfShared: Bool,
        naming: Naming? = nil
    ) {
        self.folder = folder
        self.name = name
        self.content = content
        self.isFolder = isFolder
        self.onlyIfShared = onlyIfShared
        self.naming = naming
    }
}

extension ScopeFileSystem {
    /// How long the kernel may keep an entry or attributes of an item of
    /// `folder`: long while the channel reports the folder's changes, else
    /// briefly (host changes then show within that time).
    func timeout(under folder: Node?) -> Double {
        folder?.changesWatched.load(ordering: .relaxed) == true
            ? configuration.cacheTimeout : configuration.unwatchedTimeout
    }

    /// The attributes' timeout of `node`, reached from `parent`. A folder's
    /// own attributes change with its entries, reported by its own watch; a
    /// domain root's parent is outside every view, so changes to the root
    /// folder itself (a chmod) are not reported: short.
    func attributeTimeout(_ node: Node, parent: Node?) -> Double {
        guard node.place.isBacked, !node.isDomainRoot else { return configuration.unwatchedTimeout }
        if node.isDirectory, !node.changesWatched.load(ordering: .relaxed) { return configuration.unwatchedTimeout }
        return timeout(under: parent)
    }

    /// Whether a host miss under `folder` may be cached by the kernel as a
    /// negative entry: only where a host create is reported (and so drops it).
    func cachesMisses(under folder: Target) -> Bool {
        folder.node.place.isBacked && folder.node.changesWatched.load(ordering: .relaxed)
            && (folder.grant != nil || Self.isContainer(folder.node.place))
    }

    /// Registers a folder node just made, open as `directory`, with the channel.
    func markForChanges(_ node: Node, descriptor directory: Int32) {
        guard let channel = configuration.hostChanges, let identity = node.identity else { return }
        if channel.mark(directory: directory, HostDirectoryID(identity)) {
            node.changesWatched.store(true, ordering: .relaxed)
        }
    }

    /// The kernel forgot a node: a folder's mark loses one count.
    func unmarkForChanges(_ node: Node) {
        guard node.isDirectory, node.folder != nil, let identity = node.identity,
            let channel = configuration.hostChanges
        else { return }
        channel.unmark(HostDirectoryID(identity))
    }

    /// What the kernel must drop after a host change in a folder: the
    /// changed entry in every view of the folder (a negative one too), the
    /// folder's attributes (its times and link count) and its cached listing,
    /// and the attributes of the file now under the name (and its pages if its content changed).
    /// Called by the channel's thread, never by a FUSE worker.
    public func invalidation(for change: HostChange) -> CacheInvalidation {
        var invalidation = CacheInvalidation()
        let folders = table.directoryNodes(of: change.folder.identity)
        guard !folders.isEmpty, !change.onlyIfShared || folders.count > 1 else { return invalidation }
        if let written = containerFileWritten(change, in: folders) {
            invalidation.inodes = written
            return invalidation
        }
        // The folder's pages too: they hold its cached listing (FOPEN_CACHE_DIR).
        for folder in folders { invalidation.inodes.append(folder.inode) }
        guard let name = change.name, !name.isEmpty, name != "." else { return invalidation }
        for folder in folders { invalidation.entries.append((folder.inode, name)) }
        if change.isFolder {
            // Dropping the entry drops the subtree's entries, not what a
            // descriptor held in it reads: the gate must see its next use,
            // and refuse it if the folder left the grant (SPEC S33).
            invalidation.inodes += table.folderMovedOnHost(named: name, in: Set(folders.map(\.inode)))
        }
        // The file under the name now: its nodes in every view (hard links
        // share one). A removed name has none; its entry going is enough.
        if let info = statInFolder(folders, name) {
            let inodes = table.nodes(of: FileIdentity(info))
            if change.content { invalidation.inodes += inodes } else { invalidation.attributes += inodes }
        }
        return invalidation
    }

    /// The nodes of a container file whose content changed while an app
    /// holds it open for writing: most likely that app's own write, which
    /// the kernel made itself (kernel passthrough) and so reports as a host
    /// change, with the app's pid. Its name and its folder did not change:
    /// only its attributes and pages go, not its entry (an open file's
    /// entry dropped reads as "(deleted)" in /proc/PID/fd, and costs a
    /// LOOKUP), nor the folder's listing. Nil for any other change.
    private func containerFileWritten(_ change: HostChange, in folders: [Node]) -> [UInt64]? {
        guard change.content, change.naming == nil, !change.isFolder, let name = change.name, !name.isEmpty,
            folders.allSatisfy({ Self.isContainer($0.place) }), let info = statInFolder(folders, name),
            table.isOpenForWriting(FileIdentity(info))
        else { return nil }
        return table.nodes(of: FileIdentity(info))
    }

    /// The provider items whose content a host change changed, for
    /// presenters' `changed` notices (issue 17): a file of a folder some
    /// view holds, as its provider and path. None for the daemon's own
    /// writes (made for an app, and told when it closes the file): when the
    /// channel cannot tell the writer (`writerKnown` false: inotify), the
    /// node table tells an echo (`NodeTable.isMountsOwnWrite`), even one
    /// read late on a loaded machine, and a name gone since tells nothing.
    /// What inotify cannot tell apart is a host write made while an app
    /// holds the file open for writing: the
    /// other apps hear of it when that app closes the file, the app itself
    /// not at all.
    public func changedProviderItems(_ change: HostChange, writerKnown: Bool) -> [(provider: ProviderID, path: String)]
    {
        guard change.content, !change.onlyIfShared, let name = change.name, !name.isEmpty, name != "." else {
            return []
        }
        let folders = table.directoryNodes(of: change.folder.identity)
        if !writerKnown {
            // Read late, the event may find the name gone (the writer moved
            // or removed the file meanwhile), and then nothing tells whose
            // write it was: a full run had the writing app hear of its own
            // write so. Nothing at that name has new content; its move or
            // removal is told as such (`namedProviderItems`). A stat that
            // fails otherwise (no folder descriptor to be had on a loaded
            // daemon) proves no echo: the change is told, as a host write.
            switch statOrGone(folders, name) {
            case .gone: return []
            case .found(let info) where table.isMountsOwnWrite(FileIdentity(info), version: FileVersion(info)):
                return []
            default: break
            }
        }
        return providerItems(named: name, in: folders)
    }

    /// The provider items whose name a host change made, removed or moved
    /// (presenters' subitem notices, issue 31): the entry in each provider
    /// that shows a view of the folder, once. None for the daemon's own
    /// changes, which the mount tells itself (`DocumentServices.subitemChanged`).
    public func namedProviderItems(_ change: HostChange) -> [(provider: ProviderID, path: String)] {
        guard change.naming != nil, !change.onlyIfShared, let name = change.name, !name.isEmpty, name != "." else {
            return []
        }
        return providerItems(named: name, in: table.directoryNodes(of: change.folder.identity))
    }

    private func providerItems(named name: String, in folders: [Node]) -> [(provider: ProviderID, path: String)] {
        var items: [(provider: ProviderID, path: String)] = []
        for folder in folders {
            guard case .provider(_, let provider) = folder.place, let path = try? table.path(of: folder.inode) else {
                continue
            }
            let item = path.isEmpty ? name : path + "/" + name
            if !items.contains(where: { $0.provider == provider && $0.path == item }) {
                items.append((provider, item))
            }
        }
        return items
    }

    /// The status of `name` in the first of one host folder's nodes,
    /// through its descriptor (opened again if the cache evicted it).
    private enum FolderStat {
        case found(stat)
        /// No file at the name (ENOENT).
        case gone
        /// Not known: no folder descriptor, or another error.
        case unknown
    }

    private func statOrGone(_ folders: [Node], _ name: String) -> FolderStat {
        guard let folder = folders.first, let descriptor = try? folderDescriptor(of: folder) else { return .unknown }
        do throws(Errno) {
            return .found(
                try withExtendedLifetime(descriptor) { () throws(Errno) in try Sys.statAt(descriptor.number, name) })
        } catch {
            return error == .noSuchFileOrDirectory ? .gone : .unknown
        }
    }

    private func statInFolder(_ folders: [Node], _ name: String) -> stat? {
        guard let folder = folders.first, let descriptor = try? folderDescriptor(of: folder) else { return nil }
        return withExtendedLifetime(descriptor) { try? Sys.statAt(descriptor.number, name) }
    }

    /// Everything the kernel may have cached: after the channel lost events
    /// (its queue overflowed), no cached answer can be trusted. Dropping a
    /// folder's entry also drops the negative entries below it.
    public func invalidationOfEverything() -> CacheInvalidation {
        var invalidation = CacheInvalidation()
        for node in table.everything() {
            invalidation.inodes.append(node.inode)
            invalidation.entries.append((node.parent, node.name))
        }
        return invalidation
    }
}
