import Foundation
import Glibc
import Synchronization

@testable import ProviderExtensions

/// A remote store and its extension in the test's process (issue 47): the
/// replica model's other side. It answers as docs/PROVIDERS.md says a
/// store must (conditional writes, `changes` since an anchor, ranged
/// fetches of a named version), keeps every content version it ever held
/// (so the model can tell which version a byte belongs to), and misbehaves
/// when told: short and long fetch answers, failed fetches, lost answers
/// (the store applied the change, the answer never came), crashes (anchors
/// expire), and hooks that run inside a call, where a real remote would
/// be slow, so that a step can land in the middle of another one.
final class ModelRemote: @unchecked Sendable {
    struct Stored {
        var item: ExtensionItem
        var bytes: [UInt8]
    }

    enum Fault: String, Sendable {
        /// The next fetch stages half of what it was asked (an honest length).
        case shortFetch
        /// The next fetch answers the whole file (a store without ranges may).
        case longFetch
        /// The next fetch fails (`unreachable`).
        case failFetch
        /// The next create, modify or delete is applied, and its answer lost.
        case loseAnswer
    }

    /// Calls that run a hook: once, inside the next such call, before it answers.
    enum HookPoint: String, Sendable { case fetch, create, modify }

    private let lock = NSLock()
    let staging: String
    private var stored: [String: Stored] = [:]
    /// Content version → bytes, of every version ever stored or uploaded.
    private var versions: [String: [UInt8]] = ["": []]
    /// Item → the versions uploads made of it (their sequence numbers).
    private var uploadedVersions: [String: [Int]] = [:]
    /// Hashes of those versions' contents.
    let versionHashes = Mutex<Set<UInt64>>([ModelRemote.hash([])])
    /// (sequence, id) of each change, for `changes`.
    private var changeLog: [(Int, String)] = []
    private var sequence = 0
    private var nextID = 0
    /// Anchors of an earlier life expire (an extension's restart).
    private var life = 0
    private var running = true
    private var faults: [Fault] = []
    private var hooks: [HookPoint: () -> Void] = [:]
    /// What an upload carried, checked by the model (no byte an app never wrote).
    var onUpload: (@Sendable ([UInt8], String) -> Void)?
    let capabilities: ExtensionCapabilities

    init(staging: String) {
        self.staging = staging
        var capabilities = ExtensionCapabilities()
        capabilities.changes = .poll
        capabilities.ranges = true
        capabilities.create = true
        capabilities.modify = true
        capabilities.delete = true
        capabilities.rename = true
        capabilities.conditionalWrites = true
        capabilities.settableFields = ["name", "parent", "mtime", "mode"]
        self.capabilities = capabilities
    }

    /// FNV-1a of the bytes, and their count: versions told apart by content.
    static func hash(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash ^ UInt64(bytes.count)
    }

    // MARK: What the test does to the store

    /// The store's items now (the root excluded).
    var items: [String: Stored] { lock.withLock { stored } }

    func bytes(ofVersion version: String) -> [UInt8]? { lock.withLock { versions[version] } }

    var isRunning: Bool { lock.withLock { running } }

    func arm(_ fault: Fault) { lock.withLock { faults.append(fault) } }
    func disarmAll() {
        lock.withLock {
            faults = []
            hooks = [:]
        }
    }
    var armed: [Fault] { lock.withLock { faults } }
    func hook(_ point: HookPoint, _ body: @escaping () -> Void) { lock.withLock { hooks[point] = body } }
    func hasHook(_ point: HookPoint) -> Bool { lock.withLock { hooks[point] != nil } }

    /// The extension dies (calls fail `unreachable`) or starts again
    /// (anchors from before expire).
    func crash() { lock.withLock { running = false } }
    func restart() {
        lock.withLock {
            running = true
            life += 1
        }
    }

    @discardableResult
    func put(name: String, parent: String = ExtensionItem.rootID, bytes: [UInt8], mtime: Double) -> String {
        lock.withLock {
            nextID += 1
            let id = "i\(nextID)"
            let version = newVersion(bytes)
            let item = ExtensionItem(
                id: id, parent: parent, name: name, kind: .file, size: Int64(bytes.count), mtime: mtime, mode: 0o644,
                version: ItemVersion(content: version, metadata: "m\(sequence)"))
            stored[id] = Stored(item: item, bytes: bytes)
            logChange(id)
            return id
        }
    }

