import CommandErrors
import Control
import Foundation
import Policy
import PolicyStore
import Synchronization

@testable import SettingsPage

/// The page's backend in memory: a policy, an event log, and a record of
/// the changes the routes asked for. Revoke and restore change the grants'
/// states as the daemon would.
final class FakeBackend: SettingsBackend {
    struct Store {
        var apps: [App] = []
        var providers: [Provider] = []
        var grants: [Grant] = []
        var events: [Event] = []
        var changes: [ControlCommand] = []
        /// Previews by "provider:path", as the mount would show them.
        var previews: [String: [UInt8]] = [:]
    }

    let store: Mutex<Store>

    init(_ store: Store) { self.store = Mutex(store) }

    var changes: [ControlCommand] { store.withLock { $0.changes } }
    var grantStates: [GrantState] { store.withLock { $0.grants.map(\.state) } }

    func apps() throws(CommandError) -> [App] { store.withLock { $0.apps } }
    func providers() throws(CommandError) -> [Provider] { store.withLock { $0.providers } }
    func grants(app: AppID?) throws(CommandError) -> [Grant] {
        store.withLock { $0.grants.filter { app == nil || $0.app == app } }
    }
    /// The log as the store keeps it: each event's id is its place (from 1).
    func events(_ filter: EventStore.Filter) throws(CommandError) -> [Event] {
        let matching = store.withLock {
            $0.events.enumerated().map { index, event in
                var stored = event
                stored.id = stored.id ?? Int64(index + 1)
                return stored
            }.filter { event in
                (filter.app == nil || event.app == filter.app) && (filter.kinds?.contains(event.kind) ?? true)
                    && (filter.since.map { (event.lastTime ?? event.time) >= $0 } ?? true)
                    && (filter.afterID.map { event.id! > $0 } ?? true)
            }
        }
        return Array(matching.suffix(filter.limit ?? matching.count))
    }

    /// Records an event, as the daemon does.
    func record(_ event: Event) { store.withLock { $0.events.append(event) } }
    func references(app: AppID) -> [ItemIdentifier: [String]] { [:] }
    func status() -> DaemonStatus? { nil }
    func previews() -> @Sendable (_ grant: Grant, _ path: String) -> [UInt8]? {
        { [self] grant, path in
            self.store.withLock { grant.state == .active ? $0.previews["\(grant.provider):\(path)"] : nil }
        }
    }

    func change(_ command: ControlCommand) throws(CommandError) -> ControlResponse {
        store.withLock { store in
            store.changes.append(command)
            func flip(_ app: AppID, _ id: GrantID?, to state: GrantState) -> [Grant] {
                var changed: [Grant] = []
                for index in store.grants.indices
                where store.grants[index].app == app && (id == nil || store.grants[index].id == id)
                    && store.grants[index].state != state
                {
                    store.grants[index] = store.grants[index].with(state: state)
                    changed.append(store.grants[index])
                }
                return changed
            }
            switch command {
            case .revoke(let app, let id): return ControlResponse(ok: true, revoked: flip(app, id, to: .revoked))
            case .restore(let app, let id): return ControlResponse(ok: true, restored: flip(app, id, to: .active))
            case .forget(let app, let id):
                let gone = store.grants.filter { $0.app == app && (id == nil || $0.id == id) }
                store.grants.removeAll { $0.app == app && (id == nil || $0.id == id) }
                var response = ControlResponse(ok: true)
                response.forgotten = gone
                return response
            default: return ControlResponse(ok: false, code: 64, message: "not a policy command")
            }
        }
    }
}
