import CSystemShims
import FuseBridge
import Glibc
import HostText
import Policy
import SystemPackage

/// Folder documents (a folder exported with AddFull's export-directory
/// flag, or picked in directory mode): `DOC_ID/NAME` is the folder, with
/// its contents below it as the host has them, as a ScopeFS folder grant
/// covers them. A read grant reads and lists; a read-write grant also
/// writes, creates, makes folders, removes and renames inside the
/// document (never out of it: EXDEV), among them symbolic links and hard
/// links of its own items. Every step below the document is opened with
/// O_NOFOLLOW from the document's own folder (`FolderWalk`), so no link
/// leads the layout out of it.
extension DocumentLayout {
    /// A number no node has: what a listing shows for a name never looked up.
    static let unheldNumber: UInt64 = 0x00ff_ffff_ffff_ffff

    /// The view a node belongs to (an app's, or the owner's when nil).
    static func viewApp(of node: Node, _ folderNodes: DocumentFolderNodes) -> AppID? {
        switch node {
        case .documentFolder(_, let app), .documentFile(_, let app): return app
        case .inside(let number): return folderNodes.place(number)?.app
        default: return nil
        }
    }

    /// For a node of a folder document (its root, or an item inside), the
    /// document, the view and the path below the document ("" at its root).
    func folderPlace(_ node: Node) throws(Errno) -> (PortalDocument, AppID?, String)? {
        switch node {
        case .documentFile(let id, let app):
            guard let document = portal.table.documents[id], document.isDirectory else { return nil }
            return (document, app, "")
        case .inside(let number):
            guard let place = folderNodes.place(number) else { throw Errno.noSuchFileOrDirectory }
            guard let document = portal.table.documents[place.documentID] else { throw Errno.noSuchFileOrDirectory }
            return (document, place.app, place.path)
        default:
            return nil
        }
    }

    /// The grant's access to the folder document for the view, checked now
    /// (ENOENT once no grant lets the app see it).
    private func access(_ document: PortalDocument, app: AppID?) throws(Errno) -> Access? {
        try self.document(document.id, app: app).1
    }

    func folderItemAttributes(_ node: Node) throws(Errno) -> stat {
        guard let (document, app, path) = try folderPlace(node) else { throw Errno.noSuchFileOrDirectory }
        let access = try access(document, app: app)
        var attributes = try FolderWalk.status(document.hostPath, path)
        // A read grant shows no write bit, as on the document itself.
        let kept: mode_t = access == .read ? ~0o7222 : ~0o7000
        attributes.st_mode &= kept
        // The document's own folder is a node of the layout; below it,
        // each file shows its host inode, so hard links are one file.
        attributes.st_ino =
            path.isEmpty
            ? __ino_t(inode(node))
            : __ino_t(FolderWalk.shownInode(device: UInt64(attributes.st_dev), hostInode: UInt64(attributes.st_ino)))
        attributes.st_uid = ownerUID
        return attributes
    }

    /// The entry of `name` in a folder document's folder.
    func folderEntry(_ folder: (PortalDocument, AppID?, String), _ parent: Node, _ name: String) throws(Errno) -> Entry
    {
        let (document, app, path) = folder
        _ = try access(document, app: app)
        let childPath = RelativePath.join(path, name)
        _ = try FolderWalk.status(document.hostPath, childPath)
        let number = folderNodes.lookedUp(.init(documentID: document.id, app: app, path: childPath))
        do {
            return try entry(.inside(number))
        } catch {
            folderNodes.forgot(number, count: 1)
            throw error
        }
    }

    /// A folder document's listing: its host names, with their types and
    /// the inode numbers `stat` shows for them.
    func folderListing(_ node: Node) throws(Errno) -> [(String, UInt64, mode_t)]? {
        guard let (document, app, path) = try folderPlace(node) else { return nil }
        _ = try access(document, app: app)
        let device = UInt64(try FolderWalk.status(document.hostPath, path).st_dev)
        return try FolderWalk.names(document.hostPath, path).map { entry in
            (entry.name, FolderWalk.shownInode(device: device, hostInode: entry.hostInode), entry.type)
        }
    }

