import Foundation
import Glibc
import Policy
import ProviderExtensions
import ScopeFS
import Synchronization

/// Cloud storage that misbehaves on cue (issue 48): the layer between a
/// replica and its extension, any extension, where the owner's remote
/// rules (`FaultRule.provider`, `scopefs fault add --provider`) make calls
/// fail with a protocol error, stall or wait, and where the remote is made
/// to change or delete an item (`RemoteEdits`). The replica above sees
/// what a real store would send, so the app sees what docs/PROVIDERS.md
/// says it sees: errnos, `user.scopefs.state`, conflict copies, presenters.
/// With no rule and no edit a call costs one relaxed load and a lock-free
/// check of an empty table.
final class RemoteFaults: ExtensionCalls {
    let inner: any ExtensionCalls
    private let provider: ProviderID
    private let faults: FaultInjector
    private let stallLimit: Double
    private let record: @Sendable (Event) -> Void
    let edits = Mutex(RemoteEdits())

    init(
        _ inner: any ExtensionCalls, provider: ProviderID, faults: FaultInjector, stallLimit: Double,
        record: @escaping @Sendable (Event) -> Void
    ) {
        self.inner = inner
        self.provider = provider
        self.faults = faults
        self.stallLimit = stallLimit
        self.record = record
    }

    var state: ExtensionState { inner.state }

    var onChanged: (@Sendable () -> Void)? {
        get { inner.onChanged }
        set { inner.onChanged = newValue }
    }

    // MARK: The remote changes an item

    /// The remote has a new version of `id` (same bytes, a new content
    /// version): a replica holding the old one resets it, an open file
    /// ends with ESTALE (S49), an upload based on the old one conflicts.
    func change(_ id: String) {
        edits.withLock { $0.change(id) }
        note("change", id)
        inner.onChanged?()
    }

    /// The remote deleted `id`: the replica removes it at its next pull.
    func delete(_ id: String) {
        edits.withLock { $0.delete(id) }
        note("delete", id)
        inner.onChanged?()
    }

    private func note(_ what: String, _ id: String) {
        record(
            Event(
                time: Date().timeIntervalSince1970, kind: .fault, app: nil, path: "/Providers/\(provider)",
                operation: "remote \(what) \(id)"))
    }

    // MARK: Calls

    func item(_ id: String, _ control: RequestControl) throws(ExtensionFailure) -> ExtensionItem {
        try inject("item", control)
        try refuseDeleted(id)
        return shown(try inner.item(id, control))
    }

    func list(_ folder: String, page: String?, _ control: RequestControl) throws(ExtensionFailure) -> ItemPage {
        try inject("list", control)
        var answer = try inner.list(folder, page: page, control)
        answer.items = edits.withLock { edits in answer.items.compactMap { edits.shown($0) } }
        return answer
    }

    func currentAnchor(_ control: RequestControl) throws(ExtensionFailure) -> String {
        try inject("currentAnchor", control)
        return try inner.currentAnchor(control)
    }

    func changes(since anchor: String, _ control: RequestControl) throws(ExtensionFailure) -> ItemChanges {
        try inject("changes", control)
        var changes = try inner.changes(since: anchor, control)
        let (updated, deleted) = edits.withLock { $0.takePending() }
        // The edited items come with this batch, at their edited versions.
        for id in updated where !changes.updated.contains(where: { $0.id == id }) {
            if let item = try? inner.item(id, control) { changes.updated.append(item) }
        }
        changes.updated = edits.withLock { edits in changes.updated.compactMap { edits.shown($0) } }
        changes.deleted += deleted.filter { !changes.deleted.contains($0) }
        return changes
    }

    func fetch(_ id: String, version: String?, range: ByteRange?, _ control: RequestControl)
        throws(ExtensionFailure) -> FetchedFile
    {
        try inject("fetch", control)
        try refuseDeleted(id)
        // A version from before the remote's change is no longer there.
        if let version, !edits.withLock({ $0.isCurrent(id, version) }) {
            throw ExtensionFailure(.conflict, "\(id): changed remotely (scopefs fault) since \(version)")
        }
        var fetched = try inner.fetch(id, version: edits.withLock { $0.realVersion(version) }, range: range, control)
        if let label = edits.withLock({ $0.label(id, real: fetched.version) }) { fetched.version = label }
        return fetched
    }

    func create(_ template: ItemTemplate, contents: String?, _ control: RequestControl)
        throws(ExtensionFailure) -> ExtensionItem
    {
        try create(template, contents: contents, thumbnail: nil, control)
    }

    func create(_ template: ItemTemplate, contents: String?, thumbnail: String?, _ control: RequestControl)
        throws(ExtensionFailure) -> ExtensionItem
    {
        try inject("create", control)
        return try inner.create(template, contents: contents, thumbnail: thumbnail, control)
    }

    func thumbnail(_ id: String, size: Int, _ control: RequestControl) throws(ExtensionFailure) -> [UInt8]? {
        try refuseDeleted(id)
        return try inner.thumbnail(id, size: size, control)
    }

    func modify(
        _ id: String, baseVersion: ItemVersion, fields: ChangedFields, contents: String?, _ control: RequestControl
    ) throws(ExtensionFailure) -> ExtensionItem {
        try modify(id, baseVersion: baseVersion, fields: fields, contents: contents, thumbnail: nil, control)
    }

    func modify(
        _ id: String, baseVersion: ItemVersion, fields: ChangedFields, contents: String?, thumbnail: String?,
        _ control: RequestControl
    ) throws(ExtensionFailure) -> ExtensionItem {
        try inject("modify", control)
        let base = try based(id, baseVersion)
        let item = try inner.modify(
            id, baseVersion: base, fields: fields, contents: contents, thumbnail: thumbnail, control)
        // The store now holds this upload: the edit is behind it.
        edits.withLock { $0.settle(id) }
        return item
    }

