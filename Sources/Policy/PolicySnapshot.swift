import HostText

/// An immutable, in-memory index of the isolation layer (SPEC S36): every
/// access decision is answered from it, never from the database. The daemon
/// builds a new snapshot when the database changes and swaps it in whole:
/// from the whole policy, or from the one it serves and what changed
/// (`applying`), which rebuilds the indexes of the apps the change touched
/// and shares the rest.
public struct PolicySnapshot: Sendable {
    /// Increases with every snapshot the daemon installs; caches keyed by it
    /// (e.g. a node's coverage) are invalidated by a new snapshot.
    public let generation: UInt64
    public let apps: [AppID: App]
    public let providers: [ProviderID: Provider]
    public let grantsByID: GrantTable
    /// Every known item's current location (references resolve through it).
    public let items: [ItemIdentifier: ItemLocation]
    private let views: [AppID: [ProviderID: ProviderView]]
    /// By app, for each grant that has any: the app's other grants of the
    /// same provider at or above its item, nearest first (Apple's rule: a
    /// started folder scope covers everything below it, whatever deeper
    /// grants exist). By app, so that a change copies one app's entries.
    private let enclosing: [AppID: [GrantID: [Grant]]]
    /// The items each app holds a grant on, active or revoked: the only
    /// items its reference documents answer for.
    private let grantedItems: [AppID: Set<ProviderItem>]
    /// Each app's grants, in the order they were made (for the apps that
    /// hold any): what `applying` rebuilds an app's indexes from.
    private let grantIDsByApp: [AppID: [GrantID]]
    /// When `applying` made this snapshot: the generation it was made from
    /// and the grants the change named (`grantIDsChanged(since:)`).
    private let derivation: Derivation?

    private struct ProviderItem: Hashable, Sendable {
        var provider: ProviderID
        var item: ItemIdentifier
    }

    private struct Derivation: Sendable {
        var base: UInt64
        var grants: Set<GrantID>
    }

    /// One app's indexes, built from its grants.
    private struct AppIndex {
        var views: [ProviderID: ProviderView] = [:]
        var enclosing: [GrantID: [Grant]] = [:]
        var grantedItems = Set<ProviderItem>()

        /// `grants`: one app's, in the order they were made.
        init(_ grants: [Grant]) {
            for grant in grants {
                views[grant.provider, default: ProviderView()].add(grant)
            }
            for grant in grants {
                let above = views[grant.provider]?.grants(above: grant.relativePath) ?? []
                if !above.isEmpty { enclosing[grant.id] = above }
            }
            grantedItems = Set(grants.map { ProviderItem(provider: $0.provider, item: $0.item) })
        }
    }

    /// The indexes of every app.
    private struct Indexes {
        var views: [AppID: [ProviderID: ProviderView]] = [:]
        var enclosing: [AppID: [GrantID: [Grant]]] = [:]
        var grantedItems: [AppID: Set<ProviderItem>] = [:]
        var grantIDsByApp: [AppID: [GrantID]] = [:]

        /// Replaces `app`'s indexes by those of `grants` (its grants in the
        /// order they were made; none: the app holds no grant).
        mutating func set(_ app: AppID, _ grants: [Grant]) {
            guard !grants.isEmpty else {
                views[app] = nil
                enclosing[app] = nil
                grantedItems[app] = nil
                grantIDsByApp[app] = nil
                return
            }
            let index = AppIndex(grants)
            views[app] = index.views
            enclosing[app] = index.enclosing.isEmpty ? nil : index.enclosing
            grantedItems[app] = index.grantedItems
            grantIDsByApp[app] = grants.map(\.id)
        }
    }

