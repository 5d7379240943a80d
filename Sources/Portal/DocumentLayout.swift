import CSystemShims
import FuseBridge
import Glibc
import HostText
import Policy
import Processes
import Synchronization
import SystemPackage

/// The document store's mount layout (SPEC S45, docs/PORTAL.md), served
/// by `scopefs portal` from the document table and ScopeFS's grants:
/// `DOC_ID/NAME` for the owner, `by-app/APP/DOC_ID/NAME` for each app
/// holding an active grant of the document, with the grant's access as
/// mode bits and `user.document-portal.host-path` naming the file.
///
/// Content under `by-app/APP` is served only while APP's grant is active,
/// checked at open and at every read and write, so a revoke (either way)
/// cuts a descriptor opened before it (EPERM, S14). A document's content
/// may be written (a read-write grant: what a portal app does with the
/// path SaveFile gave it); the layout itself, names and folders, never
/// changes (EROFS). App processes of
/// `scopefs run` are refused (EACCES) everywhere but below `by-app/APP`
/// of their own app, which a sandbox given the portal bus shows at the
/// mount point, as Flatpak's does (`scopefs run --portal-bus`).
final class DocumentLayout: FileSystem {
    let portal: DocumentPortal
    let ownerUID = getuid()
    /// App ids by number: an inode names an app by its index here.
    private let apps = Mutex<[AppID]>([])
    let handles = Mutex<(next: UInt64, open: [UInt64: OpenDocument])>((1, [:]))
    /// The temporary files of saves in progress (SPEC S48).
    let temporaries = DocumentTemporaries()
    /// The items shown inside folder documents.
    let folderNodes = DocumentFolderNodes()

    static let hostPathAttribute = "user.document-portal.host-path"
    /// FUSE's root inode (FUSE_ROOT_ID).
    private static let rootInode: UInt64 = 1
    /// Entries and attributes change with the policy: short timeouts keep
    /// a revoke visible within a second without notifications.
    static let timeout = 1.0

    struct OpenDocument {
        var descriptor: Int32
        var app: AppID?
        var documentID: String
        var writable: Bool
        /// The temporary it is a file of, if it is not the document's.
        var temporary: UInt64? = nil
        /// What it was opened for: each read and write asks the one rule
        /// for all of it (SPEC S47), as ScopeFS's descriptors do.
        var access: DescriptorAccess { writable ? [.read, .write] : .read }
    }

    init(portal: DocumentPortal) {
        self.portal = portal
    }

    // MARK: Inodes

    /// What an inode names; its number encodes the kind, the app's index
    /// and the document id (eight hex digits), so no table is needed.
    enum Node: Equatable {
        case root
        case byApp
        case appFolder(AppID)
        case documentFolder(String, app: AppID?)
        case documentFile(String, app: AppID?)
        /// A temporary of a save in a document's folder (`temporaries`).
        case temporary(UInt64)
        /// An item inside a folder document (`folderNodes`).
        case inside(UInt64)
    }

    private func appIndex(_ app: AppID) -> UInt64 {
        apps.withLock { list in
            if let index = list.firstIndex(of: app) { return UInt64(index) }
            list.append(app)
            return UInt64(list.count - 1)
        }
    }

    func inode(_ node: Node) -> UInt64 {
        func id(_ text: String) -> UInt64 { UInt64(text, radix: 16) ?? 0 }
        func app(_ app: AppID?) -> UInt64 { app.map { (appIndex($0) + 1) << 32 } ?? 0 }
        switch node {
        case .root: return Self.rootInode
        case .byApp: return 2
        case .appFolder(let name): return 3 << 56 | app(name)
        case .documentFolder(let doc, let owner): return 4 << 56 | app(owner) | id(doc)
        case .documentFile(let doc, let owner): return 5 << 56 | app(owner) | id(doc)
        case .temporary(let number): return 6 << 56 | number
        case .inside(let number): return 7 << 56 | number
        }
    }

