import Glibc
import SystemPackage

/// Folder descriptors on demand (issue 29, finding 2; SPEC S40, S33).
///
/// A folder whose descriptor the cache evicted is opened again by its name
/// from its parent's descriptor — the parent's own opened again the same
/// way if it was evicted too, up to a domain root, whose descriptor is
/// pinned — without following a symlink, and must be the node's folder:
/// same device and inode. A folder moved, removed or replaced on the host
/// since is not there under that name: it is then opened by its file
/// handle (`HostFileHandle`), which finds it wherever it is, as the held
/// descriptor did, and where it is is checked as before; with no handle
/// (or a folder that is gone) the operation fails with ENOENT, as on a
/// folder that is gone, until the kernel looks the new name up. A folder
/// reached by name is
/// where its path says at the moment of the open, relative to a parent
/// whose own location the gate checks (`checkHostLocation`): a folder
/// moved out of its grant is not reachable through a re-open (S33).
extension ScopeFileSystem {
    /// How often a re-open is tried again when the node table's name for a
    /// folder changed while it was being opened (a rename through the mount
    /// racing with the open).
    private static let reopenAttempts = 3

    /// The descriptor of a backed folder node, opened again if the cache
    /// evicted it. Keep the returned object alive while its number is used.
    func folderDescriptor(of node: Node) throws(Errno) -> FolderDescriptor {
        guard let slot = node.folder else { throw .notDirectory }
        if let held = slot.take() { return held }
        var attempt = 1
        while true {
            do {
                return try reopen(node)
            } catch .noSuchFileOrDirectory where attempt < Self.reopenAttempts {
                attempt += 1
            }
        }
    }

    /// The parent's descriptor for operations on a child named in it, or
    /// nil when the node has no backed parent (a domain root, a synthetic
    /// folder).
    func parentDescriptor(of resolved: NodeTable.Resolved) throws(Errno) -> FolderDescriptor? {
        guard let parent = resolved.parent, parent.folder != nil else { return nil }
        return try folderDescriptor(of: parent)
    }

    /// Walks up the parent links to the nearest folder that still has a
    /// descriptor, then opens each folder below it on the way back down.
    /// Iterative: a deep tree whose folders were all evicted would take a
    /// stack frame per level otherwise.
    private func reopen(_ node: Node) throws(Errno) -> FolderDescriptor {
        var below: [(node: Node, name: String)] = []
        var current = node
        var base: FolderDescriptor
        while true {
            guard below.count < PathWalk.maximumDepth, let (parent, name) = table.parentEntry(of: current.inode)
            else { throw .noSuchFileOrDirectory }
            below.append((current, name))
            guard let parentSlot = parent.folder else { throw .noSuchFileOrDirectory }
            if let held = parentSlot.take() {
                base = held
                break
            }
            current = parent
        }
        for (folder, name) in below.reversed() {
            base = try open(folder, named: name, in: base)
        }
        return base
    }

    /// Opens `folder` as `name` in `parent`, checks it is the node's folder
    /// and installs it in the node's slot (and the cache).
    private func open(_ folder: Node, named name: String, in parent: FolderDescriptor) throws(Errno)
        -> FolderDescriptor
    {
        guard let slot = folder.folder else { throw .notDirectory }
        if let held = slot.take() { return held }  // opened by another request meanwhile
        guard
            let descriptor = opened(
                folder,
                { () throws(Errno) in
                    try Sys.openAt(parent.number, name, Sys.pathOnly | O_DIRECTORY | O_NOFOLLOW)
                })
                ?? slot.handle.flatMap({ handle in
                    opened(folder, { () throws(Errno) in try handle.open(on: parent.number, flags: Sys.pathOnly) })
                })
        else { throw .noSuchFileOrDirectory }
        let (kept, installed) = slot.install(descriptor)
        if installed { folderDescriptors.admit(slot) }
        return kept
    }

    /// The descriptor `open` makes if it is `folder`'s: a directory with
    /// the node's device and inode. Nil if the open fails or finds another
    /// file (a folder replaced on the host under the same name).
    private func opened(_ folder: Node, _ open: () throws(Errno) -> Int32) -> FolderDescriptor? {
        guard let number = try? open() else { return nil }
        let descriptor = FolderDescriptor(number)
        guard let info = try? Sys.stat(number), info.isDirectory, FileIdentity(info) == folder.identity else {
            return nil
        }
        return descriptor
    }

    /// A new folder node's slot, holding the descriptor it was looked up
    /// with: pinned for a domain root, cached for any other, with the
    /// folder's handle (one system call) for when its name changes.
    func newFolderSlot(_ number: Int32, isDomainRoot: Bool) -> FolderSlot {
        if isDomainRoot { return FolderSlot(pinned: FolderDescriptor(number)) }
        let slot = FolderSlot(handle: HostFileHandle(of: number))
        _ = slot.install(FolderDescriptor(number))
        return slot
    }
}
