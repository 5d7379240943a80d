import FuseBridge
import Glibc
import Policy
import SystemPackage

/// Changes to folders: mknod, mkdir, symlink, link, unlink, rmdir, rename
/// (SPEC S9, S32, S35). Each is a write on the folder(s) it changes.
extension ScopeFileSystem {
    public func mknod(_ request: Request, parent: UInt64, name: String, mode: mode_t, device: dev_t) throws(Errno)
        -> Entry
    {
        // A regular file made by mknod is a file like any other; a device
        // or a FIFO is what an extension's store cannot hold.
        try make(request, parent, name, .mknod, unstorable: mode & S_IFMT != S_IFREG) {
            directory, folder throws(Errno) in
            try Sys.mknodAt(directory, name, Self.modeAllowed(mode, in: folder.place, isDirectory: false), device)
        }
    }

    public func mkdir(_ request: Request, parent: UInt64, name: String, mode: mode_t) throws(Errno) -> Entry {
        try make(request, parent, name, .mkdir) { directory, _ throws(Errno) in try Sys.mkdirAt(directory, name, mode) }
    }

    public func symlink(_ request: Request, target: String, parent: UInt64, name: String) throws(Errno) -> Entry {
        try make(request, parent, name, .symlink, unstorable: true) { directory, _ throws(Errno) in
            try Sys.symlinkAt(target, directory, name)
        }
    }

    /// Creates `name` in a writable folder with `body`, hands it to the caller
    /// and looks it up.
    /// `unstorable`: an extension's provider may refuse it (`refuseUnstorable`).
    private func make(
        _ request: Request, _ parent: UInt64, _ name: String, _ operation: FileOperation, unstorable: Bool = false,
        _ body: (_ directory: Int32, _ folder: Node) throws(Errno) -> Void
    ) throws(Errno) -> Entry {
        let caller = callers.caller(of: request)
        let folder = try gate(parent, .write, caller, operation)
        if unstorable { try refuseUnstorable(operation, in: folder.node) }
        let lease = try backedDirectory(folder)
        defer { withExtendedLifetime(lease) {} }
        try announcing(caller, folder, appearing(name, in: folder)) { () throws(Errno) in
            try body(lease.number, folder.node)
        }
        try giveToCaller(lease.number, name, request, folder: folder.node)
        let (node, info) = try backedChild(of: folder.node, named: name)
        if let (content, file) = content(of: node) { content.created(file, open: false) }
        return entry(node, info, in: folder.node)
    }

    public func link(_ request: Request, inode: UInt64, newParent: UInt64, newName: String) throws(Errno) -> Entry {
        let caller = callers.caller(of: request)
        let source = try gate(inode, .write, caller, .link)
        let folder = try gate(newParent, .write, caller, .link)
        try requireSameGrant(source, folder)
        try refuseUnstorable(.link, in: folder.node)
        guard let sourceDirectory = try parentDescriptor(of: source.resolved) else { throw .notPermitted }
        let directory = try backedDirectory(folder)
        defer { withExtendedLifetime((sourceDirectory, directory)) {} }
        try announcing(caller, folder, appearing(newName, in: folder)) { () throws(Errno) in
            try Sys.linkAt(sourceDirectory.number, source.resolved.name, directory.number, newName)
        }
        let (node, info) = try backedChild(of: folder.node, named: newName)
        return entry(node, info, in: folder.node)
    }

    public func unlink(_ request: Request, parent: UInt64, name: String) throws(Errno) {
        try remove(request, parent, name, flags: 0, .unlink)
    }

    public func rmdir(_ request: Request, parent: UInt64, name: String) throws(Errno) {
        try remove(request, parent, name, flags: Sys.removeDirectory, .rmdir)
    }

    private func remove(
        _ request: Request, _ parent: UInt64, _ name: String, flags: Int32, _ operation: FileOperation
    ) throws(Errno) {
        let caller = callers.caller(of: request)
        if operation == .unlink, try removeTemporary(caller, parent: parent, name: name) { return }
        let folder = try gate(parent, .write, caller, operation)
        try requireVisible(name, in: folder)
        let directory = try backedDirectory(folder)
        defer { withExtendedLifetime(directory) {} }
        try announcing(caller, folder, deleting(name, in: folder)) { () throws(Errno) in
            try Sys.unlinkAt(directory.number, name, flags)
        }
        table.removed(parent: parent, name: name)
    }

    public func rename(
        _ request: Request, parent: UInt64, name: String, newParent: UInt64, newName: String, flags: UInt32
    ) throws(Errno) {
        let caller = callers.caller(of: request)
        if try renameTemporary(
            request, caller, parent: parent, name: name, newParent: newParent, newName: newName, flags: flags)
        {
            return
        }
        let from = try gate(parent, .write, caller, .rename)
        let to = parent == newParent ? from : try gate(newParent, .write, caller, .rename)
        try requireSameGrant(from, to)
        try requireVisible(name, in: from)
        try refuseUnstorable(.rename, in: from.node)
        let fromLease = try backedDirectory(from)
        let toLease = try backedDirectory(to)
        defer { withExtendedLifetime((fromLease, toLease)) {} }
        let (fromDirectory, toDirectory) = (fromLease.number, toLease.number)
        let moves = moving(name, in: from, to: newName, in: to, exchange: flags & Sys.renameExchange != 0)
        // A file renamed over another may be an atomic save (S48): the
        // replaced file's item is to follow the new one.
        let replacedFile = flags & Sys.renameExchange == 0 ? try? Sys.statAt(toDirectory, newName) : nil
        try announcing(caller, to, moves) { () throws(Errno) in
            try Sys.renameAt(fromDirectory, name, toDirectory, newName, flags)
        }
        // The table learns what moved from the host's answer: which file
        // is now at each name (one fstatat; two for an exchange, or for a
        // hard-linked file).
        let source = NodeTable.EntryName(parent: parent, name: name)
        let target = NodeTable.EntryName(parent: to.node.inode, name: newName)
        let atTarget = try? Sys.statAt(toDirectory, newName)
        let nowAtTarget = atTarget.map(FileIdentity.init)
        if flags & Sys.renameExchange != 0 {
            let nowAtSource = try? FileIdentity(Sys.statAt(fromDirectory, name))
            table.exchanged(source, target, view: to.node.view, nowAtA: nowAtSource, nowAtB: nowAtTarget)
        } else if let atTarget, !atTarget.isDirectory, atTarget.st_nlink > 1,
            let atSource = try? Sys.statAt(fromDirectory, name), FileIdentity(atSource) == nowAtTarget
        {
            // Between two names of one file rename(2) does nothing: both stay.
        } else {
            table.renamed(from: source, to: target, view: to.node.view, moved: nowAtTarget)
        }
        if case .provider(_, let provider) = to.node.place {
            if let replacedFile, replacedFile.isRegular, let atTarget, atTarget.isRegular,
                FileIdentity(replacedFile) != nowAtTarget, let folder = try? to.path
            {
                itemSaved(by: caller.app, provider: provider, path: RelativePath.join(folder, newName))
            } else {
                documents.itemsMayHaveMoved()
            }
        }
    }

    /// Renames and links stay inside one grant of one provider, or inside
    /// one container; anything else is EXDEV (SPEC S32).
    private func requireSameGrant(_ a: Target, _ b: Target) throws(Errno) {
        guard a.node.place == b.node.place, a.grant?.id == b.grant?.id else { throw .improperLink }
    }
}
