import CommandErrors
import Control
import Foundation
import HostText
import Policy
import PolicyStore
import Synchronization

/// Where the portal reads the isolation layer, and how its layout learns
/// that the policy changed (decision 65, issue 52): the version the daemon
/// serving the state directory has installed, read from the page it
/// publishes (`ServedPolicyPage`: no round trip per check, issue 52), or
/// where no daemon vouches for it, the store's own version (the SQLite
/// file's row, the fleet database's).
public struct PortalPolicy: Sendable {
    /// Grants, apps and providers are read here; changes go through the
    /// daemon (`ControlClient.policy`), or here when none serves.
    public let store: any IsolationStore
    /// The policy version to check the cached grants against; nil when
    /// every grant is denied (the daemon fails closed, SPEC S44).
    public let version: @Sendable () throws(CommandError) -> Int64?

    public init(store: any IsolationStore, version: @escaping @Sendable () throws(CommandError) -> Int64?) {
        self.store = store
        self.version = version
    }

    /// The version the daemon serving `state` publishes, or `storeVersion`
    /// when the page cannot vouch for one (no daemon, nothing published
    /// yet, a change the daemon has not seen written to the store).
    public static func served(
        state: StateDirectory, store: any IsolationStore,
        storeVersion: @escaping @Sendable () throws(CommandError) -> Int64
    ) -> PortalPolicy {
        let page = ServedPolicyPage.Reader(state: state)
        return PortalPolicy(store: store) { () throws(CommandError) -> Int64? in
            switch page.served() {
            case .version(let version): return version
            case .failedClosed: return nil
            case .unknown: return try storeVersion()
            }
        }
    }

    /// The SQLite store of a state directory of its own (which store it
    /// is, `IsolationBackend` decides: issue 51).
    public static func local(_ repository: PolicyRepository, state: StateDirectory) -> PortalPolicy {
        served(state: state, store: repository) { () throws(CommandError) in try repository.policyVersion() }
    }
}

/// The portal's permissions as ScopeFS grants, changed through the same
/// path as `scopefs grant`/`revoke`/`forget` (`ControlClient.policy`: the
/// daemon's control socket when a daemon serves the state directory, so
/// revocation cuts open descriptors at once; the store otherwise).
final class DocumentGrants: Sendable {
    let state: StateDirectory
    /// One connection for the portal's reads; changes go through `policy`.
    let store: any IsolationStore
    private let version: @Sendable () throws(CommandError) -> Int64?
    /// Every grant, and the active ones' access by item, as of a policy
    /// version: the layout asks on each lookup and read, and only a changed
    /// version costs more than the version's query (which stays per read:
    /// a revoke must cut the next read, S13).
    private let cached = Mutex<Snapshot?>(nil)

    private struct Snapshot {
        var version: Int64
        var grants: [Grant]
        /// Each app's grant of each item (`itemKey`), an active one first.
        var byItem: [String: [AppID: Grant]]
        /// What the access rule gives each app through it (absent: nothing).
        var activeAccess: [String: [AppID: Access]]
    }

    /// What the one access rule (SPEC S47, `Decision.permit`) lets `app`
    /// do with a document through `grant`: read, read-write, or nothing.
    /// A portal app holds no security scope (Flatpak's model), so none is
    /// asked; the layout's decisions do not depend on which of the app's
    /// processes asks.
    static func access(_ grant: Grant?, app: AppID, route: Route = .name) -> Access? {
        let caller = Caller.anyProcess(of: app)
        let coverage: Coverage = grant.map { .granted($0) } ?? .hidden
        guard case .success = Decision.permit(.read, coverage: coverage, caller: caller, route: route) else {
            return nil
        }
        if case .success = Decision.permit(.write, coverage: coverage, caller: caller, route: route) {
            return .readWrite
        }
        return .read
    }

    /// Whether a descriptor `app` opened for `access` may still be used,
    /// by the rule every ScopeFS descriptor is held to (`permitDescriptor`).
    static func descriptorAllowed(_ access: DescriptorAccess, grant: Grant?, app: AppID) -> Bool {
        let caller = Caller.anyProcess(of: app)
        let coverage: Coverage = grant.map { .granted($0) } ?? .hidden
        if case .success = Decision.permitDescriptor(access, coverage: coverage, openedThrough: nil, caller: caller) {
            return true
        }
        return false
    }