    func putFolder(name: String) -> String {
        lock.withLock {
            nextID += 1
            let id = "f\(nextID)"
            stored[id] = Stored(
                item: ExtensionItem(
                    id: id, parent: ExtensionItem.rootID, name: name, kind: .folder, size: 0, mtime: 1, mode: 0o755,
                    version: ItemVersion(content: "", metadata: "m0")), bytes: [])
            logChange(id)
            return id
        }
    }

    /// An edit elsewhere: new content, a new version.
    func edit(_ id: String, to bytes: [UInt8], mtime: Double) {
        lock.withLock {
            guard var entry = stored[id] else { return }
            entry.bytes = bytes
            entry.item.size = Int64(bytes.count)
            entry.item.mtime = mtime
            entry.item.version = ItemVersion(content: newVersion(bytes), metadata: "m\(sequence)")
            stored[id] = entry
            logChange(id)
        }
    }

    func remove(_ id: String) {
        lock.withLock {
            guard stored.removeValue(forKey: id) != nil else { return }
            logChange(id)
        }
    }

    func rename(_ id: String, to name: String, parent: String) {
        lock.withLock {
            guard var entry = stored[id], !nameTaken(name, in: parent) else { return }
            entry.item.name = name
            entry.item.parent = parent
            entry.item.version.metadata = "m\(sequence + 1)"
            stored[id] = entry
            logChange(id)
        }
    }

    func nameTaken(_ name: String, in parent: String) -> Bool {
        stored.values.contains { $0.item.parent == parent && $0.item.name == name }
    }

    func isTaken(_ name: String, in parent: String) -> Bool { lock.withLock { nameTaken(name, in: parent) } }

    /// Whether an upload of `id` carried `bytes` before `version` (an edit
    /// elsewhere, or a later upload) replaced it.
    func uploaded(_ bytes: [UInt8], of id: String, before version: String) -> Bool {
        lock.withLock {
            guard let now = Int(version.dropFirst()) else { return false }
            return uploadedVersions[id, default: []].contains { $0 < now && versions["c\($0)"] == bytes }
        }
    }

    /// Whether the store still has item `id` (a remote delete removes it).
    func has(_ id: String) -> Bool { lock.withLock { stored[id] != nil } }

    // MARK: Helpers (under the lock)

    private func newVersion(_ bytes: [UInt8]) -> String {
        sequence += 1
        let version = "c\(sequence)"
        versions[version] = bytes
        versionHashes.withLock { _ = $0.insert(Self.hash(bytes)) }
        return version
    }

    private func logChange(_ id: String) {
        sequence += 1
        changeLog.append((sequence, id))
    }

    private func anchor() -> String { "\(life):\(sequence)" }

    private func takeFault(_ wanted: Set<Fault>) -> Fault? {
        guard let index = faults.firstIndex(where: wanted.contains) else { return nil }
        return faults.remove(at: index)
    }

    /// `withLock` for a body with a typed throw.
    fileprivate func locked<T>(_ body: () throws(ExtensionFailure) -> T) throws(ExtensionFailure) -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    private func takeHook(_ point: HookPoint) -> (() -> Void)? { lock.withLock { hooks.removeValue(forKey: point) } }

    fileprivate func checkRunning() throws(ExtensionFailure) {
        guard isRunning else { throw ExtensionFailure(.unreachable, "the model's extension crashed") }
    }

    fileprivate func contents(_ path: String?) -> [UInt8] {
        guard let path, let data = FileManager.default.contents(atPath: path) else { return [] }
        return [UInt8](data)
    }
}

extension ModelRemote: ExtensionCalls {
    var state: ExtensionState {
        isRunning
            ? .running(ExtensionInfo(name: "model", version: "1", protocolVersion: "1.1", capabilities: capabilities))
            : .restarting(reason: "the model's extension crashed", attempt: 1)
    }

    var onChanged: (@Sendable () -> Void)? {
        get { nil }
        set {}
    }

    func item(_ id: String, _ control: RequestControl) throws(ExtensionFailure) -> ExtensionItem {
        try checkRunning()
        guard let item = lock.withLock({ stored[id]?.item }) else { throw ExtensionFailure(.noSuchItem, id) }
        return item
    }

    func list(_ folder: String, page: String?, _ control: RequestControl) throws(ExtensionFailure) -> ItemPage {
        try checkRunning()
        let items = lock.withLock { stored.values.map(\.item).filter { $0.parent == folder }.sorted { $0.id < $1.id } }
        return ItemPage(items: items, nextPage: nil)
    }