    func node(_ inode: UInt64) throws(Errno) -> Node {
        if inode == Self.rootInode { return .root }
        if inode == 2 { return .byApp }
        if inode >> 56 == 7 {
            let number = inode & 0x00ff_ffff_ffff_ffff
            guard folderNodes.place(number) != nil else { throw Errno.noSuchFileOrDirectory }
            return .inside(number)
        }
        if inode >> 56 == 6 {
            let number = inode & 0x00ff_ffff_ffff_ffff
            guard let temporary = temporaries.temporary(number) else { throw Errno.noSuchFileOrDirectory }
            if temporary.becameDocument { return .documentFile(temporary.documentID, app: temporary.app) }
            return .temporary(number)
        }
        let appNumber = (inode >> 32) & 0xff_ffff
        let app: AppID? = try appNumber == 0 ? nil : appName(appNumber - 1)
        let doc = String(format: "%08x", UInt32(inode & 0xffff_ffff))
        switch inode >> 56 {
        case 3: if let app { return .appFolder(app) }
        case 4: return .documentFolder(doc, app: app)
        case 5: return .documentFile(doc, app: app)
        default: break
        }
        throw Errno.noSuchFileOrDirectory
    }

    private func appName(_ index: UInt64) throws(Errno) -> AppID {
        guard let name = apps.withLock({ Int(index) < $0.count ? $0[Int(index)] : nil }) else {
            throw Errno.noSuchFileOrDirectory
        }
        return name
    }

    // MARK: What the layout shows

    /// The apps' access to documents: document id -> app -> access.
    private func access() throws(Errno) -> [String: [AppID: Access]] {
        let byItem = try activeAccess()
        var result: [String: [AppID: Access]] = [:]
        for document in portal.table.documents.values {
            var apps = byItem[Self.itemKey(document)] ?? [:]
            // A file yet to be made: what its pending permissions give.
            for grant in document.pendingGrants where apps[grant.app] == nil {
                apps[grant.app] = DocumentGrants.access(grant, app: grant.app)
            }
            result[document.id] = apps
        }
        return result
    }

    private func activeAccess() throws(Errno) -> [String: [AppID: Access]] {
        do { return try portal.grants.activeAccess() } catch { throw Errno.ioError }
    }

    static func itemKey(_ document: PortalDocument) -> String {
        DocumentGrants.itemKey(provider: document.provider, relativePath: document.relativePath)
    }

    /// One document, and `app`'s access to it: a lookup in the grants of
    /// the current policy version (every read asks: a revoke cuts it).
    func document(_ id: String, app: AppID?) throws(Errno) -> (PortalDocument, Access?) {
        guard let document = portal.table.documents[id] else { throw Errno.noSuchFileOrDirectory }
        // A file made on the host since: the pending permissions become grants.
        if document.pending != nil, document.fileExists { portal.fileAppeared(document) }
        guard let app else { return (document, nil) }
        let access =
            try activeAccess()[Self.itemKey(document)]?[app]
            ?? document.pendingGrant(for: app).flatMap { DocumentGrants.access($0, app: app) }
        guard let access else { throw Errno.noSuchFileOrDirectory }
        return (document, access)
    }

    private func folderAttributes(_ inode: UInt64, writable: Bool = false) -> stat {
        var attributes = stat()
        attributes.st_ino = __ino_t(inode)
        attributes.st_mode = S_IFDIR | (writable ? 0o700 : 0o500)
        attributes.st_nlink = 2
        attributes.st_uid = ownerUID
        attributes.st_gid = getgid()
        return attributes
    }

