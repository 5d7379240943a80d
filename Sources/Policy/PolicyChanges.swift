/// What changed in the isolation layer between two policy versions, as a
/// store reads it from its change log (`IsolationStore.changes(since:)`):
/// the grants and items as they are now, and those removed. The daemon
/// applies it to the snapshot it serves (`PolicySnapshot.applying`)
/// instead of reading the whole policy again: at a million grants a whole
/// read and index took seconds, and a revoke waited for them (issue 34).
///
/// Apps and providers are not in it: a change to either is rare and
/// reshapes every view, so the store answers nil and the daemon reads the
/// whole policy.
public struct PolicyChanges: Sendable, Equatable {
    /// The policy version these changes bring the snapshot to.
    public var version: Int64
    /// Grants made or changed, and every grant of a changed item, as they
    /// are now (a grant's path is its item's; `grantIDsChanged` names them).
    public var grants: [Grant]
    public var removedGrants: Set<GrantID>
    /// Items recorded or changed (moved, found missing), as they are now.
    public var items: [ItemIdentifier: ItemLocation]
    public var removedItems: Set<ItemIdentifier>

    public init(
        version: Int64, grants: [Grant] = [], removedGrants: Set<GrantID> = [],
        items: [ItemIdentifier: ItemLocation] = [:], removedItems: Set<ItemIdentifier> = []
    ) {
        self.version = version
        self.grants = grants
        self.removedGrants = removedGrants
        self.items = items
        self.removedItems = removedItems
    }

    public var isEmpty: Bool {
        grants.isEmpty && removedGrants.isEmpty && items.isEmpty && removedItems.isEmpty
    }
}