    func currentAnchor(_ control: RequestControl) throws(ExtensionFailure) -> String {
        try checkRunning()
        return lock.withLock { anchor() }
    }

    func changes(since anchor: String, _ control: RequestControl) throws(ExtensionFailure) -> ItemChanges {
        try checkRunning()
        return try locked { () throws(ExtensionFailure) -> ItemChanges in
            let parts = anchor.split(separator: ":").compactMap { Int($0) }
            guard parts.count == 2, parts[0] == life else { throw ExtensionFailure(.anchorExpired, anchor) }
            let ids = Set(changeLog.filter { $0.0 > parts[1] }.map(\.1))
            let updated = ids.compactMap { stored[$0]?.item }.sorted { $0.id < $1.id }
            let deleted = ids.filter { stored[$0] == nil }.sorted()
            return ItemChanges(updated: updated, deleted: deleted, anchor: self.anchor(), more: false)
        }
    }

    func fetch(_ id: String, version: String?, range: ByteRange?, _ control: RequestControl)
        throws(ExtensionFailure) -> FetchedFile
    {
        try checkRunning()
        // The bytes are read first, then the hook runs: a slow store's
        // answer of the version it read.
        let (entry, fault) = lock.withLock { (stored[id], takeFault([.shortFetch, .longFetch, .failFetch])) }
        guard let entry else { throw ExtensionFailure(.noSuchItem, id) }
        if let version, version != entry.item.version.content {
            throw ExtensionFailure(.conflict, "not at \(version)", currentVersion: entry.item.version.content)
        }
        takeHook(.fetch)?()
        try checkRunning()
        let size = Int64(entry.bytes.count)
        var offset = min(range?.offset ?? 0, size)
        var end = range.map { min(size, $0.offset + $0.length) } ?? size
        switch fault {
        case .shortFetch: if end - offset >= 2 { end = offset + (end - offset) / 2 }
        case .longFetch:
            offset = 0
            end = size
        case .failFetch: throw ExtensionFailure(.unreachable, "the model's fetch failed")
        default: break
        }
        let path = staging + "/fetch-" + UUID().uuidString
        let data = Data(entry.bytes[Int(offset)..<Int(max(offset, end))])
        guard FileManager.default.createFile(atPath: path, contents: data) else {
            throw ExtensionFailure(.internalError, "cannot stage \(path)")
        }
        return FetchedFile(path: path, version: entry.item.version.content, offset: offset, length: end - offset)
    }

    func create(_ template: ItemTemplate, contents: String?, _ control: RequestControl)
        throws(ExtensionFailure) -> ExtensionItem
    {
        try checkRunning()
        let bytes = self.contents(contents)
        if template.kind == .file { onUpload?(bytes, template.name) }
        let (item, lost) = try locked { () throws(ExtensionFailure) -> (ExtensionItem, Bool) in
            guard stored[template.parent] != nil || template.parent == ExtensionItem.rootID else {
                throw ExtensionFailure(.noSuchItem, template.parent)
            }
            guard !nameTaken(template.name, in: template.parent) else {
                throw ExtensionFailure(.exists, template.name)
            }
            nextID += 1
            let id = "i\(nextID)"
            let version = template.kind == .file ? newVersion(bytes) : ""
            if template.kind == .file { uploadedVersions[id, default: []].append(sequence) }
            let item = ExtensionItem(
                id: id, parent: template.parent, name: template.name, kind: template.kind,
                size: Int64(bytes.count), mtime: template.mtime ?? 0, mode: template.mode ?? 0o644,
                version: ItemVersion(content: version, metadata: "m\(sequence)"), target: template.target)
            stored[id] = Stored(item: item, bytes: bytes)
            logChange(id)
            return (item, takeFault([.loseAnswer]) != nil)
        }
        takeHook(.create)?()
        if lost { throw ExtensionFailure(.unreachable, "the create's answer was lost") }
        return item
    }

