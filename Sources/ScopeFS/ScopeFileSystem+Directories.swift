import FuseBridge
import Glibc
import HostText
import Policy
import SystemPackage

/// Listing folders (SPEC S2): synthetic folders list what the caller may
/// enter, bare ancestor folders only the children that lead to grants,
/// granted folders everything in them.
extension ScopeFileSystem {
    public func opendir(_ request: Request, inode: UInt64) throws(Errno) -> OpenDirectory {
        let caller = callers.caller(of: request)
        let target = try gate(inode, .read, caller, .opendir)
        guard target.node.isDirectory else { throw .notDirectory }
        // A backed folder is read through a descriptor of its own.
        let charge = target.node.place.isBacked ? try chargeDescriptor(caller, target.resolved, .opendir) : nil
        let entries = try entries(of: target, caller: caller)
        let handle = DirectoryHandle(node: target.node, entries: entries, charge: charge)
        keepOwnerPreviews(of: target, caller: caller, entries: entries)
        return OpenDirectory(handle: handle.retainedHandle(), cachesListing: cachesListing(of: target.node, entries))
    }

    /// Whether listings may be kept by the kernel at all (docs/DECISIONS.md,
    /// decision 40: switched off once, until a host move of a folder dropped
    /// the kept listings of its whole subtree).
    static let kernelKeepsListings = true

    /// Whether the kernel may keep `folder`'s listing (docs/DECISIONS.md, decision 40):
    /// a backed folder whose host changes the channel reports (each drops
    /// the listing with the folder's pages, `invalidation(for:)`), listed
    /// the same to every caller the gate lets in; a policy change drops the
    /// listings it changes (`install`). The root lists per caller and the
    /// other synthetic folders are cheap: never kept.
    ///
    /// A large folder's (`largeFolderBytes` on the host) only from its
    /// second opendir on: the kernel copies each entry into the kept pages
    /// as the listing goes by, which made the first listing of 10,000
    /// entries 1.27x passthrough_ll's, against 0.91x with nothing kept
    /// (issue 33); a folder listed once never wins that back, one listed
    /// again pays it once more. Small folders (what `git status` walks) are
    /// kept from their first listing, so a repeat finds them kept.
    func cachesListing(of folder: Node, _ entries: DirectoryHandle.Entries) -> Bool {
        guard
            Self.kernelKeepsListings && folder.place.isBacked && folder.changesWatched.load(ordering: .relaxed)
                && configuration.cacheTimeout > configuration.unwatchedTimeout
        else { return false }
        // A backed folder listed from a fixed list: one app's, with its
        // temporaries of saves (S48).
        guard case .host(let stream, _, _) = entries else { return false }
        if folder.openedBefore.exchange(true, ordering: .relaxed) { return true }
        guard let size = stream.hostSize else { return true }
        return size < Self.largeFolderBytes
    }

    /// A folder this large on the host is not kept at its first listing:
    /// about 3,000 entries on tmpfs (20 bytes an entry) or on ext4 with
    /// short names.
    static let largeFolderBytes: Int64 = 64 << 10

    public func readdir(
        _ request: Request, inode: UInt64, handle: UInt64, offset: Int64, listing: inout DirectoryListing
    ) throws(Errno) {
        let caller = callers.caller(of: request)
        let directory = DirectoryHandle.from(handle)
        // The directory was opened in scope: reading it on is a read through
        // its handle, which needs an active grant but no scope (S9, S47).
        let target = try gate(inode, .read, caller, .readdir, route: .descriptor)
        if offset == 0 && directory.hasBeenRead {
            // rewinddir(): show the folder as it is now.
            directory.entries = try entries(of: target, caller: caller)
        }
        directory.hasBeenRead = true
        switch directory.entries {
        case .fixed(let items):
            var index = Int(offset)
            while index < items.count {
                let item = items[index]
                let added = item.name.withHostCString { name in
                    add(
                        name, inode: item.inode, type: item.type, next: Int64(index + 1), of: target, caller: caller,
                        to: &listing)
                }
                guard added else { break }
                index += 1
            }
        case .host(let stream, let shown, let hidesStaging):
            stream.seek(to: offset)
            while let entry = stream.peek() {
                let isDot = entry.isDotOrDotDot
                let hidden = hidesStaging && StagingNames.isStaging(cString: entry.name)
                if isDot || !hidden && shown?.contains(HostNameKey(HostName.string(cString: entry.name))) ?? true {
                    // The host's "." and ".." carry host inode numbers: list
                    // ours, as synthetic folders do.
                    let inode = !isDot ? entry.inode : entry.name[1] == 0 ? target.node.inode : NodeTable.rootInode
                    guard
                        add(
                            entry.name, inode: inode, type: entry.type, next: entry.nextOffset, of: target,
                            caller: caller, to: &listing)
                    else { break }
                }
                stream.advance()
            }
        }
    }

