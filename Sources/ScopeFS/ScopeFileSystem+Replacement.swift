import FuseBridge
import Glibc
import HostText
import Policy
import SystemPackage

/// Atomic saves beside a single-file grant (SPEC S48): in a bare folder
/// (`Coverage.ancestor`), where nothing may be made, an app that may
/// write a granted file of that folder may create a temporary file, write
/// it, rename it over the granted file (or to another temporary name),
/// and remove it. The one access rule decides each step
/// (`Coverage.replacing`: a write of the granted file); `temporaries`
/// keeps the names, seen by their app alone. A temporary's host file has a
/// hidden name of its own, made with O_EXCL: the app's name of it never
/// meets the host's names, so a name an ungranted file has answers as a
/// name nothing has (S2), and no ungranted host file is ever opened,
/// replaced or shown through one.
extension ScopeFileSystem {
    /// The folder `parent` as the place of a new temporary `name`, and the
    /// host name to make its file at: when the caller may not write the
    /// folder itself (a bare folder on the way to its grants) but may
    /// replace a granted file in it. Nil otherwise: the create is then
    /// decided as any other (the gate's denial, recorded).
    func replacementFolder(_ parent: UInt64, _ name: String, _ caller: Caller, _ operation: FileOperation)
        throws(Errno) -> (folder: Target, hostName: String)?
    {
        guard case .app(let app, _) = caller else { return nil }
        let folder = try gate(parent, .lookup, caller, operation)
        guard case .provider(_, let provider) = folder.node.place, folder.grant == nil,
            try coverage(of: folder.resolved, app: app, provider: provider) == .ancestor
        else { return nil }
        let folderPath = try folder.path
        let path = RelativePath.join(folderPath, name)
        // A name a grant is made at is that grant's, never a temporary.
        guard withPolicy({ $0.coverage(app: app, provider: provider, path: path) }) == .hidden else { return nil }
        let siblings = withPolicy { policy in
            policy.grants(of: app).filter {
                $0.provider == provider && !$0.isDirectory && RelativePath.parent(of: $0.relativePath) == folderPath
            }
        }
        guard let grant = siblings.first(where: { mayReplace($0, caller) }) else { return nil }
        let key = ReplacementTemporaries.Key(app: app, provider: provider, path: path)
        // The kernel looks a name up before it creates it: one the app made
        // already is met only in a race with its own create.
        guard temporaries.temporary(key) == nil else { throw .fileExists }
        let hostName = ReplacementTemporaries.hostName(beside: RelativePath.lastComponent(of: grant.relativePath))
        guard temporaries.add(key, .init(grant: grant.id, hostName: hostName)) else { throw Errno(rawValue: ENOSPC) }
        return (folder, hostName)
    }

    /// A temporary `replacementFolder` recorded whose file could not be made.
    func forgetTemporary(_ name: String, in folder: Target) {
        guard case .provider(let app, let provider) = folder.node.place, let path = try? folder.path else { return }
        temporaries.remove(.init(app: app, provider: provider, path: RelativePath.join(path, name)))
    }

    /// Whether `caller` may save over `grant`'s file by a temporary: the
    /// one access rule, asked by name (the file's scope held, S9).
    func mayReplace(_ grant: Grant, _ caller: Caller) -> Bool {
        let verdict = Decision.permit(
            .write, coverage: .replacing(grant), caller: caller,
            enclosing: { grant in self.withPolicy { $0.enclosingGrants(of: grant.id) } },
            scopeHeld: { grant in self.scopeHeld(by: caller, on: grant) })
        if case .success = verdict { return true }
        return false
    }

    /// The temporary `name` of the caller's app in a bare folder, if it is one.
    func temporary(_ name: String, in folder: Target) throws(Errno) -> ReplacementTemporaries.Key? {
        guard case .provider(let app, let provider) = folder.node.place, folder.grant == nil,
            temporaries.any(app: app, provider: provider)
        else { return nil }
        let key = ReplacementTemporaries.Key(
            app: app, provider: provider, path: RelativePath.join(try folder.path, name))
        return temporaries.grant(of: key) == nil ? nil : key
    }

