import Glibc
import HostText
import Policy
import Synchronization
import SystemPackage

/// All inodes the kernel knows about. Inode numbers are handed out in
/// increasing order and never reused within a mount; an entry is dropped
/// when the kernel forgets its last lookup.
///
/// Lock order: this table's lock is a leaf — no other lock is taken while
/// it is held, and no system call is made under it.
final class NodeTable: Sendable {
    /// A class, not a struct: every request reads a record, and copying a
    /// struct of this size out of the dictionary retains each of its
    /// references. Records are only touched under the lock.
    final class Record {
        let node: Node
        /// The name the node was last seen under (how its file is reached).
        var parent: UInt64
        var name: String
        /// Further names of a hard-linked file, used when the primary name
        /// is unlinked while the kernel still holds the node.
        var otherNames: [EntryName] = []
        /// Whether the node's names are in `byName`: only once it was seen
        /// under a second name. A node with one name needs no entry there —
        /// when that name is removed nothing is left to switch to.
        var namesIndexed = false
        var lookups: UInt64
        /// Coverage cached for (policy generation, tree epoch).
        var coverage: (generation: UInt64, epoch: UInt64, value: CoveragePosition)?
        /// When a backed folder's host location was last checked against
        /// its path here, and what was found (`LocationCheck`).
        var location = LocationCheck()
        /// mtime and size seen at the last open, to keep the page cache
        /// across opens of an unchanged file.
        var cachedVersion: FileVersion?
        /// Open files of this node: after an unlink, or a replacement under
        /// its name, their descriptors still reach the file (fstat after unlink).
        var openFiles = OpenHandles()
        /// The budget's CLOCK bit (`ClockRing`): set by each request on
        /// the node, cleared by the hand.
        var recentlyUsed = false
        /// The pruner's pass that asked the kernel to drop the node, whose
        /// FORGET has not come yet (counted in `State.forgetsAsked`); 0: none.
        var forgetAsked: UInt32 = 0

        init(node: Node, parent: UInt64, name: String, lookups: UInt64) {
            self.node = node
            self.parent = parent
            self.name = name
            self.lookups = lookups
        }
    }

    /// A node's open files. Nearly every node has at most one at a time:
    /// that one is kept inline, and only further ones take an array (an
    /// array's buffer is an allocation, here on every create).
    struct OpenHandles {
        private(set) var first: OpenHandle?
        private var others: [OpenHandle] = []

        mutating func insert(_ handle: OpenHandle) {
            if first == nil { first = handle } else { others.append(handle) }
        }

        func contains(where matches: (OpenHandle) -> Bool) -> Bool {
            first.map(matches) == true || others.contains(where: matches)
        }

        mutating func remove(_ handle: OpenHandle) {
            if first === handle {
                first = others.popLast()
            } else {
                others.removeAll { $0 === handle }
            }
        }
    }

    /// Equal and hashed by the name's bytes (SPEC S33a): canonically
    /// equivalent names are two entries.
    struct EntryName: Hashable {
        var parent: UInt64
        var name: String

        static func == (a: Self, b: Self) -> Bool {
            a.parent == b.parent && a.name.sameHostName(as: b.name)
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(parent)
            hasher.combine(HostNameKey(name))
        }
    }

    private struct State {
        /// By inode number: numbers the daemon hands out, hashed cheaply.
        var records: [NumberKey<UInt64>: Record] = [:]
        var byKey: [NodeKey: UInt64] = [:]
        /// The places of the views, interned for `NodeKey` (a few per app;
        /// never shrinks). The root's is 0.
        var views: [Place: UInt32] = [.root: 0]
        /// How the mount's last writes left their files (`RecentMountWrites`).
        var mountWrites = RecentMountWrites()
        /// Which node each name of a hard-linked node names (the nodes with
        /// `namesIndexed`). Kept for those alone: hashing every name into
        /// it, and out again at forget, would weigh on every unlink.
        var byName: [EntryName: UInt64] = [:]
        var nextInode: UInt64 = 2
        /// Bumped when a directory moves: cached coverage depends on paths.
        var epoch: UInt64 = 0
        /// The nodes the budget may choose from, oldest first (`NodeBudget`);
        /// empty without a bound.
        var clock = ClockRing()
        /// Nodes with `forgetAsked`: on their way out, not counted
        /// against the budget.
        var forgetsAsked = 0
        /// The pruner's passes (`nodesToForget`), numbered from 1.
        var prunerPass: UInt32 = 0

