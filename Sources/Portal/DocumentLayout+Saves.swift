import Foundation
import FuseBridge
import Glibc
import HostText
import Policy
import Processes
import SystemPackage

/// Atomic saves in a document's folder (SPEC S48): an app that may write
/// a document may create a temporary file beside it in `DOC_ID/`, write
/// it, rename it over the document (or to another temporary name), and
/// remove it; it may also move the document's file to a temporary name
/// and make the document's name again (vim's `backupcopy=no`). Nothing
/// else changes names: the root, `by-app` and the app folders are read
/// only (EROFS), and a document folder takes no folders, links or
/// symbolic links, and never loses its document to an unlink (EPERM).
extension DocumentLayout {
    /// Whether the view (an app's, or the owner's when nil) may save the
    /// document by replacing it: for an app, the one access rule on its
    /// grant (`DocumentGrants.mayReplace`); for the owner, the host
    /// folder's permissions, which the host checks again at each call.
    func mayReplace(_ document: PortalDocument, app: AppID?) -> Bool {
        guard let app else { return Self.hostFolder(of: document).withHostCString { Glibc.access($0, W_OK) } == 0 }
        let grant = (try? portal.grants.grant(Self.itemKey(document), app: app)) ?? document.pendingGrant(for: app)
        return DocumentGrants.mayReplace(grant, app: app)
    }

    static func hostFolder(of document: PortalDocument) -> String {
        let folder = (document.hostPath as NSString).deletingLastPathComponent
        return folder.isEmpty ? "/" : folder
    }

    static func hostPath(of temporary: DocumentTemporaries.Temporary, in document: PortalDocument) -> String {
        let folder = hostFolder(of: document)
        return (folder == "/" ? "" : folder) + "/" + temporary.hostName
    }

    /// The document folder `parent` names, once the caller may reach it
    /// and save its document there.
    private func savingFolder(_ request: Request, _ parent: UInt64) throws(Errno) -> (PortalDocument, AppID?) {
        let folder = try node(parent)
        guard case .documentFolder(let id, let app) = folder else { throw Errno.notPermitted }
        try checkCaller(request, reaching: folder)
        let (document, _) = try document(id, app: app)
        if document.isDirectory { throw Errno.notPermitted }
        guard mayReplace(document, app: app) else { throw Errno.permissionDenied }
        return (document, app)
    }

    private static func validName(_ name: String) throws(Errno) {
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/") else { throw Errno.invalidArgument }
    }

    // MARK: Creating

    func create(_ request: Request, parent: UInt64, name: String, mode: mode_t, flags: Int32)
        throws(Errno) -> (Entry, OpenFile)
    {
        if let folder = try writableFolder(request, parent) {
            defer { close(folder.descriptor) }
            return try createInFolder(folder, name: name, mode: mode, flags: flags, umask: request.umask)
        }
        let (document, app) = try savingFolder(request, parent)
        try Self.validName(name)
        let accessMode = flags & O_ACCMODE == O_RDONLY ? O_RDWR : flags & O_ACCMODE
        let hostFlags = O_CREAT | accessMode | (flags & (O_EXCL | O_TRUNC | O_APPEND)) | O_CLOEXEC | O_NOFOLLOW
        let permissions = mode & 0o7777 & ~request.umask
        let node: Node
        let opened: OpenDocument
        if name.sameHostName(as: document.name) {
            // The document's own name, while its file is away: made again.
            let descriptor = document.hostPath.withHostCString { Glibc.open($0, hostFlags, permissions) }
            guard descriptor >= 0 else { throw Errno(rawValue: errno) }
            portal.grants.itemReplaced(document)
            portal.fileAppeared(document)
            node = .documentFile(document.id, app: app)
            opened = OpenDocument(descriptor: descriptor, app: app, documentID: document.id, writable: true)
        } else if let number = temporaries.number(document: document.id, app: app, name: name),
            let temporary = temporaries.temporary(number)
        {
            let descriptor = Self.hostPath(of: temporary, in: document).withHostCString {
                Glibc.open($0, hostFlags, permissions)
            }
            guard descriptor >= 0 else { throw Errno(rawValue: errno) }
            temporaries.touched(number, by: ProcFS.processKey(ofThread: request.threadID))
            node = .temporary(number)
            opened = OpenDocument(
                descriptor: descriptor, app: app, documentID: document.id, writable: true, temporary: number)
        } else {
            let (number, descriptor) = try makeTemporary(
                named: name, of: document, app: app, flags: hostFlags | O_EXCL, permissions: permissions)
            temporaries.touched(number, by: ProcFS.processKey(ofThread: request.threadID))
            node = .temporary(number)
            opened = OpenDocument(
                descriptor: descriptor, app: app, documentID: document.id, writable: true, temporary: number)
        }
        let handle = register(opened)
        do {
            return (try entry(node), OpenFile(handle: handle, directIO: app != nil))
        } catch {
            release(inode: 0, handle: handle)
            throw error
        }
    }

