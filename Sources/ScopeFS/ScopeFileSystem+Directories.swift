import FuseBridge
import Glibc
import Policy
import SystemPackage

/// Listing folders (SPEC S2): synthetic folders list what the caller may
/// enter, bare ancestor folders only the children that lead to grants,
/// granted folders everything in them.
extension ScopeFileSystem {
    public func opendir(_ request: Request, inode: UInt64) throws(Errno) -> UInt64 {
        let caller = callers.caller(of: request)
        let target = try gate(inode, .read, caller)
        guard target.node.isDirectory else { throw .notDirectory }
        return DirectoryHandle(node: target.node, items: try items(of: target, caller: caller)).handle
    }

    public func readdir(
        _ request: Request, inode: UInt64, handle: UInt64, offset: Int64, listing: inout DirectoryListing
    ) throws(Errno) {
        let caller = callers.caller(of: request)
        let directory = DirectoryHandle.from(handle)
        // The directory was opened in scope: reading it on needs the grant only.
        let target = try gate(inode, .metadata, caller)
        if offset == 0 && directory.hasBeenRead {
            // rewinddir(): show the folder as it is now.
            directory.items = try items(of: target, caller: caller)
        }
        directory.hasBeenRead = true
        var index = Int(offset)
        while index < directory.items.count {
            let item = directory.items[index]
            if listing.isPlus {
                // Asked before the lookup, which takes a count on the node.
                guard listing.fits(item.name), add(item, of: target, caller: caller, at: index + 1, to: &listing)
                else { break }
            } else {
                var info = stat()
                info.st_ino = ino_t(item.inode)
                info.st_mode = item.type
                guard listing.add(name: item.name, attributes: info, nextOffset: Int64(index + 1)) else { break }
            }
            index += 1
        }
    }

    /// A readdirplus entry: a full lookup, except for "." and ".." and for
    /// entries that vanished since opendir (sent without attributes).
    private func add(
        _ item: DirectoryHandle.Item, of folder: Target, caller: Caller, at next: Int, to listing: inout DirectoryListing
    ) -> Bool {
        var fallback = stat()
        fallback.st_ino = ino_t(item.inode)
        fallback.st_mode = item.type
        if item.name != "." && item.name != "..", let (node, info) = try? child(of: folder, named: item.name, caller: caller) {
            let shown = presented(node, info, path: RelativePath.join(folder.path, item.name))
            if listing.addPlus(name: item.name, entry: entry(node, shown), fallback: fallback, nextOffset: Int64(next)) {
                return true
            }
            table.forget(node.inode, count: 1)
            return false
        }
        return listing.addPlus(name: item.name, entry: nil, fallback: fallback, nextOffset: Int64(next))
    }

    public func releasedir(inode: UInt64, handle: UInt64) {
        DirectoryHandle.release(handle)
    }

    public func fsyncdir(_ request: Request, inode: UInt64, handle: UInt64, dataOnly: Bool) throws(Errno) {
        let target = try gate(inode, .read, callers.caller(of: request))
        guard let directory = target.node.directory else { return }
        let descriptor = try Sys.openAt(directory, ".", O_RDONLY | O_DIRECTORY)
        defer { Sys.close(descriptor) }
        try Sys.fsync(descriptor, dataOnly: dataOnly)
    }

    // MARK: Listings

    private func items(of target: Target, caller: Caller) throws(Errno) -> [DirectoryHandle.Item] {
        let dots = [
            DirectoryHandle.Item(name: ".", inode: target.node.inode, type: S_IFDIR),
            DirectoryHandle.Item(name: "..", inode: NodeTable.rootInode, type: S_IFDIR),
        ]
        let snapshot = withPolicy { $0 }
        func synthetic(_ names: [String]) -> [DirectoryHandle.Item] {
            dots + names.map { DirectoryHandle.Item(name: $0, inode: 0, type: S_IFDIR) }
        }
        switch target.node.place {
        case .root:
            return synthetic(snapshot.apps.keys.sorted().filter { Decision.mayEnter(app: $0, caller: caller) })
        case .appDirectory:
            return synthetic([Self.containerName, Self.providersName])
        case .providersDirectory(let app):
            return synthetic(snapshot.visibleProviders(of: app))
        case .container:
            return dots + (try hostEntries(target.node))
        case .provider(let app, let provider):
            let all = try hostEntries(target.node)
            if case .granted = coverage(of: target.resolved, app: app, provider: provider) { return dots + all }
            let leading = snapshot.childrenLeadingToGrants(app: app, provider: provider, path: target.path) ?? []
            return dots + all.filter { leading.contains($0.name) }
        }
    }

    /// The entries of a backed folder, read in one go.
    private func hostEntries(_ node: Node) throws(Errno) -> [DirectoryHandle.Item] {
        guard let directory = node.directory else { throw .notDirectory }
        let descriptor = try Sys.openAt(directory, ".", O_RDONLY | O_DIRECTORY)
        guard let stream = fdopendir(descriptor) else {
            Sys.close(descriptor)
            throw Errno(rawValue: errno)
        }
        defer { closedir(stream) }
        var items: [DirectoryHandle.Item] = []
        while let entry = Glibc.readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name == "." || name == ".." { continue }
            items.append(
                DirectoryHandle.Item(name: name, inode: UInt64(entry.pointee.d_ino), type: mode_t(entry.pointee.d_type) << 12))
        }
        return items
    }
}
