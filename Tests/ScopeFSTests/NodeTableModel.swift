import Glibc
import Policy
import Testing

@testable import ScopeFS

/// The host folder and the kernel's dentry cache, next to a real
/// `NodeTable` that is told what `ScopeFileSystem` tells it: every
/// operation goes through the table the way the mount drives it (lookups
/// before use, `renamed`, `exchanged`, `removed`, `forget`), and the model
/// says what the table must then answer.
struct NodeTableModel {
    typealias Object = UInt64
    struct Entry: Hashable, CustomStringConvertible {
        var parent: Object
        var name: String
        var description: String { "\(parent)/\(name)" }
    }

    let table: NodeTable
    let view: UInt32
    let place = Place.provider("com.example.app", "local")
    let rootObject: Object = 1
    /// Host: the object each name names, and which objects are folders.
    private(set) var entries: [Entry: Object] = [:]
    private(set) var folders: Set<Object> = [1]
    private var nextObject: Object = 2
    /// Kernel: the names it has looked up (its positive dentries), and the
    /// node (with its lookup count) of each object it holds.
    private(set) var dentries: Set<Entry> = []
    private(set) var held: [Object: (inode: UInt64, lookups: UInt64)] = [:]
    var log: [String] = []

    init() {
        table = NodeTable(
            root: Node(
                inode: NodeTable.rootInode, place: .root, view: 0, identity: nil, isDirectory: true, folder: nil,
                isDomainRoot: false))
        view = table.view(of: place)
        let rootIdentity = Self.identity(rootObject)
        let place = place
        let view = view
        let root = table.lookup(
            key: NodeKey(view: view, identity: rootIdentity, kind: .directory), parent: NodeTable.rootInode,
            name: "local"
        ) { inode in
            Node(
                inode: inode, place: place, view: view, identity: rootIdentity, isDirectory: true, folder: nil,
                isDomainRoot: true)
        }
        held[rootObject] = (root.inode, 1)
    }

    static func identity(_ object: Object) -> FileIdentity { FileIdentity(device: 7, inode: object) }

    // MARK: Host facts

    func names(of object: Object) -> [Entry] { entries.filter { $0.value == object }.map(\.key) }
    func isEmpty(_ folder: Object) -> Bool { !entries.keys.contains { $0.parent == folder } }

    /// The host path of an entry, relative to the provider root.
    func path(of entry: Entry) -> String {
        var components = [entry.name]
        var current = entry.parent
        while current != rootObject {
            guard let up = names(of: current).first else { return "<detached>" }
            components.append(up.name)
            current = up.parent
        }
        return components.reversed().joined(separator: "/")
    }

    /// Whether `object` is `folder` or lies below it.
    func isWithin(_ object: Object, _ folder: Object) -> Bool {
        var current = object
        while true {
            if current == folder { return true }
            guard current != rootObject, let up = names(of: current).first else { return false }
            current = up.parent
        }
    }

    // MARK: Kernel and daemon

    /// What the kernel does before it uses a name below `folder`: looks up
    /// each folder on the way whose dentry it dropped. False if the folder
    /// is gone.
    @discardableResult
    mutating func reach(_ folder: Object) -> Bool {
        guard folder != rootObject else { return true }
        // The kernel keeps a folder's dentry while it caches any below it.
        if held[folder] != nil, dentries.contains(where: { $0.parent == folder }) { return true }
        guard folders.contains(folder), let entry = names(of: folder).first, reach(entry.parent) else { return false }
        if !dentries.contains(entry) || held[folder] == nil { lookUp(entry) }
        return true
    }

    /// What the kernel does before it uses a name: a lookup, which the
    /// daemon answers through `NodeTable.lookup`.
    mutating func lookUp(_ entry: Entry) {
        guard entries[entry] != nil, reach(entry.parent) else { return }
        guard let object = entries[entry], let parent = held[entry.parent] else { return }
        let identity = Self.identity(object)
        let isFolder = folders.contains(object)
        let key = NodeKey(view: view, identity: identity, kind: isFolder ? .directory : .file)
        let place = place
        let view = view
        let node = table.lookup(key: key, parent: parent.inode, name: entry.name) { inode in
            Node(
                inode: inode, place: place, view: view, identity: identity, isDirectory: isFolder, folder: nil,
                isDomainRoot: false)
        }
        held[object] = (node.inode, (held[object]?.lookups ?? 0) + 1)
        dentries.insert(entry)
    }

    mutating func create(_ entry: Entry, folder: Bool) {
        guard entries[entry] == nil, reach(entry.parent) else { return }
        let object = nextObject
        nextObject += 1
        entries[entry] = object
        if folder { folders.insert(object) }
        log.append("create \(entry)\(folder ? " folder" : "")")
        lookUp(entry)
    }

    mutating func link(_ source: Entry, _ target: Entry) {
        guard let object = entries[source], !folders.contains(object), entries[target] == nil, reach(target.parent)
        else { return }
        lookUp(source)
        entries[target] = object
        log.append("link \(source) \(target)")
        lookUp(target)
    }

    mutating func unlink(_ entry: Entry) {
        guard let object = entries[entry], !folders.contains(object) || isEmpty(object) else { return }
        lookUp(entry)
        guard held[entry.parent] != nil else { return }
        log.append("unlink \(entry)")
        entries[entry] = nil
        folders.remove(object)
        dentries.remove(entry)
        table.removed(parent: held[entry.parent]!.inode, name: entry.name)
    }

