import FuseBridge
import Glibc
import Policy
import SystemPackage

/// Open files: open, create, read, write and friends (SPEC S9, S14, S35, S37).
extension ScopeFileSystem {
    public func open(_ request: Request, inode: UInt64, flags: Int32) throws(Errno) -> OpenFile {
        let writes = BackingStore.opensForWriting(flags)
        let caller = callers.caller(of: request)
        let target = try gate(inode, writes ? .write : .read, caller, .open)
        guard let parentLease = try parentDescriptor(of: target.resolved) else { throw .isDirectory }
        defer { withExtendedLifetime(parentLease) {} }
        let parent = parentLease.number
        // A placeholder's content comes first for a writer (S42, S43).
        if let (content, file) = content(of: target.node) {
            try content.prepareOpen(
                file, writes: writes, truncates: flags & O_TRUNC != 0, interruption: Interruption(request))
            if writes && flags & O_TRUNC != 0 { try content.willWrite(file, edition: nil) }
        }
        let truncation = writes && flags & O_TRUNC != 0 ? content(of: target.node) : nil
        defer { if let (content, file) = truncation { content.didWrite(file) } }
        // A name that now names no file, or another one, was changed on the
        // host within the entry timeout. ESTALE (not ENOENT) makes the kernel
        // look the name up again and retry the open, so open(O_CREAT) right
        // after a host-side delete creates the file instead of failing.
        let descriptor: Int32
        // A write through the mount is noted before it is made: the host
        // channel's echo of it may be read before the open returns.
        let charge = try chargeDescriptor(caller, target.resolved, .open)
        if writes && flags & O_TRUNC != 0 {
            target.node.noteMountWrite()
            keepUnsynced(truncating: target.resolved, caller, parent: parent)
        }
        do {
            descriptor = try BackingStore.openEntry(parent, target.resolved.name, flags: flags)
        } catch .noSuchFileOrDirectory {
            throw .staleNFSFileHandle
        }
        let info: stat
        do {
            info = try Sys.stat(descriptor)
        } catch {
            Sys.close(descriptor)
            throw error
        }
        guard FileIdentity(info) == target.node.identity else {
            Sys.close(descriptor)
            throw .staleNFSFileHandle
        }
        do { try clearSetIDBits(descriptor, for: request, known: info) } catch {  // an O_TRUNC open
            Sys.close(descriptor)
            throw error
        }
        let handle = OpenHandle(
            descriptor: descriptor, node: target.node, grant: target.grant?.id,
            access: BackingStore.descriptorAccess(flags), user: FileUser(caller),
            charge: charge, edition: content(of: target.node).map { content, file in content.edition(file) })
        if writes && flags & O_TRUNC != 0 { handle.wrote.store(true, ordering: .relaxed) }
        // Cached pages stay when the file is as it was at the last open;
        // while a fault rule acts on reads, none are kept, so that every
        // read meets the rule, a repeated one too (issue 48).
        let version = FileVersion(info)
        let cached = table.opened(inode, handle, version: version) == version
        return OpenFile(
            handle: handle.retainedHandle(), keepCache: cached && !faults.actsOnReads, directIO: faults.actsOnReads,
            passthrough: passthroughOffer(target.node, info, descriptor: descriptor))
    }

