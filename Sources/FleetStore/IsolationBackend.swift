import CommandErrors
import Foundation
import Policy
import PolicyStore

/// Where a state directory's isolation layer lives, decided once (issue 51):
/// the fleet's PostgreSQL store when `init --database` or a fleet mount
/// wrote `fleet.json` (SPEC S44), else the directory's own SQLite file
/// (SPEC S13). The CLI, the daemon and the settings page ask this value for
/// the store they read or change; no other source reads `fleet.json` or
/// opens the SQLite file by itself (Tests/repo/test_one_store_choice.py),
/// so a consumer cannot read this host's file on a fleet by mistake (the
/// settings page did).
public struct IsolationBackend: Sendable {
    public let state: StateDirectory
    /// The fleet's configuration; nil on a state directory of its own.
    public let fleet: FleetConfiguration?

    /// The state directory's choice, as `fleet.json` records it now.
    public init(_ state: StateDirectory) throws(CommandError) {
        self.state = state
        self.fleet = try FleetConfiguration.load(state)
    }

    public var isFleet: Bool { fleet != nil }

    /// Whether `fleet.json` is there, without reading it: for a check that
    /// must not fail on a damaged file (the refusal below names the fleet).
    public static func isFleet(_ state: StateDirectory) -> Bool {
        FileManager.default.fileExists(atPath: state.path + "/" + FleetConfiguration.fileName)
    }

    /// Whether the state directory was initialised (its SQLite file exists;
    /// a fleet's host keeps its own log there too).
    public static func isInitialised(_ state: StateDirectory) -> Bool {
        FileManager.default.fileExists(atPath: state.databasePath)
    }

    /// This host's SQLite file: the isolation layer of a state directory of
    /// its own, and on a fleet this host's event log and run journal.
    public func localDatabase() throws(CommandError) -> PolicyDatabase { try PolicyDatabase.open(state) }

    /// The SQLite repository. On a fleet it holds no grant of the fleet's:
    /// ask `reader()` for those.
    public func localRepository() throws(CommandError) -> PolicyRepository {
        PolicyRepository(database: try localDatabase())
    }

    /// This host's own event log (on a fleet too: docs/CLI.md "A fleet").
    public func localEvents() throws(CommandError) -> EventStore { EventStore(database: try localDatabase()) }

    /// The fleet's store, logged in as `fleet.json` says (`timeout` for a
    /// caller that must not wait long, as a TAB completion); nil on a
    /// state directory of its own.
    public func fleetRepository(timeout: Double? = nil) throws(CommandError) -> FleetRepository? {
        guard let fleet else { return nil }
        return FleetRepository(database: try FleetDatabase(fleet, timeout: timeout), replicas: state)
    }

    /// The fleet's store for a change, which this host's log records too
    /// (`FleetStoreWithLocalLog`); nil on a state directory of its own.
    public func fleetRepositoryForChange() throws(CommandError) -> FleetStoreWithLocalLog? {
        guard let fleet = try fleetRepository() else { return nil }
        return FleetStoreWithLocalLog(fleet: fleet, log: try localEvents())
    }

    /// The fleet's file-coordination claims, or exit 78 off a fleet.
    public func fleetClaims() throws(CommandError) -> FleetClaims {
        FleetClaims(database: try FleetDatabase(try requireFleet()))
    }

    /// The isolation layer for reading apps, providers and grants.
    public func reader(timeout: Double? = nil) throws(CommandError) -> any IsolationStore {
        if let fleet = try fleetRepository(timeout: timeout) { return fleet }
        return try localRepository()
    }

    /// The isolation layer for a change (the caller checks who may make it).
    public func store() throws(CommandError) -> any IsolationStore {
        if let fleet = try fleetRepositoryForChange() { return fleet }
        return try localRepository()
    }

    // The rules that differ on a fleet.

    /// The locator that finds a moved item again by its file identity on
    /// the SQLite file (SPEC S1), over `local` when the caller holds that
    /// repository; nil on a fleet, whose store assigns item identifiers.
    public func locator(over local: PolicyRepository? = nil) throws(CommandError) -> ItemLocator? {
        guard !isFleet else { return nil }
        if let local { return ItemLocator(repository: local) }
        return ItemLocator(repository: try localRepository())
    }

    /// A fleet's host starts built-in provider extensions only: one the
    /// fleet's store names would run on every host (SECURITY.md).
    public var builtInExtensionsOnly: Bool { isFleet }

    /// On a fleet an app is added from any host (`fleet add-app`), so this
    /// host's daemon makes its container when its policy first shows it;
    /// on a state directory of its own, `app add` made it.
    public var containersFollowPolicy: Bool { isFleet }

    /// Refuses, with exit 78, what works on the SQLite store alone (test
    /// runs and chaos) on a fleet, rather than serve it from a file no other
    /// host, and no grant of the fleet's, would see (SPEC S44).
    public static func refuseFleet(_ state: StateDirectory, _ action: String) throws(CommandError) {
        guard isFleet(state) else { return }
        throw CommandError(
            .badState,
            "cannot \(action) here: \(state.path) keeps its isolation layer in the fleet's PostgreSQL database, and this works on the SQLite store alone (see docs/CLI.md, \"A fleet\")"
        )
    }

    /// The fleet's configuration, or exit 78 saying how to join one.
    public func requireFleet() throws(CommandError) -> FleetConfiguration {
        guard let fleet else {
            throw CommandError(
                .badState,
                "\(state.path) is not on a fleet database; run `scopefs --state \(state.path) init --database postgresql://...` first"
            )
        }
        return fleet
    }
}