    enum RenameKind: CaseIterable { case plain, noReplace, whiteout }

    /// rename(2) with the host's rules; the daemon then tells the table
    /// what it found at the target name (ScopeFileSystem.rename).
    mutating func rename(_ source: Entry, _ target: Entry, _ kind: RenameKind) {
        guard let object = entries[source], reach(source.parent), reach(target.parent) else { return }
        let isFolder = folders.contains(object)
        if isFolder && isWithin(target.parent, object) { return }  // EINVAL
        if let replaced = entries[target] {
            if kind == .noReplace { return }  // EEXIST
            if replaced == object {
                // rename(2) between two names of one file does nothing, and
                // ScopeFileSystem.rename tells the table nothing.
                lookUp(source)
                lookUp(target)
                log.append("rename \(source) \(target) (same file)")
                return
            }
            if folders.contains(replaced) != isFolder { return }  // EISDIR, ENOTDIR
            if isFolder && !isEmpty(replaced) { return }  // ENOTEMPTY
            lookUp(target)
        }
        lookUp(source)
        log.append("rename \(kind) \(source) \(target)")
        let from = tableEntry(source)
        let to = tableEntry(target)
        if let replaced = entries[target], folders.contains(replaced) { folders.remove(replaced) }
        entries[source] = nil
        entries[target] = object
        dentries.remove(source)
        dentries.insert(target)
        if kind == .whiteout {
            // A new (character device) file takes the old name.
            entries[source] = nextObject
            nextObject += 1
        }
        table.renamed(from: from, to: to, view: view, moved: Self.identity(object))
    }

    mutating func exchange(_ a: Entry, _ b: Entry) {
        guard let objectA = entries[a], let objectB = entries[b], reach(a.parent), reach(b.parent) else { return }
        if folders.contains(objectA) && isWithin(b.parent, objectA) { return }  // EINVAL
        if folders.contains(objectB) && isWithin(a.parent, objectB) { return }
        lookUp(a)
        lookUp(b)
        log.append("exchange \(a) \(b)")
        entries[a] = objectB
        entries[b] = objectA
        table.exchanged(
            tableEntry(a), tableEntry(b), view: view, nowAtA: Self.identity(objectB), nowAtB: Self.identity(objectA))
    }

    /// The kernel drops an unused dentry (a file's, or an empty folder's);
    /// an object left without any is forgotten with all its lookups.
    mutating func shrink(_ entry: Entry) {
        guard dentries.contains(entry), let object = entries[entry] else { return }
        if dentries.contains(where: { $0.parent == object }) { return }
        dentries.remove(entry)
        log.append("drop dentry \(entry)")
        forgetIfUnused(object)
    }

    /// Forgets held objects that no dentry names (unlinked, or replaced).
    mutating func forgetOrphans() {
        for object in held.keys where object != rootObject {
            if !folders.contains(object) || !dentries.contains(where: { $0.parent == object }) {
                forgetIfUnused(object)
            }
        }
    }

    private mutating func forgetIfUnused(_ object: Object) {
        guard let node = held[object], !dentries.contains(where: { entries[$0] == object }) else { return }
        table.forget(node.inode, count: node.lookups)
        held[object] = nil
    }

    private func tableEntry(_ entry: Entry) -> NodeTable.EntryName {
        NodeTable.EntryName(parent: held[entry.parent]!.inode, name: entry.name)
    }

    // MARK: What the table must answer

    /// Every node the kernel reaches by a name is recorded under one of its
    /// host names (any, for a hard-linked file: the daemon reaches the file
    /// through it), and its path is that name's host path; no node's path
    /// walk fails.
    func check() -> String? {
        let objectOfInode = Dictionary(uniqueKeysWithValues: held.map { ($0.value.inode, $0.key) })
        let reached = Set(dentries.compactMap { entries[$0] })
        let folderEntries = entries.filter { folders.contains($0.value) }.map { ($0.value, $0.key) }
        let folderNames = Dictionary(folderEntries) { first, _ in first }
        func hostPath(_ entry: Entry) -> String {
            var components = [entry.name]
            var current = entry.parent
            while current != rootObject, let up = folderNames[current] {
                components.append(up.name)
                current = up.parent
            }
            return components.reversed().joined(separator: "/")
        }
        for (object, node) in held where object != rootObject {
            let path: String
            do { path = try table.path(of: node.inode) } catch {
                return "path of object \(object) (inode \(node.inode)) failed: \(error)"
            }
            guard reached.contains(object) else { continue }
            guard let resolved = table.resolve(node.inode, generation: 0) else {
                return "object \(object) is held but not in the table"
            }
            guard let parentInode = resolved.parent?.inode, let parent = objectOfInode[parentInode] else {
                return "object \(object): parent inode \(resolved.parent?.inode ?? 0) is no held object"
            }
            let recorded = Entry(parent: parent, name: resolved.name)
            guard entries[recorded] == object else {
                return "object \(object) is recorded as \(path) but is "
                    + names(of: object).map(hostPath).sorted().joined(separator: ", ")
            }
            guard path == hostPath(recorded) else {
                return "object \(object): table path \(path), host path \(hostPath(recorded))"
            }
        }
        return nil
    }
}