    public init(
        generation: UInt64, apps: [App], providers: [Provider], grants: [Grant],
        items: [ItemIdentifier: ItemLocation] = [:]
    ) {
        var indexes = Indexes()
        for (app, grants) in Dictionary(grouping: grants, by: \.app) {
            indexes.set(app, grants.sorted { $0.id < $1.id })
        }
        self.init(
            generation: generation, apps: Dictionary(apps.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a }),
            providers: Dictionary(providers.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a }),
            grantsByID: GrantTable(grants), items: items, indexes: indexes, derivation: nil)
    }

    private init(
        generation: UInt64, apps: [AppID: App], providers: [ProviderID: Provider], grantsByID: GrantTable,
        items: [ItemIdentifier: ItemLocation], indexes: Indexes, derivation: Derivation?
    ) {
        self.generation = generation
        self.apps = apps
        self.providers = providers
        self.grantsByID = grantsByID
        self.items = items
        views = indexes.views
        enclosing = indexes.enclosing
        grantedItems = indexes.grantedItems
        grantIDsByApp = indexes.grantIDsByApp
        self.derivation = derivation
    }

    /// This snapshot with `changes` applied: what the whole policy at
    /// `changes.version` would give, built in time proportional to the
    /// grants of the apps the change touched (plus a copy of the grant
    /// table's shards it touches), not to every grant. The indexes of other
    /// apps are shared.
    public func applying(_ changes: PolicyChanges, generation: UInt64) -> PolicySnapshot {
        var grantsByID = self.grantsByID
        var removed: [AppID: Set<GrantID>] = [:]
        var added: [AppID: [GrantID]] = [:]
        var touched = Set<AppID>()
        for id in changes.removedGrants {
            guard let old = grantsByID[id] else { continue }
            grantsByID[id] = nil
            removed[old.app, default: []].insert(id)
            touched.insert(old.app)
        }
        for grant in changes.grants {
            let old = grantsByID[grant.id]
            grantsByID[grant.id] = grant
            if let old, old.app != grant.app { removed[old.app, default: []].insert(grant.id) }
            if old == nil || old?.app != grant.app { added[grant.app, default: []].append(grant.id) }
            touched.formUnion([grant.app, old?.app].compactMap { $0 })
        }
        var items = self.items
        if !changes.removedItems.isEmpty || !changes.items.isEmpty {
            for id in changes.removedItems { items[id] = nil }
            items.merge(changes.items) { _, new in new }
        }
        var indexes = Indexes(
            views: views, enclosing: enclosing, grantedItems: grantedItems, grantIDsByApp: grantIDsByApp)
        for app in touched {
            let gone = removed[app] ?? []
            let ids = ((grantIDsByApp[app] ?? []).filter { !gone.contains($0) } + (added[app] ?? [])).sorted()
            indexes.set(app, ids.compactMap { grantsByID[$0] })
        }
        return PolicySnapshot(
            generation: generation, apps: apps, providers: providers, grantsByID: grantsByID, items: items,
            indexes: indexes,
            derivation: Derivation(
                base: self.generation, grants: changes.removedGrants.union(changes.grants.map(\.id))))
    }

    /// The grants that may differ between `previous` and this snapshot, by
    /// id, in order: the ones the change named when `applying` made this
    /// snapshot from `previous`, else every id of either. Who compares two
    /// snapshots grant by grant (cache drops, notices) looks at these only.
    public func grantIDsChanged(since previous: PolicySnapshot) -> [GrantID] {
        if let derivation, derivation.base == previous.generation { return derivation.grants.sorted() }
        return Set(previous.grantsByID.keys).union(grantsByID.keys).sorted()
    }

    /// Where the item a reference document of `app` names is now — only
    /// when the app holds a grant on that very item (SPEC S22, S23, S28).
    /// A stub is a file the app can write itself: answering for any item it
    /// names would tell the app where another app's item, or its own after
    /// `forget` and a move on the host, is (issue 28 finding 3). The daemon
    /// makes references only for items it grants, so it answers for exactly
    /// the references it made, while their grants last.
    public func referencedLocation(app: AppID, provider: ProviderID, item: ItemIdentifier) -> ItemLocation? {
        guard grantedItems[app]?.contains(ProviderItem(provider: provider, item: item)) == true,
            let location = items[item], location.provider == provider
        else { return nil }
        return location
    }

    /// The app's grants whose folder holds `grant`'s item, nearest first:
    /// each covers the item too (SPEC S9, docs/API.md "Which grant covers
    /// an item"). Empty for most grants.
    public func enclosingGrants(of grant: GrantID) -> [Grant] {
        grantsByID[grant].flatMap { enclosing[$0.app]?[grant] } ?? []
    }

    /// Whether an open descriptor (or a mapping of it) of an item with
    /// `coverage` may still be used for `access`: the one access rule
    /// (`Decision.permit`) asked through the descriptor, with this
    /// snapshot's grants (SPEC S14, S47). `openedThrough`: the grant the
    /// descriptor was opened through (`Decision.permitDescriptor`). The
    /// daemon's descriptor operations ask this, the policy tests too.
    public func permitDescriptor(
        _ access: DescriptorAccess, coverage: Coverage, openedThrough: GrantID?, caller: Caller
    ) -> Result<Grant?, Denial> {
        Decision.permitDescriptor(
            access, coverage: coverage, openedThrough: openedThrough.flatMap { grantsByID[$0] }, caller: caller,
            enclosing: { enclosingGrants(of: $0.id) })
    }

    public static let empty = PolicySnapshot(generation: 0, apps: [], providers: [], grants: [])

    /// Providers in which the app has at least one grant, active or revoked
    /// (SPEC S2: nothing else appears under `Providers/`).
    public func visibleProviders(of app: AppID) -> [ProviderID] {
        (views[app]?.keys).map { $0.sorted() } ?? []
    }

    /// Whether `other` has the same apps, each shown the same providers:
    /// then no app's layout (`Providers/<provider>`) changed between them.
    public func hasSameLayout(as other: PolicySnapshot) -> Bool {
        Set(apps.keys) == Set(other.apps.keys)
            && views.mapValues { Set($0.keys) } == other.views.mapValues { Set($0.keys) }
    }

    /// Whether the app still has the provider's view (some grant in it).
    public func showsProvider(_ provider: ProviderID, to app: AppID) -> Bool {
        views[app]?[provider] != nil
    }

    /// How a provider item relates to the app's grants.
    public func coverage(app: AppID, provider: ProviderID, path: String) -> Coverage {
        views[app]?[provider]?.coverage(of: path) ?? .hidden
    }

    /// Where the item at `path` stands in the app's grants of the provider.
    public func position(app: AppID, provider: ProviderID, path: String) -> CoveragePosition {
        views[app]?[provider]?.position(of: path) ?? .outside
    }

    /// Where the child `name` of the item at `parent` stands: one step from
    /// its parent, with no path built. `parent` must come from this snapshot
    /// (the same generation): it names a node of this snapshot's trie.
    public func position(app: AppID, provider: ProviderID, child name: String, of parent: CoveragePosition)
        -> CoveragePosition
    {
        views[app]?[provider]?.step(from: parent, into: name[...]) ?? .outside
    }

    /// Names of the children of a bare ancestor folder that lead to granted
    /// items (SPEC S2), or nil when `path` is not such a folder.
    public func childrenLeadingToGrants(app: AppID, provider: ProviderID, path: String) -> Set<HostNameKey>? {
        views[app]?[provider]?.childrenLeadingToGrants(of: path)
    }

    /// The host file `grant`'s item was last found as, while it is found:
    /// the one file its path stands for (issue 28). Nil for an item
    /// marked missing, whose path then stands for whatever is there (an
    /// editor's save replaces a file by a new one).
    public func itemFile(of grant: Grant) -> ItemFile? {
        guard let location = items[grant.item], location.exists else { return nil }
        return location.file
    }

    public func grants(of app: AppID) -> [Grant] {
        (grantIDsByApp[app] ?? []).compactMap { grantsByID[$0] }
    }

    /// The apps holding a grant of the provider, active or revoked.
    public func apps(withGrantsIn provider: ProviderID) -> Set<AppID> {
        Set(views.lazy.filter { $0.value[provider] != nil }.map(\.key))
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
    /// A temporary file the app made beside this grant's file, to rename
    /// over it (SPEC S48: an atomic save). It is never a grant of its own:
    /// it may be used only as far as the grant's file may be written, and
    /// only by the app that made it. The snapshot never answers it: the
    /// file system that keeps the app's temporaries does.
    case replacing(Grant)
}