    /// A symbolic link's target below a folder document, as the host has
    /// it: the layout never follows it (every step is O_NOFOLLOW), and a
    /// target the kernel follows resolves in the caller's own view.
    func folderLinkTarget(_ node: Node) throws(Errno) -> String {
        guard let (document, app, path) = try folderPlace(node), !path.isEmpty else { throw Errno.invalidArgument }
        _ = try access(document, app: app)
        let (folder, name) = try FolderWalk.parent(document.hostPath, path)
        defer { close(folder) }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = name.withHostCString { readlinkat(folder, $0, &buffer, buffer.count - 1) }
        guard length >= 0 else { throw Errno(rawValue: errno) }
        return HostName.string(buffer[..<length].map { UInt8(bitPattern: $0) })
    }

    func openFolderItem(_ node: Node, flags: Int32, writing: Bool) throws(Errno) -> OpenDocument {
        guard let (document, app, path) = try folderPlace(node) else { throw Errno.noSuchFileOrDirectory }
        if writing, try access(document, app: app) == .read { throw Errno.permissionDenied }
        let (folder, name) = try FolderWalk.parent(document.hostPath, path)
        defer { close(folder) }
        let descriptor = name.withHostCString { openat(folder, $0, flags | O_NOFOLLOW) }
        guard descriptor >= 0 else { throw Errno(rawValue: errno) }
        var status = stat()
        if fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFDIR {
            close(descriptor)
            throw Errno.isDirectory
        }
        return OpenDocument(descriptor: descriptor, app: app, documentID: document.id, writable: writing)
    }

    func setFolderItemAttributes(_ node: Node, changes: AttributeChanges, handle: UInt64?) throws(Errno)
        -> Attributes
    {
        guard let (document, app, path) = try folderPlace(node) else { throw Errno.noSuchFileOrDirectory }
        guard changes.uid == nil, changes.gid == nil else { throw Errno.notPermitted }
        if let handle, handles.withLock({ $0.open[handle] }) != nil {
            _ = try checkedDescriptor(handle, writing: true)
        } else if try access(document, app: app) == .read {
            throw Errno.permissionDenied
        }
        let (folder, name) = try FolderWalk.parent(document.hostPath, path)
        defer { close(folder) }
        if let mode = changes.mode, name.withHostCString({ fchmodat(folder, $0, mode & 0o7777, 0) }) != 0 {
            throw Errno(rawValue: errno)
        }
        if let size = changes.size {
            let descriptor = name.withHostCString { openat(folder, $0, O_WRONLY | O_NOFOLLOW | O_CLOEXEC) }
            guard descriptor >= 0 else { throw Errno(rawValue: errno) }
            defer { close(descriptor) }
            guard ftruncate(descriptor, off_t(size)) == 0 else { throw Errno(rawValue: errno) }
        }
        if changes.accessTime != nil || changes.modificationTime != nil {
            var times = changes.utimensTimes
            let result = name.withHostCString { utimensat(folder, $0, &times, AT_SYMLINK_NOFOLLOW) }
            guard result == 0 else { throw Errno(rawValue: errno) }
        }
        return Attributes(stat: try attributes(node), timeout: Self.cacheTimeout(node))
    }

    // MARK: Changing names inside a folder document

    /// The folder-document folder `parent` names, once the view may write
    /// in it: its host descriptor (closed by the caller) and place.
    func writableFolder(_ request: Request, _ parent: UInt64) throws(Errno) -> (
        descriptor: Int32, document: PortalDocument, app: AppID?, path: String
    )? {
        let node = try node(parent)
        guard let (document, app, path) = try folderPlace(node) else { return nil }
        try checkCaller(request, reaching: node)
        if try access(document, app: app) == .read { throw Errno.permissionDenied }
        return (try FolderWalk.folder(document.hostPath, path), document, app, path)
    }

    func createInFolder(
        _ folder: (descriptor: Int32, document: PortalDocument, app: AppID?, path: String), name: String,
        mode: mode_t, flags: Int32, umask: mode_t
    ) throws(Errno) -> (Entry, OpenFile) {
        let accessMode = flags & O_ACCMODE == O_RDONLY ? O_RDWR : flags & O_ACCMODE
        let hostFlags = O_CREAT | accessMode | (flags & (O_EXCL | O_TRUNC | O_APPEND)) | O_CLOEXEC | O_NOFOLLOW
        let descriptor = name.withHostCString { openat(folder.descriptor, $0, hostFlags, mode & 0o7777 & ~umask) }
        guard descriptor >= 0 else { throw Errno(rawValue: errno) }
        let number = folderNodes.lookedUp(
            .init(documentID: folder.document.id, app: folder.app, path: RelativePath.join(folder.path, name)))
        let handle = register(
            OpenDocument(descriptor: descriptor, app: folder.app, documentID: folder.document.id, writable: true))
        do {
            return (try entry(.inside(number)), OpenFile(handle: handle, directIO: folder.app != nil))
        } catch {
            release(inode: 0, handle: handle)
            folderNodes.forgot(number, count: 1)
            throw error
        }
    }

