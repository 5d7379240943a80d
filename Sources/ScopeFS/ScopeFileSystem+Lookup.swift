import FuseBridge
import Glibc
import HostText
import Policy
import SystemPackage

/// Lookup, forget and attributes: how names become nodes (SPEC S2, S3).
extension ScopeFileSystem {
    public func lookup(_ request: Request, parent: UInt64, name: String) throws(Errno) -> Entry {
        let caller = callers.caller(of: request)
        let parentTarget = try gate(parent, .lookup, caller, .lookup)
        let node: Node
        let info: stat
        do {
            (node, info) = try child(of: parentTarget, named: name, caller: caller)
        } catch .noSuchFileOrDirectory where cachesMisses(under: parentTarget) {
            // A host miss in a watched folder the app sees all of: the
            // kernel keeps it until a host create drops it (SPEC S37). A
            // name S2 hides is an error instead, never cached.
            return Entry.negative(timeout: configuration.cacheTimeout)
        }
        do {
            return entry(
                node, try presented(node, info, path: RelativePath.join(parentTarget.path, name)),
                in: parentTarget.node)
        } catch {
            forget(node.inode, count: 1)  // the lookup just taken never reaches the kernel
            throw error
        }
    }

    public func forget(_ inode: UInt64, count: UInt64) {
        if let dropped = table.forget(inode, count: count) { unmarkForChanges(dropped) }
    }

    public func getattr(_ request: Request, inode: UInt64, handle: UInt64?) throws(Errno) -> Attributes {
        let caller = callers.caller(of: request)
        let target: Target
        do {
            target = try gate(inode, .lookup, caller, .getattr)
        } catch .noSuchFileOrDirectory {
            // An open file no name leads to any more (unlinked, a save's
            // temporary a revoke removed): the kernel asks before a read
            // through it, and the descriptor's rule answers (S14: EPERM
            // once revoked), not the name's ENOENT.
            guard let handle else { throw .noSuchFileOrDirectory }
            let open = OpenHandle.from(handle)
            try checkUser(open, request, .getattr, caller)
            try checkStillGranted(open, .getattr, request)
            return Attributes(stat: presentedContent(open.node, try Sys.stat(open.descriptor)), timeout: 0)
        }
        // A temporary of a save is its app's alone (S48): never kept.
        let timeout = isTemporary(target.node) ? 0 : attributeTimeout(target.node, parent: target.resolved.parent)
        if let handle, target.node.place.isBacked, !target.node.isDirectory {
            return Attributes(
                stat: presentedContent(target.node, try Sys.stat(OpenHandle.from(handle).descriptor)),
                timeout: timeout)
        }
        let info = try presented(target.node, try attributes(of: target.resolved), path: target.path)
        return Attributes(stat: presentedContent(target.node, info), timeout: timeout)
    }

    public func readlink(_ request: Request, inode: UInt64) throws(Errno) -> String {
        let target = try gate(inode, .metadata, callers.caller(of: request), .readlink)
        if let stub = target.node.reference {
            return referenceTarget(stub, of: target.node, containerPath: try target.path)
        }
        guard let parent = try parentDescriptor(of: target.resolved) else { throw .invalidArgument }
        defer { withExtendedLifetime(parent) {} }
        return try Sys.readlinkAt(parent.number, target.resolved.name)
    }

    public func statfs(_ request: Request, inode: UInt64) throws(Errno) -> statvfs {
        let target = try gate(inode, .lookup, callers.caller(of: request), .statfs)
        let folder = target.node.folder != nil ? target.node : target.resolved.parent
        if let folder, folder.folder != nil {
            let lease = try folderDescriptor(of: folder)
            defer { withExtendedLifetime(lease) {} }
            return try Sys.statvfs(lease.number)
        }
        return try Sys.statvfs(containers)
    }

    // MARK: Children

    /// Finds (and takes a lookup on) the child `name` of a folder that the
    /// caller may see. Invisible children are ENOENT (SPEC S2, S3).
    func child(of parent: Target, named name: String, caller: Caller) throws(Errno) -> (Node, stat) {
        guard parent.node.isDirectory else { throw .notDirectory }
        switch parent.node.place {
        case .root:
            guard withPolicy({ $0.apps[name] != nil }), Decision.mayEnter(app: name, caller: caller) else {
                throw .noSuchFileOrDirectory
            }
            return synthetic(.appDirectory(name), parent: parent.node.inode, name: name)
        case .appDirectory(let app):
            switch name {
            case MountLayout.container:
                let path = configuration.containersPath + "/" + app
                return try domainRoot(.container(app), path: path, parent: parent.node.inode, name: name)
            case MountLayout.providers:
                return synthetic(.providersDirectory(app), parent: parent.node.inode, name: name)
            default:
                throw .noSuchFileOrDirectory
            }
        case .providersDirectory(let app):
            let provider = withPolicy { $0.showsProvider(name, to: app) ? $0.providers[name] : nil }
            guard let provider else {
                throw .noSuchFileOrDirectory
            }
            return try domainRoot(.provider(app, name), path: provider.directory, parent: parent.node.inode, name: name)
        case .container:
            return try backedChild(of: parent.node, named: name)
        case .provider(let app, let provider):
            try requireVisible(name, in: parent)
            // An app's temporary of a save is its host file (S48).
            let found = try backedChild(
                of: parent.node, named: parent.grant == nil ? hostName(of: name, in: parent, caller: caller) : name)
            // Under a bare folder a name is shown for the grant made at it:
            // only if what is there now is that grant's item (issue 28).
            if parent.grant == nil { try requireGrantedItem(found.0, app: app, provider: provider) }
            return found
        }
    }