/// An item's coverage together with the node of the grant trie its path
/// reached (nil once the path left the trie). A child's position is one
/// dictionary lookup from its parent's, so the daemon, which caches each
/// node's position, finds a new node's coverage without building its path.
public struct CoveragePosition: Sendable {
    public let coverage: Coverage
    fileprivate let trieNode: Int?
    /// Whether the coverage's grant was made at this very path (the item is
    /// the grant's root), not on a folder above it.
    public let grantIsHere: Bool

    fileprivate init(coverage: Coverage, trieNode: Int?, grantIsHere: Bool = false) {
        self.coverage = coverage
        self.trieNode = trieNode
        self.grantIsHere = grantIsHere
    }

    /// Outside every grant of the app in the provider.
    static let outside = CoveragePosition(coverage: .hidden, trieNode: nil)

    /// The position of an app's temporary beside `grant`'s file (SPEC S48):
    /// outside the trie, as any name no grant is made at.
    public static func replacing(_ grant: Grant) -> CoveragePosition {
        CoveragePosition(coverage: .replacing(grant), trieNode: nil)
    }

    /// The position of an item that is not the file its path's grant was
    /// made for (issue 28): covered by `enclosing`, a grant on a folder
    /// above, as every other item of that folder is; or, with none, hidden
    /// together with everything below it.
    public func notGrantRoot(coveredBy enclosing: Grant?) -> CoveragePosition {
        guard let enclosing else { return .outside }
        return CoveragePosition(coverage: .granted(enclosing), trieNode: trieNode)
    }

    fileprivate var grant: Grant? {
        if case .granted(let grant) = coverage { return grant }
        return nil
    }

    /// The position of every child, when the trie is not needed to know it:
    /// once a path has left the trie, no grant lies below and descendants
    /// share its coverage. Nil while the position is still in the trie.
    public var everyChild: CoveragePosition? {
        trieNode == nil ? self : nil
    }
}