    /// A hidden node's position when it is one of its app's temporaries:
    /// beside the grant it was made to replace, while that grant exists.
    func replacementPosition(_ resolved: NodeTable.Resolved, app: AppID, provider: ProviderID) -> CoveragePosition? {
        guard temporaries.any(app: app, provider: provider), let path = try? resolved.path,
            let id = temporaries.grant(
                ofHostPath: ReplacementTemporaries.Key(app: app, provider: provider, path: path)),
            let grant = withPolicy({ $0.grantsByID[id] })
        else { return nil }
        return .replacing(grant)
    }

    /// The host name of `name` in `folder` for `caller`: a temporary's own
    /// when `name` is one of the caller's app's, else `name`. Another
    /// caller (the owner's inspect view walks the app's nodes) gets ENOENT
    /// for it: a temporary is seen by its app alone (S48).
    func hostName(of name: String, in folder: Target, caller: Caller) throws(Errno) -> String {
        guard let key = try? temporary(name, in: folder), let temporary = temporaries.temporary(key) else {
            return name
        }
        guard caller.app == key.app else { throw .noSuchFileOrDirectory }
        return temporary.hostName
    }

    /// Whether `node` is one of its app's temporaries: the kernel may keep
    /// neither its entry nor its attributes, which would show it to the
    /// owner's inspect view of the same nodes (S48, S4).
    func isTemporary(_ node: Node) -> Bool {
        guard case .provider(let app, let provider) = node.place, !node.isDirectory,
            temporaries.any(app: app, provider: provider),
            let path = try? table.resolve(node.inode, generation: generation)?.path
        else { return false }
        return temporaries.grant(ofHostPath: .init(app: app, provider: provider, path: path)) != nil
    }

    /// A bare folder's listing for one of its app's processes with the
    /// app's temporaries in it, under the app's names of them; nil when the
    /// app has none there, or another caller lists (the inspect view
    /// never sees them, `Decision.permit`). Never kept by the kernel
    /// (`cachesListing`): the owner lists the same node.
    func listingWithTemporaries(_ folder: Target, leading: Set<HostNameKey>, caller: Caller) throws(Errno)
        -> DirectoryHandle.Entries?
    {
        guard case .provider(let app, let provider) = folder.node.place, caller.app == app,
            temporaries.any(app: app, provider: provider)
        else { return nil }
        let listed = temporaries.listed(app: app, provider: provider, folder: try folder.path)
        guard !listed.isEmpty else { return nil }
        let lease = try backedDirectory(folder)
        defer { withExtendedLifetime(lease) {} }
        var items = [
            DirectoryHandle.Item(name: ".", inode: folder.node.inode, type: S_IFDIR),
            DirectoryHandle.Item(name: "..", inode: NodeTable.rootInode, type: S_IFDIR),
        ]
        let names = leading.map { (String($0.text), String($0.text)) } + listed.map { ($0.name, $0.hostName) }
        for (name, hostName) in names.sorted(by: { $0.0 < $1.0 }) {
            guard let info = try? Sys.statAt(lease.number, hostName) else { continue }
            items.append(DirectoryHandle.Item(name: name, inode: UInt64(info.st_ino), type: info.st_mode & S_IFMT))
        }
        return .fixed(items)
    }

    // MARK: Renaming and removing