        /// A request used a node the pruner had chosen: the kernel may
        /// have kept it (a process's current folder), so it counts again.
        mutating func kept(_ record: Record) {
            record.recentlyUsed = true
            if record.forgetAsked != 0 {
                record.forgetAsked = 0
                forgetsAsked -= 1
            }
        }
    }

    static let rootInode: UInt64 = 1
    private let state = Mutex(State())
    /// How many nodes the table keeps for the kernel.
    let budget: NodeBudget

    init(root: Node, budget: NodeBudget = NodeBudget(limit: .max)) {
        self.budget = budget
        state.withLock { state in
            state.records[Self.rootInode] = Record(node: root, parent: Self.rootInode, name: "", lookups: 1)
        }
    }

    /// What an operation needs about a node: the node, its parent node (whose
    /// directory descriptor stays open while this value lives) and its name.
    struct Resolved {
        var node: Node
        var parent: Node?
        var name: String
        fileprivate var table: NodeTable
        /// The policy generation and tree epoch the cached positions below
        /// were checked against (and a new position is stored for).
        var generation: UInt64
        var epoch: UInt64
        /// The node's coverage if it was cached for the generation asked for.
        var cachedCoverage: CoveragePosition?
        /// Else its parent's, if cached: the node's is then one step away.
        var parentCoverage: CoveragePosition?
        /// One of the node's open files: its descriptor reaches the file
        /// without a walk of /proc, also after an unlink.
        var openFile: OpenHandle?
        /// The last check of the host location of the node's folder: the
        /// node itself if it is one, else its parent (`LocationCheck`).
        var location: LocationCheck

        /// The folder whose host location decides whether the node is still
        /// where its path says.
        var folder: Node? { node.isDirectory ? node : parent }

        /// The path relative to the container or provider root, computed on
        /// demand: most operations (getattr, a coverage-cache hit) never need it.
        var path: String { get throws(Errno) { try table.path(of: node.inode) } }
    }

    /// One lock for everything an operation needs about a node, including
    /// its coverage cached for policy `generation`.
    func resolve(_ inode: UInt64, generation: UInt64) -> Resolved? {
        state.withLock { state in
            guard let record = state.records[inode] else { return nil }
            if record.forgetAsked != 0 { state.kept(record) } else { record.recentlyUsed = true }
            let epoch = state.epoch
            func cachedCoverage(_ record: Record) -> CoveragePosition? {
                guard let cached = record.coverage, cached.generation == generation, cached.epoch == epoch else {
                    return nil
                }
                return cached.value
            }
            let parentRecord =
                record.node.isDomainRoot || !record.node.place.isBacked ? nil : state.records[record.parent]
            let coverage = cachedCoverage(record)
            return Resolved(
                node: record.node, parent: parentRecord?.node, name: record.name, table: self,
                generation: generation, epoch: epoch, cachedCoverage: coverage,
                parentCoverage: coverage == nil ? parentRecord.flatMap(cachedCoverage) : nil,
                openFile: record.openFiles.first,
                location: record.node.isDirectory ? record.location : parentRecord?.location ?? LocationCheck())
        }
    }

    /// The node's path relative to its container or provider root, or EIO
    /// when its parent links do not lead there (`PathWalk`).
    func path(of inode: UInt64) throws(Errno) -> String {
        let walk = state.withLock { Self.path(of: inode, in: $0) }
        return try walk.path(of: inode)
    }

