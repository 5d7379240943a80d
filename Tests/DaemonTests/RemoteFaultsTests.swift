import Glibc
import Policy
import ProviderExtensions
import ScopeFS
import Synchronization
import Testing

@testable import Daemon

/// A store whose only item is `a` at version `v1`: what the layer wraps.
final class OneItemStore: ExtensionCalls, @unchecked Sendable {
    var state: ExtensionState { .stopped }
    var onChanged: (@Sendable () -> Void)?
    let modified = Mutex<[ItemVersion]>([])
    let item = ExtensionItem(
        id: "a", parent: ExtensionItem.rootID, name: "a.txt", kind: .file, size: 3, mtime: 0, mode: 0o644,
        version: ItemVersion(content: "v1", metadata: "m1"))

    func item(_ id: String, _ control: RequestControl) throws(ExtensionFailure) -> ExtensionItem { item }
    func list(_ folder: String, page: String?, _ control: RequestControl) throws(ExtensionFailure) -> ItemPage {
        ItemPage(items: [item], nextPage: nil)
    }
    func currentAnchor(_ control: RequestControl) throws(ExtensionFailure) -> String { "0" }
    func changes(since anchor: String, _ control: RequestControl) throws(ExtensionFailure) -> ItemChanges {
        ItemChanges(updated: [], deleted: [], anchor: "0", more: false)
    }
    func fetch(_ id: String, version: String?, range: ByteRange?, _ control: RequestControl)
        throws(ExtensionFailure) -> FetchedFile
    {
        guard version == nil || version == "v1" else { throw ExtensionFailure(.conflict, "not v1") }
        return FetchedFile(path: "/staged", version: "v1", offset: 0, length: 3)
    }
    func create(_ template: ItemTemplate, contents: String?, _ control: RequestControl)
        throws(ExtensionFailure) -> ExtensionItem
    { item }
    func modify(
        _ id: String, baseVersion: ItemVersion, fields: ChangedFields, contents: String?, _ control: RequestControl
    ) throws(ExtensionFailure) -> ExtensionItem {
        modified.withLock { $0.append(baseVersion) }
        return item
    }
    func delete(_ id: String, baseVersion: ItemVersion, _ control: RequestControl) throws(ExtensionFailure) {}
}

/// The layer of owner's remote rules and edits between a replica and its
/// extension (issue 48), on a fake store.
@Suite struct RemoteFaultsTests {
    func layer() -> (RemoteFaults, OneItemStore, FaultInjector) {
        let store = OneItemStore()
        let faults = FaultInjector()
        return (
            RemoteFaults(store, provider: "cloud", faults: faults, stallLimit: 0.05, record: { _ in }), store, faults
        )
    }

    @Test("a remote change is a new version: the old one is refused, the next changes bring the new one")
    func change() throws {
        let (remote, store, _) = layer()
        let control = RequestControl()
        remote.change("a")
        let changes = try remote.changes(since: "0", control)
        let edited = try #require(changes.updated.first?.version.content)
        #expect(edited != "v1" && edited.hasPrefix("v1"))
        #expect(throws: ExtensionFailure.self) { try remote.fetch("a", version: "v1", range: nil, control) }
        #expect(try remote.fetch("a", version: edited, range: nil, control).version == edited)
        #expect(throws: ExtensionFailure.self) {
            try remote.modify(
                "a", baseVersion: ItemVersion(content: "v1", metadata: "m1"), fields: ChangedFields(),
                contents: nil, control)
        }
        _ = try remote.modify(
            "a", baseVersion: ItemVersion(content: edited, metadata: "m1"), fields: ChangedFields(), contents: nil,
            control)
        #expect(store.modified.withLock { $0.map(\.content) } == ["v1"], "the store sees its own version")
        #expect(try remote.item("a", control).version.content == "v1", "after the upload, the store's again")
        #expect(try remote.changes(since: "0", control).updated.isEmpty)
    }

    @Test("a remote delete: gone from listings and changes, noSuchItem for calls on it")
    func delete() throws {
        let (remote, _, _) = layer()
        let control = RequestControl()
        remote.delete("a")
        #expect(try remote.changes(since: "0", control).deleted == ["a"])
        #expect(try remote.list(ExtensionItem.rootID, page: nil, control).items.isEmpty)
        do {
            _ = try remote.item("a", control)
            Issue.record("an item deleted remotely was answered")
        } catch {
            #expect(error.code == .noSuchItem)
        }
    }

    @Test("rules: a protocol error on the nth call, a stall that ends as the stall limit, a cancel")
    func rules() throws {
        let (remote, _, faults) = layer()
        let control = RequestControl()
        _ = faults.add(FaultRule(operation: "fetch", nth: 2, provider: "cloud", remoteError: "quota"))
        _ = try remote.fetch("a", version: nil, range: nil, control)
        do {
            _ = try remote.fetch("a", version: nil, range: nil, control)
            Issue.record("the second fetch was not failed")
        } catch {
            #expect(error.code == .quota && error.errno == EDQUOT)
        }
        _ = try remote.fetch("a", version: nil, range: nil, control)
        faults.clear()
        _ = faults.add(FaultRule(operation: "*", provider: "cloud", remoteError: "stall"))
        do {
            _ = try remote.currentAnchor(control)
            Issue.record("a stalled call returned")
        } catch {
            #expect(error.stalled && error.errno == ETIMEDOUT)
        }
        let cancelled = RequestControl()
        cancelled.cancel()
        do {
            _ = try remote.currentAnchor(cancelled)
            Issue.record("a cancelled stall returned")
        } catch {
            #expect(error.code == .cancelled)
        }
    }
}