    public func create(_ request: Request, parent: UInt64, name: String, mode: mode_t, flags: Int32)
        throws(Errno) -> (Entry, OpenFile)
    {
        let caller = callers.caller(of: request)
        // Beside a single-file grant, a temporary of a save (S48): made at
        // a hidden host name of its own, with O_EXCL, so it never opens a
        // file the host has there.
        let replacement = try replacementFolder(parent, name, caller, .create)
        let folder: Target
        if let replacement { folder = replacement.folder } else { folder = try gate(parent, .write, caller, .create) }
        let hostName = replacement?.hostName ?? name
        let lease = try backedDirectory(folder)
        defer { withExtendedLifetime(lease) {} }
        let directory = lease.number
        let charge = try chargeDescriptor(caller, folder.resolved, .create)
        let allowed = Self.modeAllowed(mode, in: folder.node.place, isDirectory: false)
        let descriptor: Int32
        do throws(Errno) {
            descriptor = try announcing(caller, folder, appearing(name, in: folder)) { () throws(Errno) in
                replacement == nil
                    ? try BackingStore.createEntry(directory, name, flags: flags, mode: allowed)
                    : try BackingStore.createNewEntry(directory, hostName, flags: flags, mode: allowed)
            }
        } catch {
            if replacement != nil { forgetTemporary(name, in: folder) }
            throw error
        }
        do {
            try clearSetIDBits(descriptor, for: request)
            try giveToCaller(directory, hostName, request, folder: folder.node)
            let (node, info) = try backedChild(of: folder.node, named: hostName, known: Sys.stat(descriptor))
            if let (content, file) = content(of: node) { content.created(file, open: true) }
            let handle = OpenHandle(
                descriptor: descriptor, node: node, grant: folder.grant?.id,
                access: BackingStore.descriptorAccess(flags), user: FileUser(caller), charge: charge,
                // Its writes are ESTALE once the remote replaced the file it
                // made (uploaded meanwhile), as an opened one's are (S49).
                edition: content(of: node).map { content, file in content.edition(file) })
            _ = table.opened(node.inode, handle, version: FileVersion(info))
            let passthrough = passthroughOffer(node, info, descriptor: descriptor)
            return (
                entry(node, info, in: folder.node),
                OpenFile(handle: handle.retainedHandle(), directIO: faults.actsOnReads, passthrough: passthrough)
            )
        } catch {
            Sys.close(descriptor)
            throw error
        }
    }

    public func read(_ request: Request, inode: UInt64, handle: UInt64, offset: Int64, size: Int) throws(Errno)
        -> ReadData
    {
        let open = OpenHandle.from(handle)
        try checkUser(open, request, .read)
        try checkStillGranted(open, .read, request)
        if let (content, file) = content(of: open.node) {
            do {
                try content.prepareRead(
                    file, offset: offset, length: size, edition: open.edition, interruption: Interruption(request))
            } catch {
                // A revoke cancels the app's downloads (S42): it gets the
                // revoke's EPERM, not the cancelled download's EINTR.
                try checkStillGranted(open, .read, request)
                throw error
            }
        }
        return .descriptor(open.descriptor, offset: offset, size: size)
    }

    public func writeTarget(_ request: Request, inode: UInt64, handle: UInt64) throws(Errno) -> Int32 {
        let open = OpenHandle.from(handle)
        try checkUser(open, request, .write)
        try checkStillGranted(open, .write, request)
        try clearSetIDBits(open.descriptor, for: request)
        // Every write, not a handle's first: an upload after an fsync must
        // not take later writes for uploaded (issue 47). `writeFinished`
        // ends it. A descriptor opened before a remote edit writes nothing
        // into the new version (ESTALE, S49).
        if let (content, file) = content(of: open.node) { try content.willWrite(file, edition: open.edition) }
        open.wrote.store(true, ordering: .relaxed)
        open.node.noteMountWrite()
        keepUnsynced(open)
        return open.descriptor
    }

    public func writeFinished(inode: UInt64, handle: UInt64) {
        let open = OpenHandle.from(handle)
        if let (content, file) = content(of: open.node) { content.didWrite(file) }
    }

    public func release(inode: UInt64, handle: UInt64) {
        let open = OpenHandle.from(handle)
        let wrote = open.wrote.load(ordering: .relaxed)
        if wrote {
            open.node.noteMountWrite()
            contentWritten(open.node, inode: inode, by: open.user)
        }
        if let (content, file) = content(of: open.node) { content.closed(file, wrote: wrote) }
        // Our own writes went through the page cache: it is still good.
        let written = open.writable ? (try? Sys.stat(open.descriptor)).map(FileVersion.init) : nil
        table.closed(inode, open, version: written)
        OpenHandle.release(handle)
    }