    /// Walks parent links up to the container or provider root, for at most
    /// `PathWalk.maximumDepth` steps: a parent cycle (a table out of step
    /// with the host) or an absurd depth ends the walk instead of looping
    /// with the table's lock held. Costs nothing over the plain walk but a
    /// counter.
    private static func path(of inode: UInt64, in state: State) -> PathWalk {
        var components: [String] = []
        var current = inode
        while let record = state.records[current], record.node.place.isBacked, !record.node.isDomainRoot {
            guard components.count < PathWalk.maximumDepth else { return .tooDeep }
            components.append(record.name)
            current = record.parent
        }
        return .found(components.reversed().joined(separator: "/"))
    }

    /// The host file of the node `levels` folders above `inode` (0: the
    /// node itself), by parent links; nil where the links end first.
    func identity(of inode: UInt64, levelsUp levels: Int) -> FileIdentity? {
        state.withLock { state in
            var current = inode
            for _ in 0..<levels {
                guard let record = state.records[current], record.node.place.isBacked, !record.node.isDomainRoot
                else { return nil }
                current = record.parent
            }
            return state.records[current]?.node.identity
        }
    }

    /// A backed folder's parent node and the name it was last seen under
    /// there: how its descriptor is opened again after the cache evicted
    /// it (`ScopeFileSystem.folderDescriptor(of:)`). Nil for a domain root
    /// (whose descriptor is pinned), a synthetic folder, or a node the
    /// kernel forgot.
    func parentEntry(of inode: UInt64) -> (parent: Node, name: String)? {
        state.withLock { state in
            guard let record = state.records[inode], record.node.place.isBacked, !record.node.isDomainRoot,
                let parent = state.records[record.parent]
            else { return nil }
            return (parent.node, record.name)
        }
    }

    /// Finds the node for `key` or creates it with `make`, records where it
    /// was seen (`parent`, `name`) and takes one lookup. `make` runs under
    /// the lock and must not make system calls.
    func lookup(key: NodeKey, parent: UInt64, name: String, make: (UInt64) -> Node) -> Node {
        state.withLock { state in
            if let known = Self.takeLookup(key, parent: parent, name: name, in: &state) { return known }
            return add(make(state.nextInode), key: key, parent: parent, name: name, in: &state)
        }
    }

    /// `lookup` for a synthetic folder, whose view its place names: the
    /// place is interned under the same lock (the shared view looks up
    /// `MOUNT/<app>` on every path walk). `make` gets the inode and view.
    func lookupSynthetic(_ place: Place, parent: UInt64, name: String, make: (UInt64, UInt32) -> Node) -> Node {
        state.withLock { state in
            let view = Self.intern(place, in: &state)
            let key = NodeKey(view: view, identity: nil, kind: .directory)
            if let known = Self.takeLookup(key, parent: parent, name: name, in: &state) { return known }
            return add(make(state.nextInode, view), key: key, parent: parent, name: name, in: &state)
        }
    }

    /// Records a node just made with the next inode number. A new folder
    /// was just opened by name in its parent, so its location is as
    /// trustworthy as the parent's was: it takes over the parent's check
    /// (and so its age), and a walk of new folders costs no check each.
    private func add(_ node: Node, key: NodeKey, parent: UInt64, name: String, in state: inout State) -> Node {
        state.nextInode = node.inode + 1
        let record = Record(node: node, parent: parent, name: name, lookups: 1)
        if node.isDirectory, !node.isDomainRoot, let parentRecord = state.records[parent] {
            record.location = parentRecord.location
        }
        state.records[node.inode] = record
        state.byKey[key] = node.inode
        if budget.isBounded { noteAdded(record, in: &state) }
        return node
    }

    /// `lookup` for a node the table already has; nil (and nothing taken)
    /// when it has none.
    func lookupKnown(key: NodeKey, parent: UInt64, name: String) -> Node? {
        state.withLock { Self.takeLookup(key, parent: parent, name: name, in: &$0) }
    }