    /// Whether `app` may make, write and rename over the document a
    /// temporary file beside `grant`'s file (SPEC S48): the one rule asked
    /// for the temporary's coverage, which allows what writing the file
    /// allows.
    static func mayReplace(_ grant: Grant?, app: AppID) -> Bool {
        guard let grant else { return false }
        let caller = Caller.anyProcess(of: app)
        if case .success = Decision.permit(.write, coverage: .replacing(grant), caller: caller, route: .name) {
            return true
        }
        return false
    }

    /// Whether a descriptor of `app`'s temporary beside `grant`'s file may
    /// still be used (a revoke or a narrowing cuts it, as the document's).
    static func temporaryDescriptorAllowed(_ access: DescriptorAccess, grant: Grant?, app: AppID) -> Bool {
        let caller = Caller.anyProcess(of: app)
        let coverage: Coverage = grant.map { .replacing($0) } ?? .hidden
        if case .success = Decision.permitDescriptor(access, coverage: coverage, openedThrough: nil, caller: caller) {
            return true
        }
        return false
    }

    /// The document's item is now the file at its path (a temporary was
    /// renamed over it, or the app made it): its identifier, grants,
    /// references and bookmarks follow the new file (SPEC S48). On a
    /// fleet, whose items only the owner's role records, the item locator
    /// of the next `scopefs` change finds it.
    func itemReplaced(_ document: PortalDocument) {
        fileReplaced(provider: document.provider, path: document.relativePath)
    }

    /// The item recorded at `path` (a document's, or one inside a folder
    /// document that a rename inside it replaced) is now the file there.
    func fileReplaced(provider: ProviderID, path: String) {
        guard let repository = store as? PolicyRepository else { return }
        do {
            try repository.adoptFile(provider: provider, path: path)
        } catch {
            // The locator finds the new file later; the save itself stands.
        }
    }

    /// The key of an item in `activeAccess`.
    static func itemKey(provider: ProviderID, relativePath: String) -> String {
        "\(provider)\u{0}\(relativePath)"
    }

    init(state: StateDirectory, policy: PortalPolicy) {
        self.state = state
        self.store = policy.store
        self.version = policy.version
    }

    /// Every grant of every app, current as of this call.
    func allGrants() throws(CommandError) -> [Grant] { try current().grants }

    /// The apps' access to each item (`itemKey`) through active grants.
    func activeAccess() throws(CommandError) -> [String: [AppID: Access]] { try current().activeAccess }

    /// `app`'s grant of the item `key` (an active one first), if any.
    func grant(_ key: String, app: AppID) throws(CommandError) -> Grant? { try current().byItem[key]?[app] }

    private func current() throws(CommandError) -> Snapshot {
        // Failed closed: no app has any document until the policy is back.
        guard let version = try version() else {
            return Snapshot(version: -1, grants: [], byItem: [:], activeAccess: [:])
        }
        if let hit = cached.withLock({ $0 }), hit.version == version { return hit }
        let grants = try store.grants(app: nil)
        var byItem: [String: [AppID: Grant]] = [:]
        for grant in grants {
            let key = Self.itemKey(provider: grant.provider, relativePath: grant.relativePath)
            if let kept = byItem[key]?[grant.app], kept.state == .active { continue }
            byItem[key, default: [:]][grant.app] = grant
        }
        let active = byItem.mapValues { apps in
            apps.compactMapValues { grant in Self.access(grant, app: grant.app) }
        }.filter { !$0.value.isEmpty }
        let snapshot = Snapshot(version: version, grants: grants, byItem: byItem, activeAccess: active)
        cached.withLock { $0 = snapshot }
        return snapshot
    }

    private func policy(_ command: ControlCommand) throws(PortalError) -> ControlResponse {
        do {
            return try ControlClient.policy(command, state: state) { () throws(CommandError) in store }
        } catch {
            throw .failed(error.message)
        }
    }