    func attributes(_ node: Node) throws(Errno) -> stat {
        let number = inode(node)
        switch node {
        case .root, .byApp, .appFolder:
            return folderAttributes(number)
        case .documentFolder(let id, let app):
            // Writable (0700) where the view may save the document by a
            // temporary renamed over it (S48), as `access` then answers.
            let (document, _) = try document(id, app: app)
            // A folder document is saved inside itself, never beside.
            return folderAttributes(number, writable: !document.isDirectory && mayReplace(document, app: app))
        case .inside:
            return try folderItemAttributes(node)
        case .temporary(let number):
            guard let temporary = temporaries.temporary(number) else { throw Errno.noSuchFileOrDirectory }
            var attributes = stat()
            let (document, _) = try document(temporary.documentID, app: temporary.app)
            guard Self.hostPath(of: temporary, in: document).withHostCString({ lstat($0, &attributes) }) == 0 else {
                throw Errno(rawValue: errno)
            }
            attributes.st_ino = __ino_t(self.inode(node))
            attributes.st_uid = ownerUID
            return attributes
        case .documentFile(let id, let app):
            let (document, access) = try document(id, app: app)
            var attributes = stat()
            guard document.hostPath.withHostCString({ stat($0, &attributes) }) == 0 else {
                throw Errno(rawValue: errno)
            }
            // Permissions as mode bits: the file's own, readable by its
            // owner, without write bits for a read-only grant. (A save
            // copies them to its temporary: they must be the file's.)
            let kept: mode_t = access == .read ? ~0o7222 : ~0o7000
            attributes.st_mode = (attributes.st_mode & kept) | 0o400
            attributes.st_ino = __ino_t(number)
            attributes.st_uid = ownerUID
            return attributes
        }
    }

    private func children(_ node: Node) throws(Errno) -> [(name: String, node: Node)] {
        switch node {
        case .root:
            return [("by-app", .byApp)]
                + portal.table.documents.keys.sorted().map { ($0, .documentFolder($0, app: nil)) }
        case .byApp:
            let holders = Set(try access().values.flatMap(\.keys))
            return holders.sorted().map { ($0, .appFolder($0)) }
        case .appFolder(let app):
            return try access().filter { $0.value[app] != nil }.keys.sorted().map {
                ($0, .documentFolder($0, app: app))
            }
        case .documentFolder(let id, let app):
            // The document's file while it is there (a save may have moved
            // it to a temporary name for a moment), then the view's
            // temporaries.
            let (document, _) = try document(id, app: app)
            var status = stat()
            let present = document.hostPath.withHostCString { lstat($0, &status) } == 0
            return (present ? [(document.name, Node.documentFile(id, app: app))] : [])
                + temporaries.listed(document: id, app: app).map { ($0.name, .temporary($0.number)) }
        case .documentFile, .temporary, .inside:
            guard let (document, _, path) = try folderPlace(node) else { throw Errno.notDirectory }
            return try FolderWalk.names(document.hostPath, path).map { entry in
                let place = DocumentFolderNodes.Place(
                    documentID: document.id, app: Self.viewApp(of: node, folderNodes),
                    path: RelativePath.join(path, entry.name))
                // Listed, not looked up: a known number, else one no node has.
                return (entry.name, .inside(folderNodes.number(of: place) ?? Self.unheldNumber))
            }
        }
    }

    /// Who may reach `node`: the owner's own processes, all of it; an app
    /// process, only what is below `by-app/APP` of its own app
    /// (`CallerIdentity`: the daemon's attribution, checked against the
    /// app its sandbox's read-only `/.flatpak-info` names, which the portal
    /// frontend reads to attribute its requests); anyone else, nothing.
    /// `binding`: a lookup of `by-app` or `by-app/APP`, which bubblewrap
    /// (the owner's uid, already one of the run's processes) makes to show
    /// that folder.
    func checkCaller(_ request: Request, reaching node: Node, binding: Bool = false) throws(Errno) {
        let caller = portal.callers.identify(pid: request.threadID, uid: request.uid)
        if caller.isOwner || (binding && request.uid == ownerUID && caller.app != nil) { return }
        let app: AppID?
        switch node {
        case .appFolder(let folder): app = folder
        case .documentFolder(_, let folder), .documentFile(_, let folder): app = folder
        case .temporary(let number): app = temporaries.temporary(number)?.app
        case .inside(let number): app = folderNodes.place(number)?.app
        case .root, .byApp: app = nil
        }
        guard let own = caller.app, let app, own == app else { throw Errno.permissionDenied }
    }