    private static func takeLookup(_ key: NodeKey, parent: UInt64, name: String, in state: inout State) -> Node? {
        guard let inode = state.byKey[key], let record = state.records[inode] else { return nil }
        if record.parent != parent || !record.name.sameHostName(as: name) {
            if record.node.isDirectory {
                state.epoch &+= 1
            } else {
                // A hard link: remember the name seen before.
                let previous = EntryName(parent: record.parent, name: record.name)
                let entry = EntryName(parent: parent, name: name)
                record.otherNames.removeAll { $0 == entry || $0 == previous }
                if record.otherNames.count < 16 { record.otherNames.append(previous) }
                record.namesIndexed = true
                state.byName[previous] = inode
            }
            record.parent = parent
            record.name = name
            record.coverage = nil
        }
        record.lookups += 1
        if record.forgetAsked != 0 { state.kept(record) } else { record.recentlyUsed = true }
        if record.namesIndexed { state.byName[EntryName(parent: parent, name: name)] = inode }
        return record.node
    }

    /// Returns lookups the kernel no longer holds; the last one drops the
    /// node, which is returned (its descriptor closes when the caller lets go).
    @discardableResult
    func forget(_ inode: UInt64, count: UInt64) -> Node? {
        guard inode != Self.rootInode else { return nil }
        let dropped: Node? = state.withLock { state in
            // By index: one hash per table, not one to check and one to remove.
            guard let index = state.records.index(forKey: NumberKey(inode)) else { return nil }
            let record = state.records[index].value
            record.lookups -= min(count, record.lookups)
            if record.lookups > 0 { return nil }
            state.records.remove(at: index)
            if record.forgetAsked != 0 { state.forgetsAsked -= 1 }
            if let key = record.node.key, let keyIndex = state.byKey.index(forKey: key),
                state.byKey[keyIndex].value == inode
            {
                state.byKey.remove(at: keyIndex)
            }
            if record.namesIndexed {
                func drop(_ entry: EntryName) {
                    if state.byName[entry] == inode { state.byName[entry] = nil }
                }
                drop(EntryName(parent: record.parent, name: record.name))
                record.otherNames.forEach(drop)
            }
            return record.node
        }
        // The last reference may close a descriptor: outside the lock.
        return dropped
    }

    /// The view number of a domain root's place, made on first use.
    /// Backed nodes take their parent's; synthetic folders intern theirs in
    /// `lookupSynthetic`.
    func view(of place: Place) -> UInt32 {
        state.withLock { Self.intern(place, in: &$0) }
    }

    private static func intern(_ place: Place, in state: inout State) -> UInt32 {
        if let view = state.views[place] { return view }
        let view = UInt32(state.views.count)
        state.views[place] = view
        return view
    }

    /// Records that the entry `name` in `parent` is gone (unlink, rmdir, or
    /// replaced by a rename). A hard-linked file keeps being reached
    /// through one of its other names; any other node keeps its stale name
    /// until the kernel forgets it (its attributes are checked against its
    /// identity, and come from an open descriptor once the name is gone).
    func removed(parent: UInt64, name: String) {
        state.withLock { Self.remove(EntryName(parent: parent, name: name), in: &$0) }
    }

    private static func remove(_ entry: EntryName, in state: inout State) {
        guard !state.byName.isEmpty else { return }
        guard let inode = state.byName.removeValue(forKey: entry), let record = state.records[inode] else { return }
        record.otherNames.removeAll { $0 == entry }
        if record.parent == entry.parent && record.name.sameHostName(as: entry.name),
            let next = record.otherNames.popLast()
        {
            record.parent = next.parent
            record.name = next.name
            record.coverage = nil
        }
    }

    /// Records a rename of `from` to `to` that moved a file (plain, with
    /// RENAME_NOREPLACE, or with RENAME_WHITEOUT, whose whiteout is a new
    /// file the kernel looks up afresh). `moved` is the identity now found
    /// at `to` (nil if the host changed it in between): the node that moved.
    /// A replaced target loses its name. (A rename between two names of one
    /// file does nothing; the caller does not report it.)
    func renamed(from: EntryName, to: EntryName, view: UInt32, moved: FileIdentity?) {
        state.withLock { state in
            Self.remove(to, in: &state)
            if let inode = moved.flatMap({ Self.inode(of: $0, view: view, in: state) }) {
                Self.move(inode, from: from, to: to, in: &state)
            }
        }
    }

