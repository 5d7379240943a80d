import CommandErrors
import Foundation
import Policy

/// The isolation layer as the daemon and the commands use it, whichever
/// store holds it (docs/DECISIONS.md, decision 59): the embedded SQLite
/// file (`PolicyRepository`, SPEC S13) or a fleet's PostgreSQL database
/// (`FleetRepository`, SPEC S44). Both answer the same calls with the same
/// results and the same errors (exit codes, SPEC S34), which one body of
/// tests checks against each (Tests/StoreContractTests).
///
/// Every call is one transaction: a change is committed when it returns,
/// or it throws and nothing changed. A grant, revoke, restore or forget
/// writes its event in the same transaction (SPEC S29). The daemon does
/// not call a store on the FUSE path: it serves the `PolicySnapshot` it
/// read last (SPEC S36).
public protocol IsolationStore: Sendable {
    /// The policy and the version it reflects, read in one transaction:
    /// a change committed later has a later version.
    func versionedSnapshot(generation: UInt64) throws(CommandError) -> (snapshot: PolicySnapshot, version: Int64)

    /// Moves with every committed change of apps, providers, items or
    /// grants, and with nothing else (events do not move it).
    func policyVersion() throws(CommandError) -> Int64

    /// What changed since `version` (one this store gave), with the version
    /// it brings the policy to, read in one transaction: applied to the
    /// snapshot of `version` (`PolicySnapshot.applying`) it gives the
    /// snapshot of that version. Nil when the store's change log does not
    /// reach back to `version`, or apps or providers changed: then read the
    /// whole `versionedSnapshot`.
    func changes(since version: Int64) throws(CommandError) -> PolicyChanges?

    func addProvider(id: ProviderID, directory: String, name: String?, extension spec: ProviderExtensionSpec?)
        throws(CommandError) -> Provider
    func providers() throws(CommandError) -> [Provider]
    func removeProvider(id: ProviderID) throws(CommandError)

    func addApp(id: AppID, name: String?) throws(CommandError) -> App
    func apps() throws(CommandError) -> [App]
    func setDownloads(_ policy: DownloadPolicy, of id: AppID) throws(CommandError)
    func removeApp(id: AppID) throws(CommandError)

    /// Grants an item, or updates the app's grant of it as `update` says
    /// (one grant per item per app, SPEC S17). A provider's root folder is
    /// granted only with `wholeProvider`.
    func grant(
        app: AppID, provider: ProviderID, path: String, access: Access, session: Bool, update: GrantUpdate,
        wholeProvider: Bool
    ) throws(CommandError) -> GrantChange

    /// Grants `app` many items in one transaction (`grant --from FILE`), each
    /// as the plain `grant` does (persistent; an existing grant of the item
    /// is replaced): all of them, or none when one is refused. The error
    /// names that item by its `origin` and has the exit code a grant of it
    /// alone would have (SPEC S34). An item named twice is granted once.
    /// Returns one change per distinct item, in the order given.
    func grantAll(app: AppID, items: [GrantItem], access: Access, wholeProvider: Bool) throws(CommandError)
        -> [GrantChange]

    /// Removes one grant or all of an app's for good; returns them.
    /// `sessionOnly`: only session grants, and none is not an error.
    func forget(app: AppID, grant: GrantID?, sessionOnly: Bool, reason: String) throws(CommandError) -> [Grant]

    /// Sets the state of one grant or of all of an app's; returns those
    /// whose state changed. `requester` is the process the event names.
    func setState(_ state: GrantState, app: AppID, grant: GrantID?, requester: Int32) throws(CommandError) -> [Grant]

    /// An app's grants, or every app's (nil).
    func grants(app: AppID?) throws(CommandError) -> [Grant]

    /// The identifier of the item at `path` (recorded now if it is new).
    func itemIdentifier(provider: ProviderID, path: String) throws(CommandError) -> ItemIdentifier

    /// Where one recorded item is, or nil if none has that identifier: a
    /// bookmark's item that the served policy does not hold yet (recorded
    /// for the bookmark, inside a folder grant).
    func itemLocation(_ item: ItemIdentifier) throws(CommandError) -> ItemLocation?
}

// Shorter forms of the requirements. The stores implement only the full
// forms (no default arguments), so a call never has two candidates.
extension IsolationStore {
    public func snapshot(generation: UInt64) throws(CommandError) -> PolicySnapshot {
        try versionedSnapshot(generation: generation).snapshot
    }

    public func addProvider(id: ProviderID, directory: String, name: String?) throws(CommandError) -> Provider {
        try addProvider(id: id, directory: directory, name: name, extension: nil)
    }

    /// `scopefs grant`'s plain form: replaces, the root only as a whole provider.
    public func grant(app: AppID, provider: ProviderID, path: String, access: Access) throws(CommandError) -> Grant {
        try grant(
            app: app, provider: provider, path: path, access: access, session: false, update: .replace,
            wholeProvider: true
        ).grant
    }

    public func grant(app: AppID, provider: ProviderID, path: String, access: Access, wholeProvider: Bool)
        throws(CommandError) -> GrantChange
    {
        try grant(
            app: app, provider: provider, path: path, access: access, session: false, update: .replace,
            wholeProvider: wholeProvider)
    }

