import Foundation

/// A provider extension, in the shape of Apple's
/// `NSFileProviderReplicatedExtension` (docs/PROVIDERS.md). Implement what
/// the store supports; the defaults answer `notSupported`. Each method gets
/// the request's context for cancellation and progress. Requests run
/// concurrently, so an implementation is `Sendable` (an actor, or a class
/// guarding its state with a lock).
public protocol ReplicatedExtension: Sendable {
    /// The extension's own name and version, for `status` and events.
    var name: String { get }
    var version: String { get }

    /// Connect to the store; throw `notAuthenticated`, `serverUnreachable`,
    /// `invalidParams` (bad options) or `noSuchItem` (no such container).
    /// Keep `connection` to send `changed` (or `log`) outside a request,
    /// from a watcher of the store.
    func initialize(
        providerIdentifier: String, stagingDirectory: URL, options: [String: String], connection: ExtensionConnection
    ) async throws -> Capabilities
    func item(for identifier: ItemIdentifier, request: RequestContext) async throws -> Item
    /// One page of a folder's children, at most `pageSize` items.
    func enumerateItems(in container: ItemIdentifier, page: String?, pageSize: Int, request: RequestContext)
        async throws -> ItemPage
    func currentSyncAnchor(request: RequestContext) async throws -> String
    func enumerateChanges(since anchor: String, request: RequestContext) async throws -> ItemChanges
    func fetchContents(
        for identifier: ItemIdentifier, version: String?, range: ByteRange?, request: RequestContext
    ) async throws -> FetchedContents
    func createItem(basedOn template: ItemTemplate, contents: URL?, request: RequestContext) async throws -> Item
    func modifyItem(
        _ identifier: ItemIdentifier, baseVersion: ItemVersion, changedFields: ChangedFields, contents: URL?,
        request: RequestContext
    ) async throws -> Item
    func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion, request: RequestContext) async throws
    /// `thumbnail` (protocol 1.2, only when `Capabilities.thumbnails`): the
    /// item's preview, at most `size` pixels a side, staged; nil, it has
    /// none. Never fetch the whole document for it (SPEC S50).
    func fetchThumbnail(for identifier: ItemIdentifier, size: Int, request: RequestContext) async throws
        -> StagedThumbnail?
    /// The preview the saving app wrote, sent with `create` or `modify`
    /// (`thumbnailPath`): keep it if the store can. The file is the
    /// daemon's: copy it before returning. A failure is logged; the
    /// document's upload stands.
    func saveThumbnail(for identifier: ItemIdentifier, from url: URL, request: RequestContext) async throws
    /// Finish or abandon work; the daemon sends `exit` next.
    func shutdown() async
}

extension ReplicatedExtension {
    public func item(for identifier: ItemIdentifier, request: RequestContext) async throws -> Item {
        throw ExtensionError.notSupported("item")
    }
    public func enumerateItems(in container: ItemIdentifier, page: String?, pageSize: Int, request: RequestContext)
        async throws -> ItemPage
    {
        throw ExtensionError.notSupported("list")
    }
    public func currentSyncAnchor(request: RequestContext) async throws -> String {
        throw ExtensionError.notSupported("currentAnchor")
    }
    public func enumerateChanges(since anchor: String, request: RequestContext) async throws -> ItemChanges {
        throw ExtensionError.notSupported("changes")
    }
    public func fetchContents(
        for identifier: ItemIdentifier, version: String?, range: ByteRange?, request: RequestContext
    ) async throws -> FetchedContents {
        throw ExtensionError.notSupported("fetch")
    }
    public func createItem(basedOn template: ItemTemplate, contents: URL?, request: RequestContext) async throws
        -> Item
    {
        throw ExtensionError.notSupported("create")
    }
    public func modifyItem(
        _ identifier: ItemIdentifier, baseVersion: ItemVersion, changedFields: ChangedFields, contents: URL?,
        request: RequestContext
    ) async throws -> Item {
        throw ExtensionError.notSupported("modify")
    }
    public func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion, request: RequestContext)
        async throws
    {
        throw ExtensionError.notSupported("delete")
    }
    public func fetchThumbnail(for identifier: ItemIdentifier, size: Int, request: RequestContext) async throws
        -> StagedThumbnail?
    {
        throw ExtensionError.notSupported("thumbnail")
    }
    public func saveThumbnail(for identifier: ItemIdentifier, from url: URL, request: RequestContext) async throws {}
    public func shutdown() async {}
}

/// One request in flight: its cancellation (`$/cancel`) and `$/progress`.
public final class RequestContext: @unchecked Sendable {
    public let id: JSONValue
    public let method: String
    let server: ExtensionServer
    private let lock = NSLock()
    private var cancelledFlag = false
    private var lastProgress = Date.distantPast

    init(id: JSONValue, method: String, server: ExtensionServer) {
        self.id = id
        self.method = method
        self.server = server
    }

    /// True after `$/cancel` for this request, or when its task was cancelled.
    public var isCancelled: Bool { lock.withLock { cancelledFlag } || Task.isCancelled }

    func cancel() { lock.withLock { cancelledFlag = true } }

    /// Throws `cancelled` once the daemon no longer wants the answer.
    public func checkCancelled() throws {
        if isCancelled { throw ExtensionError(.cancelled, "the daemon cancelled the request") }
    }

    /// Sends `$/progress` (at most every 0.1 s; the final one always).
    public func progress(completed: Int64, total: Int64) {
        let now = Date()
        let send = lock.withLock {
            guard completed >= total || now.timeIntervalSince(lastProgress) >= 0.1 else { return false }
            lastProgress = now
            return true
        }
        if send {
            server.notify("$/progress", ["id": id, "completed": .int(completed), "total": .int(total)])
        }
    }

    /// A new file in the staging folder (mode 0600) for `fetch`'s answer.
    public func makeStagingFile() throws -> (descriptor: Int32, url: URL) {
        let directory = server.stagingDirectory
        var template = Array(directory.appendingPathComponent("fetch-XXXXXX").path.utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw ExtensionError.fromErrno(errno, "staging file") }
        let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return (descriptor, URL(fileURLWithPath: path))
    }

    /// Tells the daemon to call `changes` (for `changes: .notify`).
    public func signalChanged() { server.notify("changed", [:]) }
}

/// The extension's side of the pipe, for notifications outside a request.
public struct ExtensionConnection: Sendable {
    let server: ExtensionServer

    public enum LogLevel: String, Sendable { case debug, info, warning, error }

    /// `changed`: the store changed, the daemon should call `changes`.
    /// A signal only; the daemon coalesces them.
    public func signalChanged() { server.notify("changed", [:]) }

    /// `log`: a line for the daemon's log (stderr works too).
    public func log(_ level: LogLevel, _ message: String) {
        server.notify("log", ["level": .string(level.rawValue), "message": .string(message)])
    }
}
