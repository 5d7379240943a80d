/// What an app's presenter hears about its documents (issue 17, like
/// NSFilePresenter): a grant arrived, was revoked, restored or forgotten;
/// its item moved (a new path) or was deleted — found by comparing the
/// snapshot the daemon served with the one it installs, so every way a
/// change reaches the daemon (a command, the picker, a host rename seen by
/// the item locator) is told the same way. Content changes (`changed`),
/// items appearing, moving or going inside a granted folder (`subitem`
/// notices, issue 31) and coordination requests (`save`, `relinquish`) are
/// posted as they happen.
public struct PresenterNotice: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        case arrived, revoked, restored, forgotten, moved, deleted
        /// An item appeared inside a granted folder (created, or moved in
        /// from where the app could not see it): `presentedSubitemDidAppear`.
        /// Always a subitem notice.
        case appeared
        /// The item's content changed, on the host or through another
        /// app's write (`presentedItemDidChange`); `path` names the file,
        /// also when the grant is its folder's.
        case changed
        /// Another app waits for this item: save your changes now
        /// (`savePresentedItemChanges`). Always just before `relinquish`.
        case save
        /// Another app waits to write this item: end your claim
        /// (`relinquishPresentedItem(toWriter:)`).
        case relinquish
        /// An extension's item changed its `user.scopefs.state`:
        /// downloaded, evicted, pinned, dirty, uploading, uploaded, in
        /// conflict or in error (SPEC S42, S43;
        /// `presentedItemDidChangeUbiquityAttributes`). Read the attribute
        /// for the new state.
        case state
    }

    /// Increases with every notice the daemon makes (a cursor for `watch`).
    public var id: UInt64
    public var kind: Kind
    public var app: AppID
    public var grant: GrantID
    public var provider: ProviderID
    /// The item's path in the app's view (`Providers/PROVIDER/PATH`).
    public var path: String
    /// With `moved`: where it was.
    public var oldPath: String?
    /// True when `path` is an item inside the granted folder, not the
    /// granted item itself (`presentedSubitem...` callbacks); absent else.
    public var subitem: Bool?

    public init(
        id: UInt64 = 0, kind: Kind, app: AppID, grant: GrantID, provider: ProviderID, path: String,
        oldPath: String? = nil, subitem: Bool? = nil
    ) {
        self.id = id
        self.kind = kind
        self.app = app
        self.grant = grant
        self.provider = provider
        self.path = path
        self.oldPath = oldPath
        self.subitem = subitem
    }

    /// The notices between two snapshots, in grant order (ids left at 0).
    public static func changes(from old: PolicySnapshot, to new: PolicySnapshot) -> [PresenterNotice] {
        var notices: [PresenterNotice] = []
        for id in new.grantIDsChanged(since: old) {
            let before = old.grantsByID[id]
            let after = new.grantsByID[id]
            guard let grant = after ?? before else { continue }
            // The same grant on an item that stayed put: nothing to say, and
            // no path to build (a whole snapshot compares every grant).
            if let before, let after, before == after, old.items[before.item] == new.items[after.item] { continue }
            func notice(_ kind: Kind, _ snapshot: PolicySnapshot, oldPath: String? = nil) -> PresenterNotice {
                PresenterNotice(
                    kind: kind, app: grant.app, grant: id, provider: grant.provider,
                    path: location(of: grant, in: snapshot).path, oldPath: oldPath)
            }
            guard let before else {
                notices.append(notice(.arrived, new))
                continue
            }
            guard let after else {
                notices.append(notice(.forgotten, old))
                continue
            }
            if before.state != after.state {
                notices.append(notice(after.state == .active ? .restored : .revoked, new))
            }
            let (was, now) = (location(of: before, in: old), location(of: after, in: new))
            if was.exists && !now.exists {
                notices.append(notice(.deleted, old))
            } else if now.exists && was.path != now.path {
                notices.append(notice(.moved, new, oldPath: was.path))
            }
        }
        return notices
    }

    /// The grant's item as the snapshot places it, as a path in the app's view.
    private static func location(of grant: Grant, in snapshot: PolicySnapshot) -> (path: String, exists: Bool) {
        let item = snapshot.items[grant.item]
        let relative = item?.path ?? grant.relativePath
        return (MountLayout.providerPath(provider: grant.provider, path: relative), item?.exists ?? true)
    }
}
