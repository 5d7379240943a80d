import CommandErrors
import Foundation
import Policy
import PolicyStore

/// The fleet's store as one host's commands change it: each grant, revoke,
/// restore and forget is the fleet's event (with this host's name, `fleet
/// events`) and is also written to this host's own log, so that `scopefs
/// events` here shows what was done from here, as on one machine (SPEC
/// S29). The fleet's store commits first; a change it refused is in
/// neither log.
public struct FleetStoreWithLocalLog: IsolationStore {
    public let fleet: FleetRepository
    private let log: EventStore

    public init(fleet: FleetRepository, log: EventStore) {
        self.fleet = fleet
        self.log = log
    }

    private func logged(_ kind: Event.Kind, _ grants: [Grant], operation: String? = nil, pid: Int32 = getpid())
        throws(CommandError)
    {
        try log.recordChanges(grants.map { Event.change(kind, $0, operation: operation, pid: pid) })
    }

    public func grant(
        app: AppID, provider: ProviderID, path: String, access: Access, session: Bool, update: GrantUpdate,
        wholeProvider: Bool
    ) throws(CommandError) -> GrantChange {
        let change = try fleet.grant(
            app: app, provider: provider, path: path, access: access, session: session, update: update,
            wholeProvider: wholeProvider)
        try logged(.grant, [change.grant])
        return change
    }

    public func grantAll(app: AppID, items: [GrantItem], access: Access, wholeProvider: Bool) throws(CommandError)
        -> [GrantChange]
    {
        let changes = try fleet.grantAll(app: app, items: items, access: access, wholeProvider: wholeProvider)
        try logged(.grant, changes.map(\.grant))
        return changes
    }

    public func forget(app: AppID, grant: GrantID?, sessionOnly: Bool, reason: String) throws(CommandError) -> [Grant] {
        let forgotten = try fleet.forget(app: app, grant: grant, sessionOnly: sessionOnly, reason: reason)
        try logged(.forget, forgotten, operation: reason)
        return forgotten
    }

    public func setState(_ state: GrantState, app: AppID, grant: GrantID?, requester: Int32) throws(CommandError)
        -> [Grant]
    {
        let changed = try fleet.setState(state, app: app, grant: grant, requester: requester)
        try logged(state == .revoked ? .revoke : .restore, changed, pid: requester)
        return changed
    }

    // What records no event: the fleet's own.

    public func versionedSnapshot(generation: UInt64) throws(CommandError) -> (snapshot: PolicySnapshot, version: Int64)
    {
        try fleet.versionedSnapshot(generation: generation)
    }

    public func policyVersion() throws(CommandError) -> Int64 { try fleet.policyVersion() }

    public func changes(since version: Int64) throws(CommandError) -> PolicyChanges? {
        try fleet.changes(since: version)
    }

    public func addProvider(id: ProviderID, directory: String, name: String?, extension spec: ProviderExtensionSpec?)
        throws(CommandError) -> Provider
    {
        try fleet.addProvider(id: id, directory: directory, name: name, extension: spec)
    }

    public func providers() throws(CommandError) -> [Provider] { try fleet.providers() }
    public func removeProvider(id: ProviderID) throws(CommandError) { try fleet.removeProvider(id: id) }
    public func addApp(id: AppID, name: String?) throws(CommandError) -> App { try fleet.addApp(id: id, name: name) }
    public func apps() throws(CommandError) -> [App] { try fleet.apps() }

    public func setDownloads(_ policy: DownloadPolicy, of id: AppID) throws(CommandError) {
        try fleet.setDownloads(policy, of: id)
    }

    public func removeApp(id: AppID) throws(CommandError) { try fleet.removeApp(id: id) }
    public func grants(app: AppID?) throws(CommandError) -> [Grant] { try fleet.grants(app: app) }

    public func itemIdentifier(provider: ProviderID, path: String) throws(CommandError) -> ItemIdentifier {
        try fleet.itemIdentifier(provider: provider, path: path)
    }

    public func itemLocation(_ item: ItemIdentifier) throws(CommandError) -> ItemLocation? {
        try fleet.itemLocation(item)
    }
}