/// One app's grants in one provider, as a trie of path components: finding
/// the nearest grant at or above a path is one dictionary lookup per
/// component, with no string built (SPEC S36; `make bench` measures it).
struct ProviderView: Sendable {
    private struct TrieNode: Sendable {
        var grant: Grant?
        /// Keyed by bytes: canonically equivalent names are two host files,
        /// and a grant on one must not cover the other (SPEC S33, S33a).
        var children: [HostNameKey: Int] = [:]
    }

    /// Index 0 is the provider's root folder.
    private var nodes = [TrieNode()]

    mutating func add(_ grant: Grant) {
        var index = 0
        for component in RelativePath.components(of: grant.relativePath) {
            if let next = nodes[index].children[HostNameKey(component)] {
                index = next
            } else {
                nodes.append(TrieNode())
                nodes[index].children[HostNameKey(component)] = nodes.count - 1
                index = nodes.count - 1
            }
        }
        nodes[index].grant = grant
    }

    /// The grants on folders strictly above `path`, nearest first.
    func grants(above path: String) -> [Grant] {
        var found: [Grant] = []
        if let root = nodes[0].grant, !path.isEmpty { found.append(root) }
        var index = 0
        // Split by the byte "/", like the walk (SPEC S33a).
        let components = RelativePath.components(of: path)
        for component in components.dropLast() {
            guard let next = nodes[index].children[HostNameKey(component)] else { break }
            index = next
            if let grant = nodes[next].grant { found.append(grant) }
        }
        return found.reversed()
    }

    func coverage(of path: String) -> Coverage {
        let (nearest, reached) = walk(path)
        return coverage(nearest: nearest, reached: reached)
    }

    func position(of path: String) -> CoveragePosition {
        let (nearest, reached) = walk(path)
        return CoveragePosition(
            coverage: coverage(nearest: nearest, reached: reached), trieNode: reached,
            grantIsHere: nearest != nil && nearest == reached)
    }

    /// The trie nodes of the nearest grant at or above `path` and of `path`
    /// itself (nil once the path leaves the trie: every descendant then has
    /// the same coverage). Indices only: a grant is copied once, by the caller.
    private func walk(_ path: String) -> (nearest: Int?, reached: Int?) {
        var index = 0
        // `case .some`, not `!= nil`: the comparison copies the grant out,
        // on every walk.
        var nearest: Int? = nil
        if case .some = nodes[0].grant { nearest = 0 }
        var reachedEnd = true
        Self.forEachComponent(of: path) { component in
            guard let next = nodes[index].children[HostNameKey(component)] else {
                reachedEnd = false
                return false
            }
            index = next
            if case .some = nodes[next].grant { nearest = next }
            return true
        }
        return (nearest, reachedEnd ? index : nil)
    }

    private func coverage(nearest: Int?, reached: Int?) -> Coverage {
        if let nearest, let grant = nodes[nearest].grant { return .granted(grant) }
        return reached == nil ? .hidden : .ancestor
    }

    func step(from parent: CoveragePosition, into name: Substring) -> CoveragePosition {
        guard let index = parent.trieNode, let next = nodes[index].children[HostNameKey(name)] else {
            // No grant lies below: the nearest grant above covers it, or none does.
            return CoveragePosition(coverage: parent.grant.map(Coverage.granted) ?? .hidden, trieNode: nil)
        }
        let here = nodes[next].grant
        let nearest = here ?? parent.grant
        return CoveragePosition(
            coverage: nearest.map(Coverage.granted) ?? .ancestor, trieNode: next, grantIsHere: here != nil)
    }

    /// Calls `body` with each "/"-separated component until it returns
    /// false. Scans UTF-8 bytes: splitting a String by Characters would
    /// outweigh the rest of the lookup.
    private static func forEachComponent(of path: String, _ body: (Substring) -> Bool) {
        let utf8 = path.utf8
        var start = utf8.startIndex
        var position = start
        while position != utf8.endIndex {
            if utf8[position] == UInt8(ascii: "/") {
                if start != position, !body(path[start..<position]) { return }
                start = utf8.index(after: position)
            }
            position = utf8.index(after: position)
        }
        if start != position { _ = body(path[start..<position]) }
    }

    /// The children of a bare folder on the way to grants.
    func childrenLeadingToGrants(of path: String) -> Set<HostNameKey>? {
        var index: Int? = 0
        Self.forEachComponent(of: path) { component in
            index = index.flatMap { nodes[$0].children[HostNameKey(component)] }
            return index != nil
        }
        return index.map { Set(nodes[$0].children.keys.map { HostNameKey(String($0.text)) }) }
    }
}