    // MARK: FileSystem

    func initialize(_ connection: inout ConnectionSettings) {
        connection.wantSplice = false
        connection.wantReaddirplus = false
    }

    func lookup(_ request: Request, parent: UInt64, name: String) throws(Errno) -> Entry {
        let parentNode = try node(parent)
        let binding = (parentNode == .root && name == "by-app") || parentNode == .byApp
        try checkCaller(request, reaching: parentNode, binding: binding)
        if let folder = try folderPlace(parentNode) { return try folderEntry(folder, parentNode, name) }
        // Every app has its folder, empty until it holds a document: a
        // sandbox shows it from the start, before the app picks anything.
        let child: (name: String, node: Node)?
        if parentNode == .byApp, (try? DocumentPortal.validate(app: name)) != nil {
            child = (name, .appFolder(name))
        } else {
            child = try children(parentNode).first(where: { $0.name.sameHostName(as: name) })
        }
        guard let child else { throw Errno.noSuchFileOrDirectory }
        return try entry(child.node)
    }

    /// The entry of `node`. A document folder's names change with saves
    /// (a temporary renamed over the document, the document renamed to a
    /// temporary name), so the kernel keeps none of them: it asks again.
    func entry(_ node: Node) throws(Errno) -> Entry {
        let timeout = Self.cacheTimeout(node)
        return Entry(
            inode: inode(node), attributes: try attributes(node), attributeTimeout: timeout, entryTimeout: timeout)
    }

    static func cacheTimeout(_ node: Node) -> Double {
        switch node {
        case .documentFile, .temporary, .inside: return 0
        default: return timeout
        }
    }

    func forget(_ inode: UInt64, count: UInt64) {
        if inode >> 56 == 6 { temporaries.forgotten(inode & 0x00ff_ffff_ffff_ffff) }
        if inode >> 56 == 7 { folderNodes.forgot(inode & 0x00ff_ffff_ffff_ffff, count: count) }
    }

    func getattr(_ request: Request, inode: UInt64, handle: UInt64?) throws(Errno) -> Attributes {
        let node = try node(inode)
        return Attributes(stat: try attributes(node), timeout: Self.cacheTimeout(node))
    }

    /// access(2) and chdir's check. The layout runs without
    /// `default_permissions` (`PortalService.accessOptions`), so the kernel
    /// would take every access for granted, W_OK of a read-only folder or
    /// document included, as no reference portal does. So the
    /// answer is the layout's own: the caller rule of every operation, then
    /// the owner's bits of the mode the layout shows, which say what its
    /// operations allow (a read grant shows no write bit; the root, `by-app`
    /// and app folders take no change) whoever asks, root too.
    func access(_ request: Request, inode: UInt64, mask: Int32) throws(Errno) {
        let node = try node(inode)
        let binding: Bool
        switch node {
        case .byApp, .appFolder: binding = true
        default: binding = false
        }
        try checkCaller(request, reaching: node, binding: binding)
        let mode = try attributes(node).st_mode
        let wanted: [(Int32, mode_t)] = [(R_OK, 0o400), (W_OK, 0o200), (X_OK, 0o100)]
        for (bit, shown) in wanted where mask & bit != 0 && mode & shown == 0 { throw Errno.permissionDenied }
    }