    /// Records a RENAME_EXCHANGE of the entries `a` and `b`: both nodes
    /// change places, with their parents and names (a folder left with its
    /// old parent would let a later move close a cycle of parents).
    /// `nowAtA` and `nowAtB` are the identities found at the two names after
    /// the exchange.
    func exchanged(_ a: EntryName, _ b: EntryName, view: UInt32, nowAtA: FileIdentity?, nowAtB: FileIdentity?) {
        state.withLock { state in
            let fromA = nowAtB.flatMap { Self.inode(of: $0, view: view, in: state) }
            let fromB = nowAtA.flatMap { Self.inode(of: $0, view: view, in: state) }
            // Two names of one file: exchanging them changes nothing.
            guard fromA == nil || fromA != fromB else { return }
            if let fromA { Self.move(fromA, from: a, to: b, in: &state) }
            if let fromB { Self.move(fromB, from: b, to: a, in: &state) }
        }
    }

    /// The node of a host file in one view, whatever its kind.
    private static func inode(of identity: FileIdentity, view: UInt32, in state: State) -> UInt64? {
        for kind in [NodeKind.file, .directory, .reference] {
            if let inode = state.byKey[NodeKey(view: view, identity: identity, kind: kind)] { return inode }
        }
        return nil
    }

    /// Records that a node now lives at `to`, having been renamed from `from`.
    private static func move(_ inode: UInt64, from: EntryName, to: EntryName, in state: inout State) {
        guard let record = state.records[inode] else { return }
        let previous = EntryName(parent: record.parent, name: record.name)
        record.otherNames.removeAll { $0 == from || $0 == previous || $0 == to }
        if previous != from && !record.node.isDirectory {
            // Renamed from another of its names: a hard link.
            record.otherNames.append(previous)
            record.namesIndexed = true
            state.byName[previous] = inode
        }
        record.parent = to.parent
        record.name = to.name
        record.coverage = nil
        if record.namesIndexed {
            if state.byName[from] == inode { state.byName[from] = nil }
            state.byName[to] = inode
        }
        if record.node.isDirectory { state.epoch &+= 1 }
    }

    /// Caches a node's coverage, computed from what it was resolved with:
    /// stored under that epoch, so it is never used if a folder moved since.
    func storeCoverage(_ resolved: Resolved, generation: UInt64, position: CoveragePosition) {
        state.withLock { state in
            state.records[resolved.node.inode]?.coverage = (generation, resolved.epoch, position)
        }
    }

    /// Stores the result of a check of a folder's host location.
    func storeLocation(_ folder: UInt64, _ check: LocationCheck) {
        state.withLock { $0.records[folder]?.location = check }
    }

    /// Records an open file of the node and swaps in the file version it
    /// was opened at; returns the version seen before.
    func opened(_ inode: UInt64, _ handle: OpenHandle, version: FileVersion) -> FileVersion? {
        state.withLock { state in
            guard let record = state.records[inode] else { return nil }
            record.openFiles.insert(handle)
            defer { record.cachedVersion = version }
            return record.cachedVersion
        }
    }

    /// Forgets an open file; `version` (after our own writes) replaces the
    /// version its pages were cached at.
    func closed(_ inode: UInt64, _ handle: OpenHandle, version: FileVersion?) {
        state.withLock { state in
            guard let record = state.records[inode] else { return }
            record.openFiles.remove(handle)
            if let version { record.cachedVersion = version }
            if let version, handle.wrote.load(ordering: .relaxed), let identity = record.node.identity {
                state.mountWrites.record(identity, as: version)
            }
        }
    }