    /// The local provider whose folder holds `hostPath`, and the path
    /// inside it: the deepest one when providers nest. Extension providers
    /// are not host folders of the owner's and hold no exported file.
    func locate(_ hostPath: String) throws(PortalError) -> (provider: ProviderID, relativePath: String) {
        let providers: [Provider]
        do { providers = try store.providers() } catch { throw .failed(error.message) }
        let holding = providers.filter { provider in
            provider.extension == nil
                && (hostPath.sameHostName(as: provider.directory) || hostPath.hasHostPrefix(provider.directory + "/")
                    || provider.directory == "/")
        }
        guard let provider = holding.max(by: { $0.directory.count < $1.directory.count }) else {
            throw .notAllowed(
                "\(hostPath) is in no ScopeFS provider: add one for its folder (`scopefs provider add`) to export it")
        }
        // By bytes: the prefix was compared as bytes.
        let rest = hostPath.utf8.dropFirst(provider.directory.utf8.count).drop { $0 == UInt8(ascii: "/") }
        return (provider.id, HostName.string(rest))
    }

    /// The host file of a local provider's item; extension providers'
    /// items have none the layout could serve.
    func hostPath(provider id: ProviderID, relativePath: String) throws(PortalError) -> String {
        let provider: Provider?
        do { provider = try store.providers().first { $0.id == id } } catch { throw .failed(error.message) }
        guard let provider else { throw .notFound("no provider \(id)") }
        guard provider.extension == nil else {
            throw .notAllowed("\(id) is an extension provider: the document portal exports local providers' files only")
        }
        if relativePath.isEmpty { return provider.directory }
        return (provider.directory == "/" ? "" : provider.directory) + "/" + relativePath
    }

    /// Whether the one rule (SPEC S47, `Decision.permitDescriptor`) lets
    /// `app` use a descriptor of the provider item for `access` now,
    /// through whichever of its active grants covers the item (a folder
    /// grant covers what is inside). As for documents, a portal app holds
    /// no security scope.
    func permitsDescriptor(
        _ access: DescriptorAccess, app: AppID, provider: ProviderID, path: String
    ) throws(PortalError) -> Bool {
        let grants: [Grant]
        do { grants = try allGrants().filter { $0.app == app } } catch { throw .failed(error.message) }
        let snapshot = PolicySnapshot(generation: 0, apps: [], providers: [], grants: grants)
        let coverage = snapshot.coverage(app: app, provider: provider, path: path)
        if case .success = Decision.permitDescriptor(
            access, coverage: coverage, openedThrough: nil, caller: .anyProcess(of: app))
        {
            return true
        }
        return false
    }

    /// Every grant of the document's item, whatever its state.
    func grants(of document: PortalDocument) throws(PortalError) -> [Grant] {
        do {
            return try allGrants().filter {
                $0.provider == document.provider && $0.relativePath == document.relativePath
            }
        } catch {
            throw .failed(error.message)
        }
    }

    /// Adds `app` to ScopeFS's apps if it is not there yet: Flatpak app
    /// ids named by the portal become ScopeFS apps.
    func register(_ app: AppID) throws(PortalError) {
        do {
            if try !store.apps().contains(where: { $0.id == app }) {
                _ = try store.addApp(id: app, name: nil)
            }
        } catch {
            throw .failed(error.message)
        }
    }

    /// Grants `app` the document (`readWrite`: also write), registering
    /// the app first if ScopeFS does not know it yet.
    func grant(_ document: PortalDocument, to app: AppID, access: Access) throws(PortalError) {
        try register(app)
        let order = GrantOrder(
            app: app, provider: document.provider, path: document.relativePath, access: access,
            session: !document.persistent, wholeProvider: true)
        _ = try policy(.grant(order))
    }

    /// Revokes `app`'s grant of the document (kept, revoked: `scopefs
    /// restore` brings it back), or narrows it to read-only.
    func revoke(_ document: PortalDocument, from app: AppID, keepRead: Bool) throws(PortalError) {
        for grant in try grants(of: document) where grant.app == app && grant.state == .active {
            if keepRead {
                try self.grant(document, to: app, access: .read)
            } else {
                _ = try policy(.revoke(app: app, grant: grant.id))
            }
        }
    }

    /// Removes the document's session grants for good: those a transient
    /// document of an earlier portal gave, which ended with it.
    func forgetSessions(_ document: PortalDocument) throws(PortalError) {
        for grant in try grants(of: document) where grant.isSession {
            _ = try policy(.forget(app: grant.app, grant: grant.id))
        }
    }

    /// Removes every grant of the document for good (the portal's Delete).
    func forgetAll(_ document: PortalDocument) throws(PortalError) {
        for grant in try grants(of: document) {
            _ = try policy(.forget(app: grant.app, grant: grant.id))
        }
    }
}
