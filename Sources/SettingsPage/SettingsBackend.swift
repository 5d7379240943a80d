import CommandErrors
import Control
import Documents
import Foundation
import Policy
import PolicyStore

/// What the page reads and changes, and nothing else. The live backend is
/// the CLI's own code: `privacy` and `events` read the store, `status`
/// asks the daemon, and every change is `ControlClient.policy`, the path
/// of `scopefs revoke`, `restore` and `forget` (SPEC S46, S13: the daemon
/// installs a revoke before it answers). Tests give the routes a backend
/// in memory.
public protocol SettingsBackend: Sendable {
    func apps() throws(CommandError) -> [App]
    func providers() throws(CommandError) -> [Provider]
    func grants(app: AppID?) throws(CommandError) -> [Grant]
    func events(_ filter: EventStore.Filter) throws(CommandError) -> [Event]
    /// The reference documents in `app`'s container, by the item they name.
    func references(app: AppID) -> [ItemIdentifier: [String]]
    /// The daemon's status; nil when no daemon serves the state directory.
    func status() -> DaemonStatus?
    /// One of the owner's policy commands (revoke, restore, forget).
    func change(_ command: ControlCommand) throws(CommandError) -> ControlResponse
}

/// The backend of `scopefs settings`: a state directory and its daemon.
public struct LiveSettingsBackend: SettingsBackend {
    public let state: StateDirectory

    public init(state: StateDirectory) { self.state = state }

    // A connection per request, as each CLI command opens its own: the
    // daemon may replace the database under a long-running page.
    private func repository() throws(CommandError) -> PolicyRepository {
        PolicyRepository(database: try PolicyDatabase.open(state))
    }

    public func apps() throws(CommandError) -> [App] { try repository().apps() }

    public func providers() throws(CommandError) -> [Provider] { try repository().providers() }

    public func grants(app: AppID?) throws(CommandError) -> [Grant] { try repository().grants(app: app) }

    public func events(_ filter: EventStore.Filter) throws(CommandError) -> [Event] {
        try EventStore(database: try PolicyDatabase.open(state)).events(filter)
    }

    public func references(app: AppID) -> [ItemIdentifier: [String]] {
        let documents = state.containerPath(of: app) + "/Documents"
        var found: [ItemIdentifier: [String]] = [:]
        for relative in DocumentQuery.files(under: documents).sorted() {
            if let stub = DocumentQuery.stub(at: documents + "/" + relative) {
                found[stub.item, default: []].append("Documents/" + relative)
            }
        }
        return found
    }

    public func status() -> DaemonStatus? { try? ControlClient.status(state: state) }

    public func change(_ command: ControlCommand) throws(CommandError) -> ControlResponse {
        precondition(OwnerPolicy.isPolicyCommand(command))
        return try ControlClient.policy(command, state: state) { () throws(CommandError) in try repository() }
    }
}
