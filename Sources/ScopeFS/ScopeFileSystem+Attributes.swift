import FuseBridge
import Glibc
import Policy
import SystemPackage

/// setattr: chmod, chown, truncate, utimens (SPEC S35). Permission checks
/// are the host file system's (or the kernel's with `allow_other`, see
/// docs/DECISIONS.md, decision 8); the policy check is ours.
extension ScopeFileSystem {
    public func setattr(_ request: Request, inode: UInt64, changes: AttributeChanges, handle: UInt64?)
        throws(Errno) -> Attributes
    {
        let open = handle.map(OpenHandle.from)
        // Through a write descriptor opened in scope (ftruncate, futimens),
        // the descriptor's rights stand in for the scope (SPEC S9): the
        // access rule is asked through the descriptor, for a write (S47) —
        // for its own app only (SPEC S33): checked before the gate, so a
        // stolen descriptor gets EPERM, not the ENOENT of another app's node.
        let caller = callers.caller(of: request)
        if let open { try checkUser(open, request, .setattr, caller) }
        let throughDescriptor = open?.writable == true
        let target = try gate(
            inode, .write, caller, .setattr, route: throughDescriptor ? .descriptor : .name)
        guard target.node.place.isBacked else { throw .notPermitted }
        if let open { try checkStillGranted(open, .setattr, request) }
        // A placeholder is downloaded before its size changes (S42, S43);
        // mode and times are the replica's to send on (`namespaceChanged`).
        let content = content(of: target.node)
        if let (content, file) = content, let size = changes.size {
            try content.prepareTruncate(file, toZero: size == 0, interruption: Interruption(request))
            try content.willWrite(file, edition: open?.edition)
        }
        defer { if let (content, file) = content, changes.size != nil { content.didWrite(file) } }
        defer { if let (content, file) = content { content.namespaceChanged(provider: file.provider) } }
        // The attributes are read through the same descriptor: it is the
        // node's own file, checked, so no second lookup by name. A file
        // that is open (futimens after a write, as tar does) is reached
        // through its open descriptor: no open, check and close by name.
        let info = try withPathDescriptor(target, open: open ?? target.resolved.openFile) {
            descriptor, isSymlink throws(Errno) in
            if let mode = changes.mode {
                if isSymlink { throw Errno.notSupported }
                let node = target.node
                var asked = mode & 0o7777
                // Which kind of file keeps a set-id bit (`modeAllowed`): asked only then.
                if asked & (S_ISUID | S_ISGID) != 0, !node.isDirectory {
                    asked |= try Sys.stat(descriptor).st_mode & S_IFMT
                }
                let allowed = Self.modeAllowed(asked, in: node.place, isDirectory: node.isDirectory)
                try Sys.chmod(descriptor, allowed & 0o7777)
            }
            if changes.uid != nil || changes.gid != nil {
                try Sys.chownAt(descriptor, "", changes.uid ?? uid_t.max, changes.gid ?? gid_t.max)
            }
            var truncatedByPath = false
            if let size = changes.size {
                try clearSetIDBits(descriptor, for: request)
                // Noted before it is made: the host channel's echo of a
                // write through the mount may come before the call returns.
                if let open, open.writable {
                    open.wrote.store(true, ordering: .relaxed)
                    keepUnsynced(open)
                    try Sys.ftruncate(open.descriptor, size)
                } else {
                    // No handle's release tells of it: told here.
                    target.node.noteMountWrite()
                    try Sys.truncate(Sys.procPath(descriptor), size)
                    truncatedByPath = true
                    contentWritten(target.node, inode: inode, by: FileUser(caller))
                }
            }
            if changes.accessTime != nil || changes.modificationTime != nil {
                try setTimes(changes, target: target, descriptor: descriptor, isSymlink: isSymlink)
            }
            let info = try Sys.stat(descriptor)
            // As the whole change left it: the echo check's version.
            if truncatedByPath {
                table.wroteThroughMount(FileIdentity(info), as: FileVersion(info))
            }
            return info
        }
        return Attributes(
            stat: presentedContent(target.node, info),
            timeout: attributeTimeout(target.node, parent: target.resolved.parent))
    }

    private func setTimes(_ changes: AttributeChanges, target: Target, descriptor: Int32, isSymlink: Bool) throws(Errno)
    {
        let times = changes.utimensTimes
        if isSymlink, let parent = try parentDescriptor(of: target.resolved) {
            defer { withExtendedLifetime(parent) {} }
            try Sys.utimens(parent.number, target.resolved.name, times, flags: Sys.noFollow)
        } else {
            try Sys.utimens(descriptor, times)
        }
    }

    /// Runs `body` with a descriptor of the node's own file: the folder's
    /// descriptor, a descriptor of the file open (`open`), or an O_PATH
    /// descriptor opened without following a symlink and checked to be the
    /// node's file.
    func withPathDescriptor<T>(_ target: Target, open: OpenHandle? = nil, _ body: (Int32, Bool) throws(Errno) -> T)
        throws(Errno) -> T
    {
        if target.node.folder != nil {
            let directory = try folderDescriptor(of: target.node)
            defer { withExtendedLifetime(directory) {} }
            return try body(directory.number, false)
        }
        if let open { return try body(open.descriptor, false) }
        guard let parent = try parentDescriptor(of: target.resolved) else { throw .staleNFSFileHandle }
        let descriptor: Int32
        do {
            defer { withExtendedLifetime(parent) {} }
            descriptor = try Sys.openAt(parent.number, target.resolved.name, Sys.pathOnly | O_NOFOLLOW)
        }
        defer { Sys.close(descriptor) }
        let info = try Sys.stat(descriptor)
        guard FileIdentity(info) == target.node.identity else { throw .noSuchFileOrDirectory }
        return try body(descriptor, info.isSymlink)
    }
}