    /// A name the app cannot see is ENOENT, for lookups and for removal
    /// alike (SPEC S2). Inside a granted folder every name is visible: the
    /// grant (or a nearer one) covers the subtree, so only bare ancestor
    /// folders need the grant trie.
    /// A copy being staged (`StagingNames`) is never visible in a provider.
    func requireVisible(_ name: String, in folder: Target) throws(Errno) {
        guard case .provider(let app, let provider) = folder.node.place else { return }
        if StagingNames.isStaging(name) { throw .noSuchFileOrDirectory }
        guard folder.grant == nil else { return }
        let path = RelativePath.join(try folder.path, name)
        if withPolicy({ $0.coverage(app: app, provider: provider, path: path) }) == .hidden,
            temporaries.grant(of: ReplacementTemporaries.Key(app: app, provider: provider, path: path)) == nil
        {
            throw .noSuchFileOrDirectory
        }
    }

    private func synthetic(_ place: Place, parent: UInt64, name: String) -> (Node, stat) {
        let node = table.lookupSynthetic(place, parent: parent, name: name) { inode, view in
            Node(
                inode: inode, place: place, view: view, identity: nil, isDirectory: true, folder: nil,
                isDomainRoot: false)
        }
        return (node, syntheticAttributes(node))
    }

    /// The root of a container or provider view, reached by its host path.
    private func domainRoot(_ place: Place, path: String, parent: UInt64, name: String) throws(Errno) -> (Node, stat) {
        let descriptor = try Sys.openAt(AT_FDCWD, path, Sys.pathOnly | O_DIRECTORY)
        return try adopt(
            descriptor, place: place, view: table.view(of: place), parent: parent, name: name, isDomainRoot: true)
    }

    /// A host file inside a container or provider, reached relative to its
    /// parent's descriptor without following symlinks (SPEC S33). `known`
    /// is the file's status when the caller holds it open (a create).
    func backedChild(of parent: Node, named name: String, known: stat? = nil) throws(Errno) -> (Node, stat) {
        guard parent.folder != nil else { throw .staleNFSFileHandle }
        let lease = try folderDescriptor(of: parent)
        defer { withExtendedLifetime(lease) {} }
        let directory = lease.number
        guard name != "." && name != ".." && !RelativePath.hasSeparator(name) else { throw .invalidArgument }
        let info: stat
        if let known { info = known } else { info = try Sys.statAt(directory, name) }
        if info.isDirectory {
            // A folder the table knows keeps its descriptor open: no need
            // to open it again (a listing looks up every child folder).
            let key = NodeKey(view: parent.view, identity: FileIdentity(info), kind: .directory)
            if let known = table.lookupKnown(key: key, parent: parent.inode, name: name) { return (known, info) }
            let descriptor = try Sys.openAt(directory, name, Sys.pathOnly | O_DIRECTORY | O_NOFOLLOW)
            return try adopt(
                descriptor, place: parent.place, view: parent.view, parent: parent.inode, name: name,
                isDomainRoot: false)
        }
        let stub = Self.isContainer(parent.place) ? readStub(directory, name, info) : nil
        let key = NodeKey(view: parent.view, identity: FileIdentity(info), kind: stub == nil ? .file : .reference)
        let node = table.lookup(key: key, parent: parent.inode, name: name) {
            inode in
            Node(
                inode: inode, place: parent.place, view: parent.view, identity: key.identity, isDirectory: false,
                folder: nil, isDomainRoot: false, reference: stub)
        }
        return (node, info)
    }

    static func isContainer(_ place: Place) -> Bool {
        if case .container = place { return true }
        return false
    }

    /// Reads a small container file to see whether it is a reference stub.
    private func readStub(_ directory: Int32, _ name: String, _ info: stat) -> ReferenceStub? {
        guard info.isRegular, info.st_size > 0, info.st_size <= ReferenceStub.maximumSize,
            let descriptor = try? Sys.openAt(directory, name, O_RDONLY | O_NOFOLLOW)
        else { return nil }
        defer { Sys.close(descriptor) }
        return (try? Sys.pread(descriptor, ReferenceStub.maximumSize, 0)).flatMap { ReferenceStub.parse($0) }
    }