    func delete(_ id: String, baseVersion: ItemVersion, _ control: RequestControl) throws(ExtensionFailure) {
        try inject("delete", control)
        try inner.delete(id, baseVersion: try based(id, baseVersion), control)
        edits.withLock { $0.settle(id) }
    }

    // MARK: Edits

    private func refuseDeleted(_ id: String) throws(ExtensionFailure) {
        if edits.withLock({ $0.deleted.contains(id) }) {
            throw ExtensionFailure(.noSuchItem, "\(id): deleted remotely (scopefs fault)")
        }
    }

    private func shown(_ item: ExtensionItem) -> ExtensionItem {
        edits.withLock { $0.shown(item) } ?? item
    }

    /// The real base version of a write to `id`; a conflict when the write
    /// started from a version before the remote's edit, as a store that
    /// checks base versions answers (docs/PROVIDERS.md, `modify`).
    private func based(_ id: String, _ base: ItemVersion) throws(ExtensionFailure) -> ItemVersion {
        let (deleted, current) = edits.withLock { ($0.deleted.contains(id), $0.isCurrent(id, base.content)) }
        if deleted { throw ExtensionFailure(.noSuchItem, "\(id): deleted remotely (scopefs fault)") }
        guard current else {
            throw ExtensionFailure(.conflict, "\(id): changed remotely (scopefs fault) since \(base.content)")
        }
        var real = base
        real.content = edits.withLock { $0.realVersion(base.content) } ?? base.content
        return real
    }

    // MARK: Rules

    /// Applies the remote rules to one call: waits (cancellable), then
    /// fails with the rule's protocol error, or stalls until the caller
    /// gives up or the stall limit passes.
    private func inject(_ method: String, _ control: RequestControl) throws(ExtensionFailure) {
        guard faults.isRemoteActive else { return }
        let effects = faults.remoteEffects(provider: provider, operation: method)
        if effects.latencyMilliseconds > 0 {
            event(method, "+\(effects.latencyMilliseconds)ms")
            try wait(Double(effects.latencyMilliseconds) / 1000, control, method)
        }
        guard let error = effects.error else { return }
        event(method, error.name)
        if error.name == "stall" {
            try wait(stallLimit, control, method)
            throw ExtensionFailure(
                .busy, "\(method): no answer and no progress for \(stallLimit) s (scopefs fault)", stalled: true)
        }
        let code = ExtensionErrorCode.allCases.first { $0.name == error.name } ?? .internalError
        throw ExtensionFailure(code, "\(method): \(error.name) (scopefs fault rule #\(error.rule))")
    }

    /// Sleeps `seconds` in short steps; a cancel by the caller (a revoke, a
    /// signal) ends it as the host's `cancelled` would.
    private func wait(_ seconds: Double, _ control: RequestControl, _ method: String) throws(ExtensionFailure) {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if control.isCancelled { throw ExtensionFailure(.cancelled, "\(method): cancelled") }
            usleep(UInt32(min(0.01, max(0, deadline.timeIntervalSinceNow)) * 1_000_000))
        }
    }

    private func event(_ method: String, _ what: String) {
        record(
            Event(
                time: Date().timeIntervalSince1970, kind: .fault, app: nil, path: "/Providers/\(provider)",
                operation: "remote \(method) \(what)"))
    }
}

/// The remote's edits made on cue: items changed (a new content version
/// over the store's own, `REAL~remote-N`) or deleted, and what the next
/// `changes` must bring. Pure, behind `RemoteFaults.edits`.
struct RemoteEdits: Sendable {
    /// How many times each item was changed.
    private(set) var changed: [String: Int] = [:]
    private(set) var deleted: Set<String> = []
    private var pendingUpdates: [String] = []
    private var pendingDeletes: [String] = []
    /// The store's version behind each edited one handed out.
    private var reals: [String: String] = [:]

    static let marker = "~remote-"

    mutating func change(_ id: String) {
        changed[id, default: 0] += 1
        if !pendingUpdates.contains(id) { pendingUpdates.append(id) }
    }

    mutating func delete(_ id: String) {
        deleted.insert(id)
        pendingUpdates.removeAll { $0 == id }
        if !pendingDeletes.contains(id) { pendingDeletes.append(id) }
    }

    /// The store took a write of `id`: its version is the store's again.
    mutating func settle(_ id: String) {
        changed[id] = nil
        deleted.remove(id)
    }

    mutating func takePending() -> (updated: [String], deleted: [String]) {
        defer {
            pendingUpdates = []
            pendingDeletes = []
        }
        return (pendingUpdates, pendingDeletes)
    }

    /// `item` as the edited remote has it: nil when deleted, its content
    /// version edited when changed.
    mutating func shown(_ item: ExtensionItem) -> ExtensionItem? {
        if deleted.contains(item.id) { return nil }
        guard let label = label(item.id, real: item.version.content) else { return item }
        var shown = item
        shown.version.content = label
        return shown
    }

    /// The edited version of `id` over the store's `real` one; nil when
    /// the item was not changed.
    mutating func label(_ id: String, real: String) -> String? {
        guard let count = changed[id] else { return nil }
        let label = real + Self.marker + String(count)
        reals[label] = real
        return label
    }

    /// Whether `version` of `id` is the remote's current one: false for a
    /// version from before its latest change.
    func isCurrent(_ id: String, _ version: String) -> Bool {
        guard let count = changed[id] else { return true }
        return version.hasSuffix(Self.marker + String(count))
    }

    /// The store's own version behind `version` (itself when not edited).
    func realVersion(_ version: String?) -> String? {
        guard let version else { return nil }
        return reals[version] ?? version
    }
}