    /// A new temporary `name` of the view, its host file made under a
    /// hidden name of its own; its number and the open descriptor.
    private func makeTemporary(
        named name: String, of document: PortalDocument, app: AppID?, flags: Int32, permissions: mode_t
    ) throws(Errno) -> (UInt64, Int32) {
        let temporary = DocumentTemporaries.Temporary(
            documentID: document.id, app: app, name: name, hostName: DocumentTemporaries.hostName(for: document.name))
        let path = Self.hostPath(of: temporary, in: document)
        let descriptor = path.withHostCString { Glibc.open($0, flags, permissions) }
        guard descriptor >= 0 else { throw Errno(rawValue: errno) }
        guard let number = temporaries.add(temporary) else {
            close(descriptor)
            _ = path.withHostCString { Glibc.unlink($0) }
            throw Errno(rawValue: ENOSPC)
        }
        return (number, descriptor)
    }

    /// mknod of a regular file is a create (FUSE sends it for `mkfifo`
    /// and for some `open(O_CREAT)` paths); anything else is refused.
    func mknod(_ request: Request, parent: UInt64, name: String, mode: mode_t, device: dev_t) throws(Errno) -> Entry {
        guard mode & S_IFMT == S_IFREG else { try refuseBesideDocument(request, parent) }
        let (entry, file) = try create(request, parent: parent, name: name, mode: mode, flags: O_WRONLY | O_EXCL)
        release(inode: entry.inode, handle: file.handle)
        return entry
    }

    /// Folders, links and symbolic links: never beside a document (EPERM,
    /// once the caller may save there at all); the layout's own names
    /// take no change either (EPERM, as the reference portal answers).
    private func refuseBesideDocument(_ request: Request, _ parent: UInt64) throws(Errno) -> Never {
        guard case .documentFolder = try node(parent) else { throw Errno.notPermitted }
        _ = try savingFolder(request, parent)
        throw Errno.notPermitted
    }

    func mkdir(_ request: Request, parent: UInt64, name: String, mode: mode_t) throws(Errno) -> Entry {
        if let folder = try writableFolder(request, parent) {
            defer { close(folder.descriptor) }
            return try makeFolder(folder, name: name, mode: mode, umask: request.umask)
        }
        try refuseBesideDocument(request, parent)
    }

    func rmdir(_ request: Request, parent: UInt64, name: String) throws(Errno) {
        if let folder = try writableFolder(request, parent) {
            defer { close(folder.descriptor) }
            return try removeInFolder(folder, name: name, directory: true)
        }
        // A document's folder holds a file or a folder document: the
        // latter is never removed here (EPERM), the former is no folder.
        if case .documentFolder(let id, let app) = try node(parent) {
            let (document, _) = try document(id, app: app)
            if document.isDirectory && name.sameHostName(as: document.name) { throw Errno.notPermitted }
            throw Errno.notDirectory
        }
        throw Errno.notPermitted
    }