    /// A reference stub is shown as a symbolic link to its item (SPEC S23).
    func presented(_ node: Node, _ info: stat, path: @autoclosure () throws(Errno) -> String) throws(Errno) -> stat {
        guard let stub = node.reference else { return info }
        var link = info
        link.st_mode = S_IFLNK | 0o777
        link.st_size = off_t(referenceTarget(stub, of: node, containerPath: try path()).utf8.count)
        return link
    }

    /// The link target: the item's current place in the app's own view,
    /// for an item the app holds a grant on; any other stub (one the app
    /// wrote itself) shows an unknown item, whatever exists (issue 28
    /// finding 3).
    func referenceTarget(_ stub: ReferenceStub, of node: Node, containerPath: String) -> String {
        let location = withPolicy { policy -> ItemLocation? in
            guard case .container(let app) = node.place else { return nil }
            return policy.referencedLocation(app: app, provider: stub.provider, item: stub.item)
        }
        let itemPath = location.map { $0.exists ? $0.path : $0.path + " (missing)" } ?? "unknown-item-" + stub.item
        return ReferenceStub.linkTarget(containerPath: containerPath, provider: stub.provider, itemPath: itemPath)
    }

    /// Makes (or finds) the node of a directory whose O_PATH descriptor was
    /// just opened; the descriptor is closed if the node already had one.
    private func adopt(
        _ descriptor: Int32, place: Place, view: UInt32, parent: UInt64, name: String, isDomainRoot: Bool
    ) throws(Errno) -> (Node, stat) {
        let info: stat
        do { info = try Sys.stat(descriptor) } catch {
            Sys.close(descriptor)
            throw error
        }
        let identity = FileIdentity(info)
        var adopted = false
        let key = NodeKey(view: view, identity: identity, kind: .directory)
        // Made before the table's lock is taken; if the node exists
        // already, the slot and its descriptor go when this returns.
        let slot = newFolderSlot(descriptor, isDomainRoot: isDomainRoot)
        let node = table.lookup(key: key, parent: parent, name: name) { inode in
            adopted = true
            return Node(
                inode: inode, place: place, view: view, identity: identity, isDirectory: true, folder: slot,
                isDomainRoot: isDomainRoot)
        }
        if adopted {
            if !slot.isPinned { folderDescriptors.admit(slot) }
            markForChanges(node, descriptor: descriptor)
        }
        return (node, info)
    }

    // MARK: Attributes

    /// The entry of `node`, found in `folder`.
    func entry(_ node: Node, _ info: stat, in folder: Node) -> Entry {
        // A temporary of a save is its app's alone (S48): nothing of it kept.
        let kept = !isTemporary(node)
        return Entry(
            inode: node.inode, attributes: presentedContent(node, info),
            attributeTimeout: kept ? attributeTimeout(node, parent: folder) : 0,
            entryTimeout: kept ? entryTimeout(node, in: folder) : 0)
    }

    private func entryTimeout(_ node: Node, in folder: Node) -> Double {
        // The entry of `MOUNT/<app>` is never cached: each path walk asks
        // again, so another app's process meets ENOENT (SPEC S3).
        if case .appDirectory = node.place { return 0 }
        return node.isLayout ? configuration.layoutTimeout : timeout(under: folder)
    }

    /// Attributes of a node: its host file's, or made up for synthetic folders.
    func attributes(of resolved: NodeTable.Resolved) throws(Errno) -> stat {
        let node = resolved.node
        guard node.place.isBacked else { return syntheticAttributes(node) }
        if node.folder != nil {
            let lease = try folderDescriptor(of: node)
            defer { withExtendedLifetime(lease) {} }
            return try Sys.stat(lease.number)
        }
        guard let parent = try parentDescriptor(of: resolved) else { throw .staleNFSFileHandle }
        defer { withExtendedLifetime(parent) {} }
        if let info = try? Sys.statAt(parent.number, resolved.name), FileIdentity(info) == node.identity { return info }
        // Unlinked or replaced while open: the open descriptor still has it.
        guard let open = resolved.openFile else { throw .noSuchFileOrDirectory }
        return try Sys.stat(open.descriptor)
    }

    func syntheticAttributes(_ node: Node) -> stat {
        var info = stat()
        info.st_ino = ino_t(node.inode)
        info.st_mode = S_IFDIR | 0o555
        info.st_nlink = 2
        info.st_uid = daemonUID
        info.st_gid = daemonGID
        info.st_atim = mountTime
        info.st_mtim = mountTime
        info.st_ctim = mountTime
        info.st_blksize = 4096
        return info
    }
}