    public func fsync(_ request: Request, inode: UInt64, handle: UInt64, dataOnly: Bool) throws(Errno) {
        let open = OpenHandle.from(handle)
        try checkUser(open, request, .fsync)
        try checkStillGranted(open, .fsync, request)
        try Sys.fsync(open.descriptor, dataOnly: dataOnly)
        unsynced.synced(inode: open.node.inode)
        if open.writable, let (content, file) = content(of: open.node) { content.synced(file) }
    }

    public func fallocate(_ request: Request, inode: UInt64, handle: UInt64, mode: Int32, offset: Int64, length: Int64)
        throws(Errno)
    {
        let open = OpenHandle.from(handle)
        try checkUser(open, request, .fallocate)
        try checkStillGranted(open, .fallocate, request)
        guard open.writable else { throw .badFileDescriptor }
        let content = content(of: open.node)
        if let (content, file) = content { try content.willWrite(file, edition: open.edition) }
        defer { if let (content, file) = content { content.didWrite(file) } }
        open.wrote.store(true, ordering: .relaxed)
        keepUnsynced(open)
        try Sys.fallocate(open.descriptor, mode, offset, length)
    }

    public func copyFileRange(
        _ request: Request, from: (inode: UInt64, handle: UInt64, offset: Int64),
        to: (inode: UInt64, handle: UInt64, offset: Int64), length: Int, flags: Int32
    ) throws(Errno) -> Int {
        let source = OpenHandle.from(from.handle)
        let destination = OpenHandle.from(to.handle)
        try checkUser(source, request, .copyFileRange)
        try checkUser(destination, request, .copyFileRange)
        try checkStillGranted(source, .copyFileRange, request)
        try checkStillGranted(destination, .copyFileRange, request)
        if let (content, file) = content(of: source.node) {
            try content.prepareRead(
                file, offset: from.offset, length: length, edition: source.edition,
                interruption: Interruption(request))
        }
        let content = content(of: destination.node)
        if let (content, file) = content { try content.willWrite(file, edition: destination.edition) }
        defer { if let (content, file) = content { content.didWrite(file) } }
        destination.wrote.store(true, ordering: .relaxed)
        keepUnsynced(destination)
        return try Sys.copyFileRange(source.descriptor, from.offset, destination.descriptor, to.offset, length)
    }

    // MARK: Helpers

    /// An app changed a provider item's content through the mount: other
    /// apps' presenters hear it (`DocumentServices.contentWritten`).
    func contentWritten(_ node: Node, inode: UInt64, by user: FileUser) {
        guard case .provider(_, let provider) = node.place, case .app(let app) = user,
            let path = try? table.path(of: inode)
        else { return }
        documents.contentWritten(by: app, provider: provider, path: path, in: snapshot)
    }

    /// What the kernel does to a file that a caller without CAP_FSETID
    /// writes or truncates, and leaves to us (`Request.clearsSetIDBits`):
    /// the daemon keeps that capability, so the backing file system would
    /// not (`BackingStore.modeAfterUnprivilegedWrite`). security.capability
    /// needs nothing: the backing file system drops it on any write,
    /// truncate or chown. `known`: the file's status, when the caller has
    /// just read it through `descriptor`.
    func clearSetIDBits(_ descriptor: Int32, for request: Request, known: stat? = nil) throws(Errno) {
        guard request.clearsSetIDBits else { return }
        try BackingStore.clearSetIDBits(descriptor, known: known) { request.isMember(of: $0) }
    }

    /// The descriptor of a backed folder that passed the gate; keep it
    /// alive while its number is used.
    func backedDirectory(_ folder: Target) throws(Errno) -> FolderDescriptor {
        guard folder.node.place.isBacked else { throw .notPermitted }
        return try folderDescriptor(of: folder.node)
    }

    /// New files belong to the caller, not to the daemon; in a setgid folder
    /// they take the folder's group, as the backing file system would.
    func giveToCaller(_ directory: Int32, _ name: String, _ request: Request, folder: Node) throws(Errno) {
        guard request.uid != daemonUID || request.gid != daemonGID else { return }
        let folderInfo = try Sys.stat(directory)
        let group = folderInfo.st_mode & S_ISGID != 0 ? folderInfo.st_gid : request.gid
        try Sys.chownAt(directory, name, request.uid, group)
    }
}
