import Policy

extension ScopeFileSystem {
    /// The inodes whose cached pages a snapshot would take away (SPEC
    /// S14): those covered by grants active now and not in `snapshot`.
    ///
    /// The daemon drops them before it installs the snapshot as well as
    /// after. Dropped only after, a page stayed readable from the kernel's
    /// cache while the snapshot was already in force and visible (in
    /// `user.scopefs.grant-state`, in a presenter's `revoked` notice): an
    /// app that saw its revoke could still read its document through an
    /// open descriptor (issue 48's corpus met it in 4 reads of 30). Dropped
    /// before too, a page is back in that moment only if the app read it
    /// while the revoke was being installed.
    public func pagesLosingAccess(to snapshot: PolicySnapshot) -> [UInt64] {
        let current = self.snapshot
        var inodes: [UInt64] = []
        for id in snapshot.grantIDsChanged(since: current) {
            guard let old = current.grantsByID[id], old.state == .active, snapshot.grantsByID[id]?.state != .active
            else { continue }
            inodes += table.nodes(app: old.app, provider: old.provider, within: old.relativePath).map(\.inode)
            // The temporaries of saves of the grant's file go with it (S48).
            for path in temporaries.hostPaths(replacing: id) {
                inodes += table.nodes(app: old.app, provider: old.provider, within: path).map(\.inode)
            }
        }
        return inodes
    }
}