    /// A rename in a bare folder of one of the caller's temporaries: over
    /// a granted file of the folder that the caller may write (the save),
    /// or to another name of the app's (the host file stays where it is;
    /// a temporary of that name is replaced). False when `name` is no
    /// temporary: the rename is then decided as any other.
    func renameTemporary(
        _ request: Request, _ caller: Caller, parent: UInt64, name: String, newParent: UInt64, newName: String,
        flags: UInt32
    ) throws(Errno) -> Bool {
        guard case .app = caller, let folder = try? gate(parent, .lookup, caller, .rename),
            let key = try temporary(name, in: folder), let moving = temporaries.temporary(key)
        else { return false }
        guard parent == newParent else { throw .improperLink }
        guard flags & ~Sys.renameNoReplace == 0 else { throw .invalidArgument }
        guard !RelativePath.hasSeparator(newName), newName != ".", newName != ".." else { throw .invalidArgument }
        var other = key
        other.path = RelativePath.join(try folder.path, newName)
        let replacedTemporary = temporaries.temporary(other)
        let noReplace = flags & Sys.renameNoReplace != 0
        let replaced: Grant?
        switch withPolicy({ $0.coverage(app: key.app, provider: key.provider, path: other.path) }) {
        case .granted(let grant) where grant.relativePath == other.path && !grant.isDirectory:
            guard mayReplace(grant, caller) else {
                recordDenial(.notPermitted, folder.resolved, caller, .rename)
                throw .notPermitted
            }
            replaced = grant
        case .hidden:
            if noReplace && replacedTemporary != nil { throw .fileExists }
            replaced = nil
        default:
            throw .notPermitted
        }
        guard let grant = withPolicy({ $0.grantsByID[moving.grant] }), mayReplace(grant, caller) else {
            throw .notPermitted
        }
        if other == key { return true }
        let lease = try backedDirectory(folder)
        defer { withExtendedLifetime(lease) {} }
        guard let replaced else {
            // Another name of the app's: only a temporary of that name goes.
            if let replacedTemporary {
                do { try Sys.unlinkAt(lease.number, replacedTemporary.hostName, 0) } catch .noSuchFileOrDirectory {}
                temporaries.remove(other)
                table.removed(parent: parent, name: replacedTemporary.hostName)
            }
            temporaries.rename(key, to: other.path)
            return true
        }
        try Sys.renameAt(lease.number, moving.hostName, lease.number, newName, noReplace ? Sys.renameNoReplace : 0)
        let moved = try? FileIdentity(Sys.statAt(lease.number, newName))
        table.renamed(
            from: NodeTable.EntryName(parent: parent, name: moving.hostName),
            to: NodeTable.EntryName(parent: parent, name: newName),
            view: folder.node.view, moved: moved)
        temporaries.remove(key)
        if let moved { temporaries.replaced(replaced.id, by: ItemFile(device: moved.device, inode: moved.inode)) }
        itemSaved(by: key.app, provider: key.provider, path: other.path)
        return true
    }

    /// A file was saved over `path` by a rename (S48): the item's record
    /// follows the new file, and other apps presenting it hear that its
    /// content changed (S27a). Both ways a save reaches the mount call it.
    func itemSaved(by app: AppID?, provider: ProviderID, path: String) {
        documents.itemReplaced(provider: provider, path: path)
        if let app { documents.contentWritten(by: app, provider: provider, path: path, in: snapshot) }
    }

    /// The unlink of one of the caller's temporaries; false when `name` is
    /// no temporary.
    func removeTemporary(_ caller: Caller, parent: UInt64, name: String) throws(Errno) -> Bool {
        guard case .app = caller, let folder = try? gate(parent, .lookup, caller, .unlink),
            let key = try temporary(name, in: folder), let temporary = temporaries.temporary(key)
        else { return false }
        // A revoke cuts the temporaries with the file they would replace.
        guard let grant = withPolicy({ $0.grantsByID[temporary.grant] }), mayReplace(grant, caller) else {
            recordDenial(.notPermitted, folder.resolved, caller, .unlink)
            throw .notPermitted
        }
        let lease = try backedDirectory(folder)
        defer { withExtendedLifetime(lease) {} }
        do { try Sys.unlinkAt(lease.number, temporary.hostName, 0) } catch .noSuchFileOrDirectory {}
        temporaries.remove(key)
        table.removed(parent: parent, name: temporary.hostName)
        return true
    }
}