    /// Adds one entry; false when it did not fit. A readdirplus entry is a
    /// full lookup, except for "." and ".." and for entries that vanished
    /// since they were read (sent without attributes).
    private func add(
        _ name: UnsafePointer<CChar>, inode: UInt64, type: mode_t, next: Int64, of folder: Target, caller: Caller,
        to listing: inout DirectoryListing
    ) -> Bool {
        var info = stat()
        info.st_ino = ino_t(inode)
        info.st_mode = type
        guard listing.isPlus else { return listing.add(name: name, attributes: info, nextOffset: next) }
        // Asked before the lookup, which takes a count on the node.
        guard listing.fits(name) else { return false }
        if !isDotOrDotDot(name) {
            let childName = HostName.string(cString: name)
            if let (node, attributes) = try? child(of: folder, named: childName, caller: caller) {
                let shown = try? presented(node, attributes, path: RelativePath.join(folder.path, childName))
                guard let shown else {
                    // No path for a reference stub (EIO, logged): listed without an entry.
                    forget(node.inode, count: 1)
                    return listing.addPlus(name: name, entry: nil, fallback: info, nextOffset: next)
                }
                if listing.addPlus(
                    name: name, entry: entry(node, shown, in: folder.node), fallback: info, nextOffset: next)
                {
                    return true
                }
                forget(node.inode, count: 1)
                return false
            }
        }
        return listing.addPlus(name: name, entry: nil, fallback: info, nextOffset: next)
    }

    public func releasedir(inode: UInt64, handle: UInt64) {
        DirectoryHandle.release(handle)
    }

    public func fsyncdir(_ request: Request, inode: UInt64, handle: UInt64, dataOnly: Bool) throws(Errno) {
        // On the directory's handle, as readdir (S9, S47).
        let target = try gate(inode, .read, callers.caller(of: request), .fsyncdir, route: .descriptor)
        guard target.node.folder != nil else { return }
        let directory = try folderDescriptor(of: target.node)
        defer { withExtendedLifetime(directory) {} }
        let descriptor = try Sys.openAt(directory.number, ".", O_RDONLY | O_DIRECTORY)
        defer { Sys.close(descriptor) }
        try Sys.fsync(descriptor, dataOnly: dataOnly)
    }

    // MARK: Listings

    private func entries(of target: Target, caller: Caller) throws(Errno) -> DirectoryHandle.Entries {
        let snapshot = withPolicy { $0 }
        func synthetic(_ names: [String]) -> DirectoryHandle.Entries {
            let dots = [
                DirectoryHandle.Item(name: ".", inode: target.node.inode, type: S_IFDIR),
                DirectoryHandle.Item(name: "..", inode: NodeTable.rootInode, type: S_IFDIR),
            ]
            return .fixed(dots + names.map { DirectoryHandle.Item(name: $0, inode: 0, type: S_IFDIR) })
        }
        func host(shown: Set<HostNameKey>? = nil, hidesStaging: Bool = false) throws(Errno) -> DirectoryHandle.Entries {
            let directory = try folderDescriptor(of: target.node)
            defer { withExtendedLifetime(directory) {} }
            return .host(
                try HostDirectoryStream(directory: directory.number), shown: shown, hidesStaging: hidesStaging)
        }
        switch target.node.place {
        case .root:
            return synthetic(snapshot.apps.keys.sorted().filter { Decision.mayEnter(app: $0, caller: caller) })
        case .appDirectory:
            return synthetic([MountLayout.container, MountLayout.providers])
        case .providersDirectory(let app):
            return synthetic(snapshot.visibleProviders(of: app))
        case .container:
            return try host()
        case .provider(let app, let provider):
            if case .granted = try coverage(of: target.resolved, app: app, provider: provider) {
                return try host(hidesStaging: true)
            }
            let leading = snapshot.childrenLeadingToGrants(app: app, provider: provider, path: try target.path) ?? []
            // The app's temporaries of saves show to it, by its names (S48).
            if let listing = try listingWithTemporaries(target, leading: leading, caller: caller) { return listing }
            return try host(shown: leading, hidesStaging: true)
        }
    }
}