    /// The (parent, name) entries of an app's container nodes at `paths`.
    func containerEntries(app: AppID, paths: Set<String>) -> [(parent: UInt64, name: String)] {
        state.withLock { state in
            state.records.compactMap { inode, record in
                guard case .container(let owner) = record.node.place, owner == app,
                    case .found(let path) = Self.path(of: inode.number, in: state), paths.contains(path)
                else { return nil }
                return (record.parent, record.name)
            }
        }
    }

    /// The folder nodes of an app's container at `paths`, with their paths.
    func containerNodes(app: AppID, paths: Set<String>) -> [(inode: UInt64, path: String)] {
        guard !paths.isEmpty else { return [] }
        return state.withLock { state in
            state.records.compactMap { inode, record in
                guard record.node.isDirectory, case .container(let owner) = record.node.place, owner == app,
                    case .found(let path) = Self.path(of: inode.number, in: state), paths.contains(path)
                else { return nil }
                return (inode.number, path)
            }
        }
    }

    /// The entries of the layout nodes the kernel holds (`Node.isLayout`).
    func layoutEntries() -> [(place: Place, parent: UInt64, name: String)] {
        state.withLock { state in
            state.records.values.compactMap { record in
                record.node.isLayout ? (record.node.place, record.parent, record.name) : nil
            }
        }
    }

    /// Nodes of one app and provider whose path lies within `path`.
    func nodes(app: AppID, provider: ProviderID, within path: String) -> [(inode: UInt64, parent: UInt64, name: String)]
    {
        state.withLock { state in
            state.records.compactMap { inode, record in
                guard case .provider(let a, let p) = record.node.place, a == app, p == provider,
                    case .found(let nodePath) = Self.path(of: inode.number, in: state),
                    RelativePath.isWithin(nodePath, path)
                else { return nil }
                return (inode.number, record.parent, record.name)
            }
        }
    }

    /// The nodes of one host folder in every view (each app has its own,
    /// `NodeKey`): one hash per view, and views are few.
    func directoryNodes(of identity: FileIdentity) -> [Node] {
        state.withLock { state in
            state.views.values.compactMap { view in
                state.byKey[NodeKey(view: view, identity: identity, kind: .directory)].flatMap {
                    state.records[$0]?.node
                }
            }
        }
    }

    /// Whether a content change of the host file is the echo of the
    /// mount's own write, for a channel that cannot say who wrote: the
    /// file is as the mount's last write left it (`version`), or a node of
    /// it was written through the mount in the last second, or still has a
    /// handle open that wrote (its release tells the other apps).
    func isMountsOwnWrite(_ identity: FileIdentity, version: FileVersion) -> Bool {
        state.withLock { state in
            state.mountWrites.isAsWritten(identity, version: version)
                || state.views.values.contains { view in
                    guard let inode = Self.inode(of: identity, view: view, in: state),
                        let record = state.records[inode]
                    else { return false }
                    return record.node.writtenThroughMount(within: 1000)
                        || record.openFiles.contains { $0.wrote.load(ordering: .relaxed) }
                }
        }
    }

    /// Whether a node of the host file is open for writing through the mount.
    func isOpenForWriting(_ identity: FileIdentity) -> Bool {
        state.withLock { state in
            state.views.values.contains { view in
                guard let inode = Self.inode(of: identity, view: view, in: state) else { return false }
                return state.records[inode]?.openFiles.contains { $0.writable } ?? false
            }
        }
    }

    /// A write through the mount that no handle's close records (a
    /// truncate by path) left the file at `version`.
    func wroteThroughMount(_ identity: FileIdentity, as version: FileVersion) {
        state.withLock { $0.mountWrites.record(identity, as: version) }
    }

    /// The daemon writes a file's bytes without changing it (a download
    /// into a placeholder): its nodes count as written through the mount
    /// for the next second, so an inotify echo is not taken for news.
    func noteOwnWrite(_ identity: FileIdentity) {
        state.withLock { state in
            for view in state.views.values {
                if let inode = Self.inode(of: identity, view: view, in: state) {
                    state.records[inode]?.node.noteMountWrite()
                }
            }
        }
    }