    func modify(
        _ id: String, baseVersion: ItemVersion, fields: ChangedFields, contents: String?, _ control: RequestControl
    ) throws(ExtensionFailure) -> ExtensionItem {
        try checkRunning()
        let bytes = contents.map { self.contents($0) }
        if let bytes { onUpload?(bytes, id) }
        let (item, lost) = try locked { () throws(ExtensionFailure) -> (ExtensionItem, Bool) in
            guard var entry = stored[id] else { throw ExtensionFailure(.noSuchItem, id) }
            if bytes != nil && baseVersion.content != entry.item.version.content {
                throw ExtensionFailure(.conflict, "content", currentVersion: entry.item.version.content)
            }
            if bytes == nil && baseVersion.metadata != entry.item.version.metadata {
                throw ExtensionFailure(.conflict, "metadata", currentVersion: entry.item.version.content)
            }
            let parent = fields.parent ?? entry.item.parent ?? ExtensionItem.rootID
            let name = fields.name ?? entry.item.name
            if (name, parent) != (entry.item.name, entry.item.parent ?? "") && nameTaken(name, in: parent) {
                throw ExtensionFailure(.exists, name)
            }
            entry.item.name = name
            entry.item.parent = parent
            if let mode = fields.mode { entry.item.mode = mode }
            if let mtime = fields.mtime { entry.item.mtime = mtime }
            if let bytes {
                entry.bytes = bytes
                entry.item.size = Int64(bytes.count)
                entry.item.version.content = newVersion(bytes)
                uploadedVersions[id, default: []].append(sequence)
            }
            entry.item.version.metadata = "m\(sequence + 1)"
            stored[id] = entry
            logChange(id)
            return (entry.item, takeFault([.loseAnswer]) != nil)
        }
        takeHook(.modify)?()
        if lost { throw ExtensionFailure(.unreachable, "the modify's answer was lost") }
        return item
    }

    func delete(_ id: String, baseVersion: ItemVersion, _ control: RequestControl) throws(ExtensionFailure) {
        try checkRunning()
        let lost = try locked { () throws(ExtensionFailure) -> Bool in
            guard let entry = stored[id] else { throw ExtensionFailure(.noSuchItem, id) }
            if entry.item.kind == .file && baseVersion.content != entry.item.version.content {
                throw ExtensionFailure(.conflict, "content", currentVersion: entry.item.version.content)
            }
            if stored.values.contains(where: { $0.item.parent == id }) { throw ExtensionFailure(.notEmpty, id) }
            stored[id] = nil
            logChange(id)
            return takeFault([.loseAnswer]) != nil
        }
        if lost { throw ExtensionFailure(.unreachable, "the delete's answer was lost") }
    }
}

/// One daemon's life: its calls to the extension and its replica writer.
/// When the model kills that daemon, every later call of its threads
/// parks for good, as the threads of a killed process do nothing more:
/// the next daemon finds the replica and its records as the kill left
/// them.
final class DaemonLife: @unchecked Sendable {
    private let lock = NSLock()
    private var killed = false
    /// A writer operation after which the daemon dies (the model's crash
    /// point inside a step), and whether it did.
    private var killAfter: String?
    private(set) var diedInStep = false
    /// Runs inside the next writer operation of that kind, before it.
    private var writerHooks: [String: () -> Void] = [:]

    var isKilled: Bool { lock.withLock { killed } }

    func kill() { lock.withLock { killed = true } }
    func kill(after operation: String?) { lock.withLock { killAfter = operation } }
    func hook(before operation: String, _ body: @escaping () -> Void) {
        lock.withLock { writerHooks[operation] = body }
    }

    /// Parks the calling thread for good if this daemon is dead.
    func parkIfKilled() {
        guard isKilled else { return }
        DispatchSemaphore(value: 0).wait()
    }

    func before(_ operation: String) {
        parkIfKilled()
        lock.withLock { writerHooks.removeValue(forKey: operation) }?()
        parkIfKilled()
    }

    func after(_ operation: String) {
        let dies: Bool = lock.withLock {
            guard killAfter == operation else { return false }
            killAfter = nil
            killed = true
            diedInStep = true
            return true
        }
        if dies { DispatchSemaphore(value: 0).wait() }
    }
}

/// The calls of one daemon's life to the shared remote.
final class LifeCalls: ExtensionCalls, @unchecked Sendable {
    let remote: ModelRemote
    let life: DaemonLife

    init(_ remote: ModelRemote, _ life: DaemonLife) {
        self.remote = remote
        self.life = life
    }

    var state: ExtensionState { remote.state }
    var onChanged: (@Sendable () -> Void)? {
        get { nil }
        set {}
    }

    private func call<T>(_ body: () throws(ExtensionFailure) -> T) throws(ExtensionFailure) -> T {
        life.parkIfKilled()
        let answer = try body()
        life.parkIfKilled()
        return answer
    }

