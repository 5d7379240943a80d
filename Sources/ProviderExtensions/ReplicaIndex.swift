/// The replica's records in memory, by item id and by the replica file's
/// inode, with each folder's children: what the FUSE path asks (by
/// inode, under a lock, no database) and what sync needs (paths by id).
struct ReplicaIndex {
    private(set) var records: [String: ReplicaRecord] = [:]
    private(set) var byInode: [UInt64: String] = [:]
    private var children: [String: Set<String>] = [:]
    /// Items whose `state` changed since the last `takeStateChanges`.
    private var stateChanges: [String] = []
    /// Items whose record changed (or went) since the last `takeUnsaved`:
    /// the store is written from the index as it is when it is saved, never
    /// from a copy a caller took earlier (issue 47: a download's or a
    /// pull's save that ran after an app's first write wrote its older
    /// copy over the dirty mark, and a daemon killed then lost the write).
    private var unsaved: Set<String> = []

    init(_ records: [ReplicaRecord]) {
        for record in records { put(record) }
    }

    subscript(id: String) -> ReplicaRecord? { records[id] }

    func id(ofInode inode: UInt64) -> String? { byInode[inode] }

    mutating func put(_ record: ReplicaRecord) {
        if let old = records[record.item.id], old.state != record.state, record.isFile {
            stateChanges.append(record.item.id)
        }
        if let old = records[record.item.id] {
            if old.inode != record.inode { byInode[old.inode] = nil }
            if old.item.parent != record.item.parent, let parent = old.item.parent {
                children[parent]?.remove(old.item.id)
            }
        }
        // The file system gave a removed file's inode to a new one (the
        // removal not yet sent): the old record's file is gone, and the
        // next push deletes its item, rather than take the new file for a
        // rename of it (issue 47).
        if let other = byInode[record.inode], other != record.item.id, var stale = records[other],
            record.inode != Self.noFile
        {
            stale.inode = Self.noFile
            records[other] = stale
            unsaved.insert(other)
        }
        records[record.item.id] = record
        unsaved.insert(record.item.id)
        byInode[record.inode] = record.item.id
        if let parent = record.item.parent { children[parent, default: []].insert(record.item.id) }
    }

    /// The item was read or written now (the quota's LRU order).
    mutating func touch(_ id: String, at time: Double) {
        guard records[id] != nil else { return }
        records[id]?.lastUsed = time
        unsaved.insert(id)
    }

    /// Removes the record (not its descendants); returns it.
    @discardableResult
    mutating func remove(_ id: String) -> ReplicaRecord? {
        guard let record = records.removeValue(forKey: id) else { return nil }
        unsaved.insert(id)
        if byInode[record.inode] == id { byInode[record.inode] = nil }
        if let parent = record.item.parent { children[parent]?.remove(id) }
        return record
    }

    func childIDs(of id: String) -> Set<String> { children[id] ?? [] }

    /// No inode: the record of an item whose file was removed here.
    static let noFile: UInt64 = 0

    /// A new file was made at `inode` (the mount's create): a record that
    /// still names it is of a file removed here since.
    mutating func madeNew(_ inode: UInt64) {
        guard let id = byInode[inode], var stale = records[id] else { return }
        byInode[inode] = nil
        stale.inode = Self.noFile
        records[id] = stale
        unsaved.insert(id)
    }

    /// What changed since the last call, as it is now: the records to
    /// write, and the ids whose record is gone.
    mutating func takeUnsaved() -> (records: [ReplicaRecord], removed: [String]) {
        defer { unsaved = [] }
        let ids = unsaved.sorted()
        return (ids.compactMap { records[$0] }, ids.filter { records[$0] == nil })
    }

    /// A save that failed: its changes are written by the next one.
    mutating func markUnsaved(_ ids: [String]) { unsaved.formUnion(ids) }

    /// The items whose state changed since the last call, once each.
    mutating func takeStateChanges() -> [String] {
        defer { stateChanges = [] }
        var seen = Set<String>()
        return stateChanges.filter { seen.insert($0).inserted }
    }

    /// The item and everything below it, deepest first.
    func subtree(_ id: String) -> [String] {
        var order: [String] = []
        var stack = [id]
        while let next = stack.popLast() {
            order.append(next)
            stack += childIDs(of: next)
        }
        return order.reversed()
    }

    /// The item's path in the replica ("" for the root); nil when its
    /// parent chain is broken or loops (such items are not shown).
    func path(of id: String) -> String? {
        var names: [String] = []
        var current = id
        while current != ExtensionItem.rootID {
            guard let record = records[current], let parent = record.item.parent, names.count <= 256 else {
                return nil
            }
            names.append(record.item.name)
            current = parent
        }
        return names.reversed().joined(separator: "/")
    }

    /// Where an item with this parent and name goes.
    func path(parent: String, name: String) -> String? {
        guard let folder = path(of: parent) else { return nil }
        return folder.isEmpty ? name : folder + "/" + name
    }

    var all: Dictionary<String, ReplicaRecord>.Values { records.values }
}
