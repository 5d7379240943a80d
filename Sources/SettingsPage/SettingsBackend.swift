import CommandErrors
import Control
import Documents
import FleetStore
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
    /// A reader of granted items' previews (SPEC S50), as the mount shows
    /// them to an app holding them: a PNG, never a download; nil when it
    /// has none. One per page: where the mount is is asked once, not per item.
    func previews() -> @Sendable (_ grant: Grant, _ path: String) -> [UInt8]?
}

/// The backend of `scopefs settings`: a state directory and its daemon.
/// Its apps, providers and grants are the isolation layer's, as
/// `IsolationBackend` decides: on a fleet the fleet's store (SPEC S44),
/// never this host's SQLite file, which holds none of the fleet's grants.
public struct LiveSettingsBackend: SettingsBackend {
    public let state: StateDirectory

    public init(state: StateDirectory) { self.state = state }

    // A connection per request, as each CLI command opens its own: the
    // daemon may replace the database under a long-running page, and
    // `init --database` may put the directory on a fleet.
    private func backend() throws(CommandError) -> IsolationBackend { try IsolationBackend(state) }

    private func reader() throws(CommandError) -> any IsolationStore { try backend().reader() }

    public func apps() throws(CommandError) -> [App] { try reader().apps() }

    public func providers() throws(CommandError) -> [Provider] { try reader().providers() }

    public func grants(app: AppID?) throws(CommandError) -> [Grant] { try reader().grants(app: app) }

    /// This host's log, as `scopefs events` reads it (on a fleet too).
    public func events(_ filter: EventStore.Filter) throws(CommandError) -> [Event] {
        try backend().localEvents().events(filter)
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

    /// `user.scopefs.thumbnail` of the item in the holding app's view of
    /// the daemon's mount, which answers the owner's processes too.
    public func previews() -> @Sendable (_ grant: Grant, _ path: String) -> [UInt8]? {
        let mountpoint = status()?.mountpoint
        return { grant, path in
            guard grant.state == .active, let mountpoint else { return nil }
            let inView = [mountpoint, grant.app, "Providers", grant.provider, path].filter { !$0.isEmpty }
            return ItemPreview.read(inView.joined(separator: "/"))
        }
    }

    /// As `scopefs revoke`, `restore` and `forget` do it: on a fleet written
    /// to the fleet's store with the owner's role (a host's daemon may not
    /// change the policy), then this host's daemon installs it before this
    /// returns (SPEC S13, S44); else through the daemon, or the file.
    public func change(_ command: ControlCommand) throws(CommandError) -> ControlResponse {
        precondition(OwnerPolicy.isPolicyCommand(command))
        let backend = try backend()
        if let fleet = try backend.fleetRepositoryForChange() {
            let response = try OwnerPolicy.apply(command, repository: fleet, state: state)
            try ControlClient.notifyChange(state: state)
            return response
        }
        return try ControlClient.policy(command, state: state) { () throws(CommandError) in
            try backend.localRepository()
        }
    }
}