    func open(_ request: Request, inode: UInt64, flags: Int32) throws(Errno) -> OpenFile {
        let file = try node(inode)
        try checkCaller(request, reaching: file)
        let writing = flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0
        let hostFlags =
            (writing ? (flags & O_ACCMODE == O_RDONLY ? O_RDWR : flags & O_ACCMODE) : O_RDONLY)
            | (flags & (O_TRUNC | O_APPEND)) | O_CLOEXEC | O_NOFOLLOW
        let opened: OpenDocument
        switch file {
        case .documentFile(let id, let app):
            let (document, access) = try document(id, app: app)
            if document.isDirectory { throw Errno.isDirectory }
            // Write needs a read-write grant (the mode shows 0400 otherwise);
            // the owner writes as the host file's mode lets it.
            if writing, access == .read { throw Errno.permissionDenied }
            let descriptor = document.hostPath.withHostCString { Glibc.open($0, hostFlags) }
            guard descriptor >= 0 else { throw Errno(rawValue: errno) }
            opened = OpenDocument(descriptor: descriptor, app: app, documentID: id, writable: writing)
        case .temporary(let number):
            guard let temporary = temporaries.temporary(number) else { throw Errno.noSuchFileOrDirectory }
            let (document, _) = try document(temporary.documentID, app: temporary.app)
            guard mayReplace(document, app: temporary.app) else { throw Errno.permissionDenied }
            let descriptor = Self.hostPath(of: temporary, in: document).withHostCString { Glibc.open($0, hostFlags) }
            guard descriptor >= 0 else { throw Errno(rawValue: errno) }
            temporaries.touched(number, by: ProcFS.processKey(ofThread: request.threadID))
            opened = OpenDocument(
                descriptor: descriptor, app: temporary.app, documentID: temporary.documentID, writable: writing,
                temporary: number)
        case .inside:
            opened = try openFolderItem(file, flags: hostFlags, writing: writing)
        default:
            throw Errno.isDirectory
        }
        let handle = register(opened)
        // An app's reads and writes bypass the page cache, so each one
        // reaches `read` or `writeTarget` and its grant check: nothing read
        // or written before a revoke is served after it.
        return OpenFile(handle: handle, directIO: opened.app != nil)
    }

    /// Keeps an open descriptor of the layout; its handle.
    func register(_ opened: OpenDocument) -> UInt64 {
        handles.withLock { state -> UInt64 in
            let handle = state.next
            state.next += 1
            state.open[handle] = opened
            return handle
        }
    }

    func read(_ request: Request, inode: UInt64, handle: UInt64, offset: Int64, size: Int) throws(Errno) -> ReadData {
        .descriptor(try checkedDescriptor(handle, writing: false), offset: offset, size: size)
    }

    /// The host descriptor behind HANDLE, once its app's grant is checked
    /// again (every read and write: a revoke cuts this descriptor, EPERM),
    /// and for a write, that the grant still allows writing.
    func checkedDescriptor(_ handle: UInt64, writing: Bool) throws(Errno) -> Int32 {
        guard let open = handles.withLock({ $0.open[handle] }) else { throw Errno.badFileDescriptor }
        if writing, !open.writable { throw Errno.badFileDescriptor }
        guard let app = open.app else { return open.descriptor }
        guard let document = portal.table.documents[open.documentID] else { throw Errno.notPermitted }
        let grant: Grant?
        do {
            grant = try portal.grants.grant(Self.itemKey(document), app: app) ?? document.pendingGrant(for: app)
        } catch {
            throw Errno.notPermitted
        }
        let allowed =
            open.temporary == nil
            ? DocumentGrants.descriptorAllowed(open.access, grant: grant, app: app)
            : DocumentGrants.temporaryDescriptorAllowed(open.access, grant: grant, app: app)
        guard allowed else { throw Errno.notPermitted }
        return open.descriptor
    }

    func release(inode: UInt64, handle: UInt64) {
        if let open = handles.withLock({ $0.open.removeValue(forKey: handle) }) { close(open.descriptor) }
    }