    func makeFolder(
        _ folder: (descriptor: Int32, document: PortalDocument, app: AppID?, path: String), name: String,
        mode: mode_t, umask: mode_t
    ) throws(Errno) -> Entry {
        guard name.withHostCString({ mkdirat(folder.descriptor, $0, mode & 0o7777 & ~umask) }) == 0 else {
            throw Errno(rawValue: errno)
        }
        let number = folderNodes.lookedUp(
            .init(documentID: folder.document.id, app: folder.app, path: RelativePath.join(folder.path, name)))
        return try entry(.inside(number))
    }

    /// A symbolic link inside a folder document, as the host makes it.
    /// The layout never follows one (every step is O_NOFOLLOW), so its
    /// target leads nowhere through the layout (SPEC S33).
    func makeLink(
        in folder: (descriptor: Int32, document: PortalDocument, app: AppID?, path: String), name: String,
        target: String
    ) throws(Errno) -> Entry {
        let made = target.withHostCString { target in name.withHostCString { symlinkat(target, folder.descriptor, $0) }
        }
        guard made == 0 else { throw Errno(rawValue: errno) }
        return try lookedUp(in: folder, name: name)
    }

    /// A hard link of an item of the same folder document and view (EXDEV
    /// from anywhere else: a link never joins two documents or views).
    func makeHardLink(
        of source: Node, in folder: (descriptor: Int32, document: PortalDocument, app: AppID?, path: String),
        name: String
    ) throws(Errno) -> Entry {
        guard case .inside(let number) = source, let place = folderNodes.place(number),
            place.documentID == folder.document.id, place.app == folder.app, !place.path.isEmpty
        else { throw Errno.improperLink }
        let (from, sourceName) = try FolderWalk.parent(folder.document.hostPath, place.path)
        defer { close(from) }
        let made = sourceName.withHostCString { source in
            name.withHostCString { linkat(from, source, folder.descriptor, $0, 0) }
        }
        guard made == 0 else { throw Errno(rawValue: errno) }
        return try lookedUp(in: folder, name: name)
    }

    /// The entry of a name just made in a folder document.
    private func lookedUp(
        in folder: (descriptor: Int32, document: PortalDocument, app: AppID?, path: String), name: String
    ) throws(Errno) -> Entry {
        let number = folderNodes.lookedUp(
            .init(documentID: folder.document.id, app: folder.app, path: RelativePath.join(folder.path, name)))
        do {
            return try entry(.inside(number))
        } catch {
            folderNodes.forgot(number, count: 1)
            throw error
        }
    }

    func removeInFolder(
        _ folder: (descriptor: Int32, document: PortalDocument, app: AppID?, path: String),
        name: String, directory: Bool
    ) throws(Errno) {
        guard name.withHostCString({ unlinkat(folder.descriptor, $0, directory ? AT_REMOVEDIR : 0) }) == 0 else {
            throw Errno(rawValue: errno)
        }
    }

    /// A rename inside one folder document of one view; EXDEV out of it.
    func renameInFolder(
        _ request: Request, parent: UInt64, name: String, newParent: UInt64, newName: String, flags: UInt32
    ) throws(Errno) -> Bool {
        guard let from = try writableFolder(request, parent) else { return false }
        defer { close(from.descriptor) }
        guard let to = try writableFolder(request, newParent) else { throw Errno.improperLink }
        defer { close(to.descriptor) }
        guard from.document.id == to.document.id, from.app == to.app else { throw Errno.improperLink }
        let result = name.withHostCString { source in
            newName.withHostCString { renameat2(from.descriptor, source, to.descriptor, $0, flags) }
        }
        guard result == 0 else { throw Errno(rawValue: errno) }
        // A save inside the folder (a temporary renamed over a file): the
        // file's item, its grants, references and bookmarks follow (S48).
        portal.grants.fileReplaced(
            provider: from.document.provider,
            path: RelativePath.join(from.document.relativePath, RelativePath.join(to.path, newName)))
        folderNodes.renamed(
            .init(documentID: from.document.id, app: from.app, path: RelativePath.join(from.path, name)),
            to: .init(documentID: to.document.id, app: to.app, path: RelativePath.join(to.path, newName)))
        return true
    }
}
