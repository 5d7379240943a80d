/// An immutable, in-memory index of the isolation layer (SPEC S36): every
/// access decision is answered from it, never from the database. The daemon
/// builds a new snapshot when the database changes and swaps it in whole.
public struct PolicySnapshot: Sendable {
    /// Increases with every snapshot the daemon installs; caches keyed by it
    /// (e.g. a node's coverage) are invalidated by a new snapshot.
    public let generation: UInt64
    public let apps: [AppID: App]
    public let providers: [ProviderID: Provider]
    public let grantsByID: [GrantID: Grant]
    /// Every known item's current location (references resolve through it).
    public let items: [ItemIdentifier: ItemLocation]
    private let views: [AppID: [ProviderID: ProviderView]]

    public init(
        generation: UInt64, apps: [App], providers: [Provider], grants: [Grant],
        items: [ItemIdentifier: ItemLocation] = [:]
    ) {
        self.generation = generation
        self.items = items
        self.apps = Dictionary(apps.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        self.providers = Dictionary(providers.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        self.grantsByID = Dictionary(grants.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var views: [AppID: [ProviderID: ProviderView]] = [:]
        for grant in grants {
            views[grant.app, default: [:]][grant.provider, default: ProviderView()].add(grant)
        }
        self.views = views
    }

    public static let empty = PolicySnapshot(generation: 0, apps: [], providers: [], grants: [])

    /// Providers in which the app has at least one grant, active or revoked
    /// (SPEC S2: nothing else appears under `Providers/`).
    public func visibleProviders(of app: AppID) -> [ProviderID] {
        (views[app]?.keys).map { $0.sorted() } ?? []
    }

    /// How a provider item relates to the app's grants.
    public func coverage(app: AppID, provider: ProviderID, path: String) -> Coverage {
        guard let view = views[app]?[provider] else { return .hidden }
        return view.coverage(of: path)
    }

    /// Names of the children of a bare ancestor folder that lead to granted
    /// items (SPEC S2), or nil when `path` is not such a folder.
    public func childrenLeadingToGrants(app: AppID, provider: ProviderID, path: String) -> Set<String>? {
        views[app]?[provider]?.ancestorChildren[path]
    }

    public func grants(of app: AppID) -> [Grant] {
        grantsByID.values.filter { $0.app == app }.sorted { $0.id < $1.id }
    }
}

/// Where an item stands with respect to one app's grants.
public enum Coverage: Sendable, Equatable {
    /// Not granted and not on the way to a grant: invisible (ENOENT).
    case hidden
    /// A bare folder on the way to granted items: listed, but only the
    /// children that lead to grants are shown.
    case ancestor
    /// Covered by this grant, the nearest one at or above the item.
    case granted(Grant)
}

/// One app's grants in one provider, indexed by path.
struct ProviderView: Sendable {
    private(set) var grantsByPath: [String: Grant] = [:]
    private(set) var ancestorChildren: [String: Set<String>] = [:]

    mutating func add(_ grant: Grant) {
        grantsByPath[grant.relativePath] = grant
        var child = grant.relativePath
        while let parent = RelativePath.parent(of: child) {
            ancestorChildren[parent, default: []].insert(RelativePath.lastComponent(of: child))
            child = parent
        }
    }

    func coverage(of path: String) -> Coverage {
        var candidate: String? = path
        while let current = candidate {
            if let grant = grantsByPath[current] { return .granted(grant) }
            candidate = RelativePath.parent(of: current)
        }
        return ancestorChildren[path] == nil ? .hidden : .ancestor
    }
}