    func opendir(_ request: Request, inode: UInt64) throws(Errno) -> OpenDirectory {
        let folder = try node(inode)
        try checkCaller(request, reaching: folder)
        _ = try attributes(folder)
        return OpenDirectory(handle: 0)
    }

    func readdir(_ request: Request, inode: UInt64, handle: UInt64, offset: Int64, listing: inout DirectoryListing)
        throws(Errno)
    {
        let folder = try node(inode)
        var entries: [(String, UInt64, mode_t)] = [(".", self.inode(folder), S_IFDIR), ("..", Self.rootInode, S_IFDIR)]
        if let listed = try folderListing(folder) {
            entries += listed
        } else {
            for (name, node) in try children(folder) {
                switch node {
                case .temporary:
                    entries.append((name, self.inode(node), S_IFREG))
                case .documentFile(let id, _):
                    let isFolder = portal.table.documents[id]?.isDirectory ?? false
                    entries.append((name, self.inode(node), isFolder ? S_IFDIR : S_IFREG))
                default:
                    entries.append((name, self.inode(node), S_IFDIR))
                }
            }
        }
        for (index, entry) in entries.enumerated().dropFirst(Int(offset)) {
            var attributes = stat()
            attributes.st_ino = __ino_t(entry.1)
            attributes.st_mode = entry.2
            // readdirplus entries go without attributes (no lookup count
            // to return): the kernel looks each name up when it is used.
            let added = entry.0.withHostCString { name in
                listing.isPlus
                    ? listing.addPlus(name: name, entry: nil, fallback: attributes, nextOffset: Int64(index + 1))
                    : listing.add(name: name, attributes: attributes, nextOffset: Int64(index + 1))
            }
            if !added { break }
        }
    }

    func releasedir(inode: UInt64, handle: UInt64) {}

    /// The file system of the documents' files: what `df` and a file
    /// manager's free-space check ask (xdg-desktop-portal#553).
    func statfs(_ request: Request, inode: UInt64) throws(Errno) -> statvfs {
        var result = statvfs()
        var path = "/"
        if case .documentFile(let id, _) = try node(inode), let document = portal.table.documents[id] {
            path = document.hostPath
        }
        guard path.withHostCString({ statvfsOf($0, &result) }) == 0 else { throw Errno(rawValue: errno) }
        return result
    }

    func getxattr(_ request: Request, inode: UInt64, name: String, size: Int) throws(Errno) -> [UInt8] {
        guard name == Self.hostPathAttribute else { throw Errno(rawValue: ENODATA) }
        // The document's file and what is below a folder document have a
        // host path; the DOC_ID folder, the layout's own, has none.
        let node = try node(inode)
        if let (document, app, path) = try folderPlace(node), !path.isEmpty {
            _ = try self.document(document.id, app: app)
            return RelativePath.join(document.hostPath, path).hostBytes
        }
        guard case .documentFile(let id, let app) = node else { throw Errno(rawValue: ENODATA) }
        return try document(id, app: app).0.hostPath.hostBytes
    }

    func listxattr(_ request: Request, inode: UInt64) throws(Errno) -> [UInt8] {
        switch try node(inode) {
        case .documentFile, .inside: return Array(Self.hostPathAttribute.utf8) + [0]
        default: return []
        }
    }