    func symlink(_ request: Request, target: String, parent: UInt64, name: String) throws(Errno) -> Entry {
        if let folder = try writableFolder(request, parent) {
            defer { close(folder.descriptor) }
            return try makeLink(in: folder, name: name, target: target)
        }
        try refuseBesideDocument(request, parent)
    }

    func link(_ request: Request, inode: UInt64, newParent: UInt64, newName: String) throws(Errno) -> Entry {
        if let folder = try writableFolder(request, newParent) {
            defer { close(folder.descriptor) }
            return try makeHardLink(of: try node(inode), in: folder, name: newName)
        }
        try refuseBesideDocument(request, newParent)
    }

    // MARK: Renaming and removing

    func rename(_ request: Request, parent: UInt64, name: String, newParent: UInt64, newName: String, flags: UInt32)
        throws(Errno)
    {
        if try renameInFolder(
            request, parent: parent, name: name, newParent: newParent, newName: newName, flags: flags)
        {
            return
        }
        // Names move inside one document folder of one view only: out of
        // one, EXDEV; the layout's own names never move (EPERM).
        if parent != newParent {
            for folder in [parent, newParent] {
                if case .documentFolder = try node(folder) { throw Errno.improperLink }
            }
            throw Errno.notPermitted
        }
        let (document, app) = try savingFolder(request, parent)
        try Self.validName(newName)
        guard flags & ~Self.renameNoReplace == 0 else { throw Errno.invalidArgument }
        let source = try savedName(name, of: document, app: app)
        let target = try? savedName(newName, of: document, app: app)
        if flags & Self.renameNoReplace != 0, target != nil { throw Errno.fileExists }
        /// The save: the new file takes the document's name, item and grants.
        func save(_ number: UInt64, _ path: String) throws(Errno) {
            try hostRename(path, document.hostPath)
            temporaries.becameDocument(number)
            portal.grants.itemReplaced(document)
            portal.fileAppeared(document)
        }
        switch (source, target) {
        case (.document, .document?):
            return
        case (.temporary(let number, let path), .document?):
            try save(number, path)
        case (.temporary(let number, let path), nil) where newName.sameHostName(as: document.name):
            try save(number, path)
        case (.temporary(let number, let path), .temporary(let replaced, let replacedPath)?):
            try hostRename(path, replacedPath)
            _ = temporaries.remove(replaced)
            temporaries.rename(number, to: newName)
            temporaries.touched(number, by: ProcFS.processKey(ofThread: request.threadID))
        case (.temporary(let number, _), nil):
            temporaries.rename(number, to: newName)
            temporaries.touched(number, by: ProcFS.processKey(ofThread: request.threadID))
        case (.document, .temporary(let replaced, let replacedPath)?):
            // The document's file becomes the temporary (a backup).
            try hostRename(document.hostPath, replacedPath)
            temporaries.rename(replaced, to: newName)
            temporaries.holdsDocument(replaced)
            temporaries.touched(replaced, by: ProcFS.processKey(ofThread: request.threadID))
        case (.document, nil):
            let (number, descriptor) = try makeTemporary(
                named: newName, of: document, app: app, flags: O_CREAT | O_EXCL | O_RDONLY | O_CLOEXEC,
                permissions: 0o600)
            close(descriptor)
            temporaries.touched(number, by: ProcFS.processKey(ofThread: request.threadID))
            guard let temporary = temporaries.temporary(number) else { throw Errno.ioError }
            do {
                try hostRename(document.hostPath, Self.hostPath(of: temporary, in: document))
                temporaries.holdsDocument(number)
            } catch {
                _ = temporaries.remove(number)
                _ = Self.hostPath(of: temporary, in: document).withHostCString { Glibc.unlink($0) }
                throw error
            }
        }
    }