    public func grant(
        app: AppID, provider: ProviderID, path: String, access: Access, session: Bool, wholeProvider: Bool
    ) throws(CommandError) -> GrantChange {
        try grant(
            app: app, provider: provider, path: path, access: access, session: session, update: .replace,
            wholeProvider: wholeProvider)
    }

    public func grant(
        app: AppID, provider: ProviderID, path: String, access: Access, update: GrantUpdate, wholeProvider: Bool
    ) throws(CommandError) -> GrantChange {
        try grant(
            app: app, provider: provider, path: path, access: access, session: false, update: update,
            wholeProvider: wholeProvider)
    }

    @discardableResult
    public func forget(app: AppID, grant: GrantID?) throws(CommandError) -> [Grant] {
        try forget(app: app, grant: grant, sessionOnly: false, reason: "forget")
    }

    @discardableResult
    public func forget(app: AppID, grant: GrantID?, sessionOnly: Bool) throws(CommandError) -> [Grant] {
        try forget(app: app, grant: grant, sessionOnly: sessionOnly, reason: "forget")
    }

    @discardableResult
    public func setState(_ state: GrantState, app: AppID, grant: GrantID?) throws(CommandError) -> [Grant] {
        try setState(state, app: app, grant: grant, requester: getpid())
    }
}

/// One item of a bulk grant (`IsolationStore.grantAll`).
public struct GrantItem: Sendable, Hashable {
    public var provider: ProviderID
    public var path: String
    /// Where the item was asked for ("items.txt line 12"), named in its error.
    public var origin: String

    public init(provider: ProviderID, path: String, origin: String) {
        self.provider = provider
        self.path = path
        self.origin = origin
    }
}

/// What both stores check of a request before they touch their tables,
/// so that they refuse the same input with the same error.
public enum IsolationRequest {
    /// The provider-relative path of a grant request, normalised; refuses
    /// an escape (65) and, without `wholeProvider`, the provider's root (64).
    public static func grantPath(_ rawPath: String, provider: ProviderID, wholeProvider: Bool) throws(CommandError)
        -> String
    {
        guard let path = RelativePath.normalize(rawPath) else {
            throw CommandError(.badData, "path \(rawPath) leaves provider \(provider) (no absolute paths, no ..)")
        }
        if path.isEmpty && !wholeProvider {
            throw CommandError(
                .usage,
                "\(provider):\(rawPath) is the provider's root: it would grant every file of \(provider); pass --whole-provider if that is meant, or name a folder inside it"
            )
        }
        return path
    }

    /// The items of a bulk grant with their normalised paths, each checked
    /// as `grantPath` checks one, and each distinct item once (the first
    /// time it is named): what both stores' `grantAll` start from.
    public static func grantPaths(_ items: [GrantItem], wholeProvider: Bool) throws(CommandError)
        -> [(item: GrantItem, path: String)]
    {
        var seen = Set<String>()  // PROVIDER:PATH (a provider ID has no colon)
        var distinct: [(item: GrantItem, path: String)] = []
        for item in items {
            let path: String
            do throws(CommandError) {
                path = try grantPath(item.path, provider: item.provider, wholeProvider: wholeProvider)
            } catch {
                throw refusal(error, of: item)
            }
            if seen.insert("\(item.provider):\(path)").inserted { distinct.append((item, path)) }
        }
        return distinct
    }

    /// Runs `body` for one item of a bulk grant (inside a store's
    /// transaction): a refusal names the item and says that nothing was
    /// granted, since the transaction rolls back.
    public static func naming<T>(_ item: GrantItem, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as CommandError {
            throw refusal(error, of: item)
        }
    }

    /// A bulk grant's refusal of one item: its error, naming where it was asked for.
    public static func refusal(_ error: CommandError, of item: GrantItem) -> CommandError {
        CommandError(error.kind, "\(item.origin): \(error.message); nothing was granted")
    }

    /// A provider's folder as stored: absolute, symbolic links resolved;
    /// it must exist and be a folder (66).
    public static func providerDirectory(_ directory: String) throws(CommandError) -> String {
        let absolute = directory.hasPrefix("/") ? directory : FileManager.default.currentDirectoryPath + "/" + directory
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: absolute, isDirectory: &isDirectory) else {
            throw CommandError(.noInput, "provider directory \(absolute) does not exist")
        }
        guard isDirectory.boolValue else {
            throw CommandError(.noInput, "provider directory \(absolute) is not a directory")
        }
        return URL(fileURLWithPath: absolute).resolvingSymlinksInPath().path
    }

    /// The answer to a grant id the app does not have.
    public static func noSuchGrant(_ grant: GrantID, of app: AppID) -> CommandError {
        CommandError(.unknown, "app \(app) has no grant \(grant); see `scopefs privacy \(app)`")
    }

    public static func appExists(_ id: AppID) -> CommandError {
        CommandError(.alreadyExists, "app \(id) already exists; remove it first or pick another ID")
    }

    public static func providerExists(_ id: ProviderID) -> CommandError {
        CommandError(.alreadyExists, "provider \(id) already exists; remove it first or pick another ID")
    }
}
