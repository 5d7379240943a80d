import FuseBridge
import Policy
import SystemPackage

/// An app's creates, links, unlinks and renames in provider folders, told
/// to other apps' folder presenters (issue 31, SPEC S27c).
extension ScopeFileSystem {
    /// Names a change through the mount makes in one provider.
    struct SubitemChanges {
        var provider: ProviderID
        var changes: [SubitemChange]
    }

    /// `name` comes into `folder` (create, mkdir, mknod, symlink, link).
    func appearing(_ name: String, in folder: Target) -> SubitemChanges? {
        providerItem(folder, name).map { SubitemChanges(provider: $0.provider, changes: [.appeared($0.path)]) }
    }

    /// `name` goes from `folder` (unlink, rmdir).
    func deleting(_ name: String, in folder: Target) -> SubitemChanges? {
        providerItem(folder, name).map { SubitemChanges(provider: $0.provider, changes: [.deleted($0.path)]) }
    }

    /// A rename (one grant of one provider: `requireSameGrant`); an
    /// exchange also moves the other item the other way.
    func moving(_ name: String, in from: Target, to newName: String, in to: Target, exchange: Bool)
        -> SubitemChanges?
    {
        guard let old = providerItem(from, name), let new = providerItem(to, newName) else { return nil }
        var changes: [SubitemChange] = [.moved(from: old.path, to: new.path)]
        if exchange { changes.append(.moved(from: new.path, to: old.path)) }
        return SubitemChanges(provider: old.provider, changes: changes)
    }

    /// Runs `body`, the system call that makes `changes`; other apps hear
    /// of them once it succeeded. Their host echoes are expected before it
    /// runs: the channel may read them before it returns. Only an app's
    /// changes are told (the inspect view writes nothing).
    /// A provider whose items live elsewhere hears of the change too (its
    /// replica changed: the remote must follow, S43).
    func announcing<Result>(
        _ caller: Caller, _ folder: Target, _ changes: @autoclosure () -> SubitemChanges?,
        _ body: () throws(Errno) -> Result
    ) throws(Errno) -> Result {
        defer { namespaceChanged(in: folder.node) }
        // No presenter yet: not even the paths are worked out (`make bench`
        // measured 20-30 % on create and unlink for this bookkeeping).
        guard let app = caller.app, documents.presentersListen, let changes = changes() else { return try body() }
        for change in changes.changes { documents.subitemWillChange(provider: changes.provider, change) }
        let result: Result
        do {
            result = try body()
        } catch {
            for change in changes.changes { documents.subitemDidNotChange(provider: changes.provider, change) }
            throw error
        }
        let snapshot = self.snapshot
        for change in changes.changes {
            documents.subitemChanged(by: app, provider: changes.provider, change, in: snapshot)
        }
        return result
    }

    /// The provider and path of `name` in `folder`, when `folder` is a
    /// provider folder (a container's items have no other presenters).
    private func providerItem(_ folder: Target, _ name: String) -> (provider: ProviderID, path: String)? {
        guard case .provider(_, let provider) = folder.node.place, let path = try? folder.path else { return nil }
        return (provider, RelativePath.join(path, name))
    }
}