    func item(_ id: String, _ control: RequestControl) throws(ExtensionFailure) -> ExtensionItem {
        try call { () throws(ExtensionFailure) in try remote.item(id, control) }
    }
    func list(_ folder: String, page: String?, _ control: RequestControl) throws(ExtensionFailure) -> ItemPage {
        try call { () throws(ExtensionFailure) in try remote.list(folder, page: page, control) }
    }
    func currentAnchor(_ control: RequestControl) throws(ExtensionFailure) -> String {
        try call { () throws(ExtensionFailure) in try remote.currentAnchor(control) }
    }
    func changes(since anchor: String, _ control: RequestControl) throws(ExtensionFailure) -> ItemChanges {
        try call { () throws(ExtensionFailure) in try remote.changes(since: anchor, control) }
    }
    func fetch(_ id: String, version: String?, range: ByteRange?, _ control: RequestControl)
        throws(ExtensionFailure) -> FetchedFile
    {
        try call { () throws(ExtensionFailure) in try remote.fetch(id, version: version, range: range, control) }
    }
    func create(_ template: ItemTemplate, contents: String?, _ control: RequestControl)
        throws(ExtensionFailure) -> ExtensionItem
    {
        try call { () throws(ExtensionFailure) in try remote.create(template, contents: contents, control) }
    }
    func modify(
        _ id: String, baseVersion: ItemVersion, fields: ChangedFields, contents: String?, _ control: RequestControl
    ) throws(ExtensionFailure) -> ExtensionItem {
        try call { () throws(ExtensionFailure) in
            try remote.modify(id, baseVersion: baseVersion, fields: fields, contents: contents, control)
        }
    }
    func delete(_ id: String, baseVersion: ItemVersion, _ control: RequestControl) throws(ExtensionFailure) {
        try call { () throws(ExtensionFailure) in try remote.delete(id, baseVersion: baseVersion, control) }
    }
}

/// The replica writer of one daemon's life: the real folder operations,
/// with the life's hooks and crash points around them.
struct LifeWriter: ReplicaWriting {
    let folder: ReplicaFolder
    let life: DaemonLife

    private func run<T>(_ name: String, _ body: () throws(ReplicaFolder.Failure) -> T) throws(ReplicaFolder.Failure)
        -> T
    {
        life.before(name)
        let result = try body()
        life.after(name)
        return result
    }

    func placeholder(_ path: String, size: Int64, mtime: Double, mode: UInt32) throws(ReplicaFolder.Failure)
        -> UInt64
    {
        try run("placeholder") { () throws(ReplicaFolder.Failure) in
            try folder.placeholder(path, size: size, mtime: mtime, mode: mode)
        }
    }
    func reset(_ path: String, inode: UInt64, size: Int64, mtime: Double, mode: UInt32) throws(ReplicaFolder.Failure) {
        try run("reset") { () throws(ReplicaFolder.Failure) in
            try folder.reset(path, inode: inode, size: size, mtime: mtime, mode: mode)
        }
    }
    func setAttributes(_ path: String, mtime: Double, mode: UInt32) throws(ReplicaFolder.Failure) {
        try run("attributes") { () throws(ReplicaFolder.Failure) in
            try folder.setAttributes(path, mtime: mtime, mode: mode)
        }
    }
    func makeFolder(_ path: String, mode: UInt32, mtime: Double) throws(ReplicaFolder.Failure) -> UInt64 {
        try run("folder") { () throws(ReplicaFolder.Failure) in try folder.makeFolder(path, mode: mode, mtime: mtime) }
    }
    func makeSymlink(_ path: String, target: String) throws(ReplicaFolder.Failure) -> UInt64 {
        try run("symlink") { () throws(ReplicaFolder.Failure) in try folder.makeSymlink(path, target: target) }
    }
    func rename(_ from: String, to: String) throws(ReplicaFolder.Failure) {
        try run("rename") { () throws(ReplicaFolder.Failure) in try folder.rename(from, to: to) }
    }
    func remove(_ path: String) throws(ReplicaFolder.Failure) {
        try run("remove") { () throws(ReplicaFolder.Failure) in try folder.remove(path) }
    }
    func copy(_ from: String, to: String) throws(ReplicaFolder.Failure) -> UInt64 {
        try run("copy") { () throws(ReplicaFolder.Failure) in try folder.copy(from, to: to) }
    }
}
