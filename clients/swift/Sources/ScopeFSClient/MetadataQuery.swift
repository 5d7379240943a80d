import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A live query of the app's documents (issue 17), as `NSMetadataQuery`
/// keeps one: `start()` gathers the initial results ("finished
/// gathering"), then `next(timeout:)` or `updates` deliver additions,
/// removals and changes as they happen — the events of
/// `scopefs query --follow`. Only the calling app's documents are listed:
/// the daemon takes the app from the kernel, not from the request.
/// docs/API.md "Live queries".
public final class MetadataQuery: @unchecked Sendable {
    /// NSMetadataQuery's search scopes, as `scopefs query --scope`.
    public enum SearchScope: String, Sendable {
        /// The app's own documents (NSMetadataQueryUbiquitousDocumentsScope).
        case documents
        /// The documents its references point at
        /// (NSMetadataQueryAccessibleUbiquitousExternalDocumentsScope).
        case external
        case all
    }

    /// One document (NSMetadataItem's fields).
    public struct Item: Decodable, Sendable, Equatable {
        /// The document (for a reference: the original, in the app's view).
        public var url: URL { DocumentPresenter.url(inApp: path) }
        /// Where it lives in the app's container (for a reference: the stub).
        public var urlInLocalContainer: URL { DocumentPresenter.url(inApp: pathInLocalContainer) }
        public let isExternalDocument: Bool
        public let containerDisplayName: String

        let path: String
        let pathInLocalContainer: String

        enum CodingKeys: String, CodingKey {
            case path = "url"
            case pathInLocalContainer = "urlInLocalContainer"
            case isExternalDocument
            case containerDisplayName
        }
    }

    public enum Event: Sendable, Equatable {
        /// The initial results (NSMetadataQueryDidFinishGathering).
        case finishedGathering([Item])
        /// Updates (NSMetadataQueryDidUpdate's added, removed and changed items).
        case added(Item)
        case removed(Item)
        case changed(Item)
    }

    public let searchScope: SearchScope
    public let nameGlob: String?
    private let socketPath: String
    private let lock = NSLock()
    private var digest: String?
    private var known: [String: Item] = [:]
    private var pending: [Event] = []
    private var gathered = false

    public init(searchScope: SearchScope = .all, nameGlob: String? = nil, stateDirectory: String? = nil) {
        self.searchScope = searchScope
        self.nameGlob = nameGlob
        socketPath = ControlSocket.stateDirectory(explicit: stateDirectory) + "/control.sock"
    }

    /// The results as last delivered, sorted by their place in the container.
    public var results: [Item] {
        lock.lock()
        defer { lock.unlock() }
        return known.values.sorted { $0.pathInLocalContainer < $1.pathInLocalContainer }
    }

    /// Gathers the initial results (the first event `next` delivers).
    @discardableResult
    public func start() throws(ScopeFSError) -> [Item] {
        lock.lock()
        defer { lock.unlock() }
        return try gather()
    }

    /// The next event: `.finishedGathering` first (unless `start()` already
    /// gathered), then each update, waiting
    /// up to `timeout` seconds for one; nil when none came.
    public func next(timeout: Double = 10) throws(ScopeFSError) -> Event? {
        lock.lock()
        defer { lock.unlock() }
        if !gathered { return .finishedGathering(try gather()) }
        let deadline = Date().addingTimeInterval(timeout)
        while pending.isEmpty {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            update(try ask(wait: min(left, 10)))
        }
        return pending.removeFirst()
    }

    /// Events as they come, until the consuming task stops. Each wait
    /// blocks a thread for up to 10 s.
    public var updates: AsyncStream<Event> {
        AsyncStream { continuation in
            let task = Task.detached { [self] in
                while !Task.isCancelled {
                    if let event = try? next(timeout: 10) { continuation.yield(event) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    // MARK: The daemon's answers

    private func gather() throws(ScopeFSError) -> [Item] {
        let first = try ask(wait: 0)
        known = Dictionary(first.map { ($0.pathInLocalContainer, $0) }, uniquingKeysWith: { a, _ in a })
        gathered = true
        pending = []
        return first
    }

    /// What changed since the last answer, queued in container order.
    private func update(_ now: [Item]) {
        let current = Dictionary(now.map { ($0.pathInLocalContainer, $0) }, uniquingKeysWith: { a, _ in a })
        for (key, item) in current.sorted(by: { $0.key < $1.key }) where known[key] != item {
            pending.append(known[key] == nil ? .added(item) : .changed(item))
        }
        for (key, item) in known.sorted(by: { $0.key < $1.key }) where current[key] == nil {
            pending.append(.removed(item))
        }
        known = current
    }

    private struct Answer: Decodable {
        let ok: Bool
        let code: Int32?
        let message: String?
        let results: [Item]?
        let digest: String?
    }

    /// One `query` request: at once (`wait` 0 or no digest yet), else when
    /// the results differ from the last ones or `wait` seconds passed.
    private func ask(wait: Double) throws(ScopeFSError) -> [Item] {
        var request: [String: Any] = ["op": "query", "scope": searchScope.rawValue]
        if let nameGlob { request["name"] = nameGlob }
        if let digest, wait > 0 {
            request["digest"] = digest
            request["waitSeconds"] = wait
        }
        let answer = try ControlSocket.ask(
            try? JSONSerialization.data(withJSONObject: request), as: Answer.self, socketPath: socketPath,
            operation: .watch)
        guard answer.ok, let results = answer.results else {
            throw ScopeFSError(
                errno: answer.code == 77 ? EPERM : EPROTO, operation: .watch, path: socketPath, message: answer.message)
        }
        digest = answer.digest
        return results
    }
}