    /// A document's size and times may change as its content does
    /// (`truncate`, `touch`, an editor's save); its mode and owner are the
    /// grant's, never set here (EPERM).
    func setattr(_ request: Request, inode: UInt64, changes: AttributeChanges, handle: UInt64?)
        throws(Errno) -> Attributes
    {
        let file = try node(inode)
        try checkCaller(request, reaching: file)
        if case .temporary(let number) = file {
            return try setTemporaryAttributes(number, changes: changes, handle: handle, node: file)
        }
        if case .inside = file { return try setFolderItemAttributes(file, changes: changes, handle: handle) }
        guard case .documentFile(let id, let app) = file else { throw Errno.notPermitted }
        guard changes.uid == nil, changes.gid == nil else { throw Errno.notPermitted }
        // An editor sets the mode it read back after a save: that no-op
        // stands; any other change of the grant's mode bits does not.
        if let mode = changes.mode, mode & 0o7777 != (try attributes(file)).st_mode & 0o7777 {
            throw Errno.notPermitted
        }
        // Through a descriptor (`ftruncate`, `futimens`): its checks, as a
        // write's (EPERM once revoked); by name: the grant as it is now.
        let descriptor: Int32
        var opened: Int32? = nil
        defer { if let opened { close(opened) } }
        if let handle, handles.withLock({ $0.open[handle] }) != nil {
            descriptor = try checkedDescriptor(handle, writing: true)
        } else {
            let (document, access) = try document(id, app: app)
            if access == .read { throw Errno.permissionDenied }
            descriptor = document.hostPath.withHostCString { Glibc.open($0, O_WRONLY | O_CLOEXEC | O_NOFOLLOW) }
            guard descriptor >= 0 else { throw Errno(rawValue: errno) }
            opened = descriptor
        }
        if let size = changes.size, ftruncate(descriptor, off_t(size)) != 0 { throw Errno(rawValue: errno) }
        if changes.accessTime != nil || changes.modificationTime != nil {
            guard futimens(descriptor, changes.utimensTimes) == 0 else { throw Errno(rawValue: errno) }
        }
        return Attributes(stat: try attributes(file), timeout: Self.timeout)
    }

    // Everything that would change the layout's names and folders: read only.
    func readlink(_ request: Request, inode: UInt64) throws(Errno) -> String {
        let link = try node(inode)
        try checkCaller(request, reaching: link)
        guard case .inside = link else { throw Errno.invalidArgument }
        return try folderLinkTarget(link)
    }
    func writeTarget(_ request: Request, inode: UInt64, handle: UInt64) throws(Errno) -> Int32 {
        try checkedDescriptor(handle, writing: true)
    }
    func fsync(_ request: Request, inode: UInt64, handle: UInt64, dataOnly: Bool) throws(Errno) {
        guard let open = handles.withLock({ $0.open[handle] }), open.writable else { return }
        guard (dataOnly ? fdatasync(open.descriptor) : Glibc.fsync(open.descriptor)) == 0 else {
            throw Errno(rawValue: errno)
        }
    }
    func fallocate(_ request: Request, inode: UInt64, handle: UInt64, mode: Int32, offset: Int64, length: Int64)
        throws(Errno)
    {
        let descriptor = try checkedDescriptor(handle, writing: true)
        guard CSystemShims.fallocate(descriptor, mode, off_t(offset), off_t(length)) == 0 else {
            throw Errno(rawValue: errno)
        }
    }
    /// EXDEV: `cp` and the kernel copy through read and write, each checked.
    func copyFileRange(
        _ request: Request, from: (inode: UInt64, handle: UInt64, offset: Int64),
        to: (inode: UInt64, handle: UInt64, offset: Int64), length: Int, flags: Int32
    ) throws(Errno) -> Int { throw Errno.improperLink }
    func fsyncdir(_ request: Request, inode: UInt64, handle: UInt64, dataOnly: Bool) throws(Errno) {}
    func setxattr(_ request: Request, inode: UInt64, name: String, value: UnsafeRawBufferPointer, flags: Int32)
        throws(Errno)
    { throw Errno.notPermitted }
    func removexattr(_ request: Request, inode: UInt64, name: String) throws(Errno) { throw Errno.notPermitted }
}

/// statvfs(3): inside `DocumentLayout.statfs`, whose result is a `statvfs`
/// value, the name means the type.
private func statvfsOf(_ path: UnsafePointer<CChar>, _ result: inout statvfs) -> Int32 {
    statvfs(path, &result)
}