    /// The nodes of one host file in every view, whatever their kind.
    func nodes(of identity: FileIdentity) -> [UInt64] {
        state.withLock { state in
            state.views.values.compactMap { Self.inode(of: identity, view: $0, in: state) }
        }
    }

    /// Every backed node, with the entry it was looked up by: what the
    /// kernel may cache of host files. (Synthetic folders change only with
    /// the policy.)
    func everything() -> [(inode: UInt64, parent: UInt64, name: String)] {
        state.withLock { state in
            state.records.compactMap { inode, record in
                record.node.place.isBacked ? (inode.number, record.parent, record.name) : nil
            }
        }
    }

    /// The inodes with an open file (whose pages a new fault rule on
    /// reads drops, so that their next reads reach it).
    func withOpenFiles() -> [UInt64] {
        state.withLock { state in
            state.records.compactMap { inode, record in record.openFiles.first != nil ? inode.number : nil }
        }
    }

    /// For a grant of `path` just made active: the entries that lead to it
    /// from the app's nodes in the provider view (each ancestor folder the
    /// kernel holds and the next name), so that no answer cached before
    /// the grant stands in the way.
    func entriesToward(app: AppID, provider: ProviderID, path: String) -> [(parent: UInt64, name: String)] {
        state.withLock { state in
            state.records.compactMap { inode, record in
                guard record.node.isDirectory, case .provider(let a, let p) = record.node.place, a == app,
                    p == provider,
                    case .found(let nodePath) = Self.path(of: inode.number, in: state),
                    let next = RelativePath.nextComponent(of: path, after: nodePath)
                else { return nil }
                return (inode.number, next)
            }
        }
    }

    /// The folder nodes of an app's provider view whose listing depends on
    /// a grant at `path`: those on the way to it and those within it.
    func foldersListing(app: AppID, provider: ProviderID, toward path: String) -> [UInt64] {
        state.withLock { state in
            state.records.compactMap { inode, record in
                guard record.node.isDirectory, case .provider(let a, let p) = record.node.place, a == app,
                    p == provider,
                    case .found(let nodePath) = Self.path(of: inode.number, in: state),
                    RelativePath.isWithin(nodePath, path)
                        || RelativePath.nextComponent(of: path, after: nodePath) != nil
                else { return nil }
                return inode.number
            }
        }
    }

    /// A folder seen as `name` in one of `parents` was renamed or removed
    /// on the host: returns its nodes and every folder node below them, and
    /// moves the tree epoch, so that each folder's next use checks its host
    /// location again (`LocationCheck`) instead of trusting a check made
    /// before the move. Without that, a lookup or listing between the move
    /// and the check's expiry would be let through and cached by the kernel
    /// for the long timeout. The returned folders' attributes and kept
    /// listings must go: the kernel drops the subtree's entries with its
    /// top (d_invalidate), but a descriptor held inside reads the listing
    /// from its folder's pages (docs/DECISIONS.md, decision 40). One pass over the
    /// table, made only for events that name a folder.
    func folderMovedOnHost(named name: String, in parents: Set<UInt64>) -> [UInt64] {
        state.withLock { state in
            var below: [UInt64: Bool] = [:]
            for (inode, record) in state.records
            where record.node.isDirectory && parents.contains(record.parent) && record.name.sameHostName(as: name) {
                below[inode.number] = true
            }
            guard !below.isEmpty else { return [] }
            state.epoch &+= 1
            // Whether `inode` is one of the tops or below one; memoized, so
            // the pass costs about one step per node.
            func isBelow(_ inode: UInt64, depth: Int = 0) -> Bool {
                if let known = below[inode] { return known }
                guard depth < PathWalk.maximumDepth, inode != Self.rootInode, let record = state.records[inode] else {
                    return false
                }
                let answer = isBelow(record.parent, depth: depth + 1)
                below[inode] = answer
                return answer
            }
            return state.records.compactMap { inode, record in
                record.node.isDirectory && isBelow(inode.number) ? inode.number : nil
            }
        }
    }

