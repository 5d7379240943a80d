import FuseBridge
import Glibc
import Policy
import SystemPackage

/// Atomic saves beside a single-file grant (SPEC S48): in a bare folder
/// (`Coverage.ancestor`), where nothing may be made, an app that may
/// write a granted file of that folder may create a temporary file, write
/// it, rename it over the granted file (or to another temporary name),
/// and remove it. The one access rule decides each step
/// (`Coverage.replacing`: a write of the granted file); `temporaries`
/// keeps the names, seen by their app alone. A temporary never takes an
/// existing name: it is made with O_EXCL and renamed with
/// RENAME_NOREPLACE unless it replaces a granted file, so no ungranted
/// host file is ever opened, replaced or shown through one.
extension ScopeFileSystem {
    /// The folder `parent` as the place of a new temporary `name`: when the
    /// caller may not write the folder itself (a bare folder on the way to
    /// its grants) but may replace a granted file in it. Nil otherwise: the
    /// create is then decided as any other (the gate's denial, recorded).
    func replacementFolder(_ parent: UInt64, _ name: String, _ caller: Caller, _ operation: FileOperation)
        throws(Errno) -> Target?
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
        guard temporaries.add(key, replacing: grant.id) else { throw Errno(rawValue: ENOSPC) }
        return Target(resolved: folder.resolved, grant: grant)
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
            let id = temporaries.grant(of: ReplacementTemporaries.Key(app: app, provider: provider, path: path)),
            let grant = withPolicy({ $0.grantsByID[id] })
        else { return nil }
        return .replacing(grant)
    }

    // MARK: Renaming and removing

    /// A rename in a bare folder of one of the caller's temporaries: over
    /// a granted file of the folder that the caller may write (the save),
    /// or to a name nothing has. False when `name` is no temporary: the
    /// rename is then decided as any other.
    func renameTemporary(
        _ request: Request, _ caller: Caller, parent: UInt64, name: String, newParent: UInt64, newName: String,
        flags: UInt32
    ) throws(Errno) -> Bool {
        guard case .app = caller, let folder = try? gate(parent, .lookup, caller, .rename),
            let key = try temporary(name, in: folder)
        else { return false }
        guard parent == newParent else { throw .improperLink }
        guard flags & ~Sys.renameNoReplace == 0 else { throw .invalidArgument }
        let targetPath = RelativePath.join(try folder.path, newName)
        let target = withPolicy { $0.coverage(app: key.app, provider: key.provider, path: targetPath) }
        let replaced: Grant?
        switch target {
        case .granted(let grant) where grant.relativePath == targetPath && !grant.isDirectory:
            guard mayReplace(grant, caller) else {
                recordDenial(.notPermitted, folder.resolved, caller, .rename)
                throw .notPermitted
            }
            replaced = grant
        case .hidden:
            guard temporary(newName, key: key) != nil || !exists(newName, in: folder) else { throw .fileExists }
            replaced = nil
        default:
            throw .notPermitted
        }
        guard let id = temporaries.grant(of: key), let grant = withPolicy({ $0.grantsByID[id] }),
            mayReplace(grant, caller)
        else { throw .notPermitted }
        let lease = try backedDirectory(folder)
        defer { withExtendedLifetime(lease) {} }
        // Only a save replaces a name; a temporary renamed to another name
        // never takes one the host has (an ungranted file stays untouched).
        let noReplace = replaced == nil && temporary(newName, key: key) == nil
        try Sys.renameAt(lease.number, name, lease.number, newName, noReplace ? Sys.renameNoReplace : flags)
        let moved = try? FileIdentity(Sys.statAt(lease.number, newName))
        table.renamed(
            from: NodeTable.EntryName(parent: parent, name: name),
            to: NodeTable.EntryName(parent: parent, name: newName),
            view: folder.node.view, moved: moved)
        if let replaced {
            temporaries.remove(key)
            if let temporary = temporary(newName, key: key) { temporaries.remove(temporary) }
            if let moved { temporaries.replaced(replaced.id, by: ItemFile(device: moved.device, inode: moved.inode)) }
            // The grant's item is the new file: its record follows (S48).
            documents.itemReplaced(provider: key.provider, path: targetPath)
        } else {
            if let temporary = temporary(newName, key: key) { temporaries.remove(temporary) }
            temporaries.rename(key, to: targetPath)
        }
        return true
    }

    /// The unlink of one of the caller's temporaries; false when `name` is
    /// no temporary.
    func removeTemporary(_ caller: Caller, parent: UInt64, name: String) throws(Errno) -> Bool {
        guard case .app = caller, let folder = try? gate(parent, .lookup, caller, .unlink),
            let key = try temporary(name, in: folder)
        else { return false }
        // A revoke cuts the temporaries with the file they would replace.
        guard let id = temporaries.grant(of: key), let grant = withPolicy({ $0.grantsByID[id] }),
            mayReplace(grant, caller)
        else {
            recordDenial(.notPermitted, folder.resolved, caller, .unlink)
            throw .notPermitted
        }
        let lease = try backedDirectory(folder)
        defer { withExtendedLifetime(lease) {} }
        do { try Sys.unlinkAt(lease.number, name, 0) } catch .noSuchFileOrDirectory {}
        temporaries.remove(key)
        table.removed(parent: parent, name: name)
        return true
    }

    private func temporary(_ name: String, key: ReplacementTemporaries.Key) -> ReplacementTemporaries.Key? {
        var other = key
        other.path = RelativePath.join(RelativePath.parent(of: key.path) ?? "", name)
        return temporaries.grant(of: other) == nil ? nil : other
    }

    private func exists(_ name: String, in folder: Target) -> Bool {
        guard let lease = try? backedDirectory(folder) else { return true }
        defer { withExtendedLifetime(lease) {} }
        return (try? Sys.statAt(lease.number, name)) != nil
    }
}