    func unlink(_ request: Request, parent: UInt64, name: String) throws(Errno) {
        if let folder = try writableFolder(request, parent) {
            defer { close(folder.descriptor) }
            return try removeInFolder(folder, name: name, directory: false)
        }
        let (document, app) = try savingFolder(request, parent)
        switch try savedName(name, of: document, app: app) {
        case .document:
            // An app's save never removes the document itself; the owner,
            // who may remove the file on the host, may here too.
            guard app == nil else { throw Errno.notPermitted }
            guard document.hostPath.withHostCString({ Glibc.unlink($0) }) == 0 else { throw Errno(rawValue: errno) }
        case .temporary(let number, let path):
            guard path.withHostCString({ Glibc.unlink($0) }) == 0 || errno == ENOENT else {
                throw Errno(rawValue: errno)
            }
            _ = temporaries.remove(number)
        }
    }

    /// What a name of a document folder is for the view: the document's
    /// file (while it is there) or one of its temporaries.
    private enum SavedName {
        case document
        case temporary(UInt64, hostPath: String)
    }

    private func savedName(_ name: String, of document: PortalDocument, app: AppID?) throws(Errno) -> SavedName {
        if name.sameHostName(as: document.name) {
            var status = stat()
            guard document.hostPath.withHostCString({ lstat($0, &status) }) == 0 else {
                throw Errno.noSuchFileOrDirectory
            }
            return .document
        }
        guard let number = temporaries.number(document: document.id, app: app, name: name),
            let temporary = temporaries.temporary(number)
        else { throw Errno.noSuchFileOrDirectory }
        return .temporary(number, hostPath: Self.hostPath(of: temporary, in: document))
    }

    /// rename(2)'s RENAME_NOREPLACE (linux/fs.h), which Glibc does not export to Swift.
    static let renameNoReplace: UInt32 = 1

    private func hostRename(_ from: String, _ to: String) throws(Errno) {
        let result = from.withHostCString { source in to.withHostCString { Glibc.rename(source, $0) } }
        guard result == 0 else { throw Errno(rawValue: errno) }
    }

    // MARK: A temporary's attributes

    /// `truncate`, `touch` and `chmod` of a temporary, through its
    /// descriptor's checks or by name as the grant is now.
    func setTemporaryAttributes(_ number: UInt64, changes: AttributeChanges, handle: UInt64?, node: Node)
        throws(Errno) -> Attributes
    {
        guard let temporary = temporaries.temporary(number) else { throw Errno.noSuchFileOrDirectory }
        // A save gives its temporary the document's owner and group (GLib
        // does, and falls back to writing in place when that fails); the
        // layout shows both as they already are, so only that is a no-op.
        let shown = try attributes(node)
        guard changes.uid.map({ $0 == shown.st_uid }) ?? true, changes.gid.map({ $0 == shown.st_gid }) ?? true else {
            throw Errno.notPermitted
        }
        let (document, _) = try document(temporary.documentID, app: temporary.app)
        let descriptor: Int32
        var opened: Int32? = nil
        defer { if let opened { close(opened) } }
        if let handle, handles.withLock({ $0.open[handle] }) != nil {
            descriptor = try checkedDescriptor(handle, writing: true)
        } else {
            guard mayReplace(document, app: temporary.app) else { throw Errno.notPermitted }
            descriptor = Self.hostPath(of: temporary, in: document).withHostCString {
                Glibc.open($0, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
            }
            guard descriptor >= 0 else { throw Errno(rawValue: errno) }
            opened = descriptor
        }
        // A save copies the document's mode to its temporary (g_file_set_contents, QSaveFile).
        if let mode = changes.mode, fchmod(descriptor, mode & 0o777) != 0 { throw Errno(rawValue: errno) }
        if let size = changes.size, ftruncate(descriptor, off_t(size)) != 0 { throw Errno(rawValue: errno) }
        if changes.accessTime != nil || changes.modificationTime != nil {
            guard futimens(descriptor, changes.utimensTimes) == 0 else { throw Errno(rawValue: errno) }
        }
        return Attributes(stat: try attributes(node), timeout: Self.cacheTimeout(node))
    }
}