    /// Every node of `providers`, in every view, with the entry it was
    /// looked up by; moves the tree epoch, so that each folder's next use
    /// checks its host location again (`folderMovedOnHost`, for a
    /// provider's own directory).
    func providerNodesMoved(_ providers: Set<ProviderID>) -> [(inode: UInt64, parent: UInt64, name: String)] {
        state.withLock { state in
            state.epoch &+= 1
            return state.records.compactMap { inode, record in
                guard case .provider(_, let provider) = record.node.place, providers.contains(provider) else {
                    return nil
                }
                return (inode.number, record.parent, record.name)
            }
        }
    }

    var count: Int { state.withLock { $0.records.count } }

    // MARK: The node budget

    /// A node just made joins the budget's ring if the kernel may forget
    /// it: backed nodes other than domain roots (the layout is a few nodes
    /// per app, and a domain root's descriptor is pinned).
    private func noteAdded(_ record: Record, in state: inout State) {
        guard record.node.place.isBacked, !record.node.isDomainRoot else { return }
        state.clock.append(record.node.inode)
        if state.records.count - state.forgetsAsked > budget.limit { budget.exceeded() }
    }

    /// Up to `batch` of the least recently used nodes, while the table
    /// holds more than the budget's target; each is marked as asked, so
    /// that no later pass counts it before its FORGET. A node with an open
    /// file is passed over (the kernel keeps it). A marked node that the
    /// kernel kept and no request used since is asked again when the hand
    /// comes round. Nil once the table is at its target. Bounded work under
    /// the lock: `16 × batch` steps of the hand at most (an empty batch
    /// then: call again).
    func nodesToForget(batch: Int) -> [UnusedNode]? {
        state.withLock { state in
            guard state.records.count - state.forgetsAsked > budget.target, !state.clock.isEmpty else { return nil }
            var chosen: [UnusedNode] = []
            var steps = 0
            let limit = 16 * batch
            state.prunerPass = state.prunerPass == .max ? 1 : state.prunerPass + 1
            while state.records.count - state.forgetsAsked > budget.target, chosen.count < batch, steps < limit,
                let inode = state.clock.next()
            {
                steps += 1
                guard let record = state.records[NumberKey(inode)] else { continue }  // forgotten
                state.clock.append(inode)
                if record.openFiles.first != nil || record.forgetAsked == state.prunerPass { continue }
                if record.recentlyUsed {
                    record.recentlyUsed = false
                    continue
                }
                if record.forgetAsked != 0 {
                    // Asked before and kept, unused since: asked again.
                    state.forgetsAsked -= 1
                }
                record.forgetAsked = state.prunerPass
                state.forgetsAsked += 1
                chosen.append(UnusedNode(inode: inode, parent: record.parent, name: record.name))
            }
            return chosen
        }
    }

    /// Swift dictionaries never shrink when entries are removed: after the
    /// kernel forgot most of a large walk, the tables would keep the buckets
    /// of their peak. Copies each table into one sized for what is left once
    /// it uses under a quarter of its capacity.
    func compact() {
        func shrunk<Key: Hashable, Value>(_ table: [Key: Value]) -> [Key: Value]? {
            guard table.capacity > 4 * max(table.count, 1024) else { return nil }
            var copy = [Key: Value](minimumCapacity: table.count)
            for (key, value) in table { copy[key] = value }
            return copy
        }
        state.withLock { state in
            if let records = shrunk(state.records) { state.records = records }
            if let byKey = shrunk(state.byKey) { state.byKey = byKey }
            if let byName = shrunk(state.byName) { state.byName = byName }
        }
    }
}

/// What decides whether cached pages of a file are still good.
struct FileVersion: Equatable, Sendable {
    var modified: timespec
    var size: Int64

    init(_ info: stat) {
        modified = info.st_mtim
        size = Int64(info.st_size)
    }

    static func == (a: FileVersion, b: FileVersion) -> Bool {
        a.size == b.size && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
    }
}
