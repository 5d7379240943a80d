import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What happens to the app's documents (issue 17), as `NSFilePresenter`
/// hears it: a document arrived, was revoked, restored, forgotten, moved
/// (with its new URL), deleted or changed (its content, on the host or by
/// another app), or another app waits for it (`save` your changes, then
/// `relinquish`: end your claim). Items inside a granted folder are told
/// too (`isSubitem`): `appeared`, `moved`, `deleted` and `changed` (issue
/// 31). `FilePresenter` and `NSFilePresenter` turn these into Apple's
/// callbacks. docs/API.md "Hearing about documents".
public struct DocumentNotice: Decodable, Sendable, Equatable {
    public enum Kind: String, Decodable, Sendable {
        case arrived, revoked, restored, forgotten, moved, deleted, changed, save, relinquish
        /// An item appeared inside a granted folder (always a subitem).
        case appeared
        /// An extension's item changed its `user.scopefs.state` (downloaded,
        /// evicted, uploading, uploaded, in conflict...): Apple's
        /// `presentedItemDidChangeUbiquityAttributes(_:)`.
        case state
    }

    public let kind: Kind
    public let grant: Int64
    public let provider: String
    /// The item's URL in the app's view (its new one after a move).
    public var url: URL { DocumentPresenter.url(inApp: path) }
    /// With `.moved`: where it was.
    public var oldURL: URL? { oldPath.map(DocumentPresenter.url(inApp:)) }
    /// Whether the notice is about an item inside a granted folder, not
    /// the granted item itself (Apple's `presentedSubitem...` callbacks).
    public var isSubitem: Bool { subitem ?? false }

    let path: String
    let oldPath: String?
    let subitem: Bool?
}

/// A subscription to the app's document notices, from the moment it is
/// made. `next(timeout:)` waits for the next one; `notices` is the same as
/// an `AsyncStream` for a presenter loop.
public final class DocumentPresenter: @unchecked Sendable {
    private let socketPath: String
    private var cursor: UInt64
    private var pending: [DocumentNotice] = []
    private let lock = NSLock()

    public init(stateDirectory: String? = nil) throws(ScopeFSError) {
        socketPath = ControlSocket.stateDirectory(explicit: stateDirectory) + "/control.sock"
        cursor = try Self.watch(socketPath, after: nil, wait: 0).cursor
    }

    /// The next notice, waiting up to `timeout` seconds; nil when none came.
    public func next(timeout: Double = 10) throws(ScopeFSError) -> DocumentNotice? {
        lock.lock()
        defer { lock.unlock() }
        let deadline = Date().addingTimeInterval(timeout)
        while pending.isEmpty {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            let answer = try Self.watch(socketPath, after: cursor, wait: min(left, 10))
            cursor = answer.cursor
            pending = answer.notices
        }
        return pending.removeFirst()
    }

    /// Notices as they come, until the consuming task stops. Each wait
    /// blocks a thread for up to 10 s.
    public var notices: AsyncStream<DocumentNotice> {
        AsyncStream { continuation in
            let task = Task.detached { [self] in
                while !Task.isCancelled {
                    if let notice = try? next(timeout: 10) { continuation.yield(notice) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    private struct Answer: Decodable {
        let ok: Bool
        let message: String?
        let cursor: UInt64?
        let notices: [DocumentNotice]?
    }

    private static func watch(_ socketPath: String, after: UInt64?, wait: Double) throws(ScopeFSError)
        -> (cursor: UInt64, notices: [DocumentNotice])
    {
        var request: [String: Any] = ["op": "watch", "waitSeconds": wait]
        if let after { request["after"] = after }
        let answer = try ControlSocket.ask(
            try? JSONSerialization.data(withJSONObject: request), as: Answer.self, socketPath: socketPath,
            operation: .watch)
        guard answer.ok, let cursor = answer.cursor else {
            throw ScopeFSError(errno: EPERM, operation: .watch, path: socketPath, message: answer.message)
        }
        return (cursor, answer.notices ?? [])
    }

    static func url(inApp path: String) -> URL {
        let root = ProcessInfo.processInfo.environment["SCOPEFS_MOUNT"].map { $0 + "/" } ?? ""
        return URL(fileURLWithPath: root + path)
    }
}

/// Claims a document for reading or writing across apps while `body` runs,
/// as `NSFileCoordinator.coordinate(readingItemAt:|writingItemAt:)` does
/// (docs/API.md "File coordination"). A writer kept waiting first asks the
/// holders to relinquish.
public enum FileCoordinator {
    public enum Intent: String, Sendable {
        case reading = "read"
        case writing = "write"
    }

    public static func coordinate<T>(
        _ intent: Intent, itemAt url: URL, timeout: Double = 10, stateDirectory: String? = nil,
        _ body: (URL) throws -> T
    ) throws -> T {
        let socketPath = ControlSocket.stateDirectory(explicit: stateDirectory) + "/control.sock"
        let claim = try claimItem(intent, url.path, timeout, socketPath)
        defer { release(claim, socketPath) }
        return try body(url)
    }

    private struct Answer: Decodable {
        let ok: Bool
        let code: Int32?
        let message: String?
        let claim: UInt64?
    }

    private static func claimItem(_ intent: Intent, _ path: String, _ timeout: Double, _ socketPath: String)
        throws(ScopeFSError) -> UInt64
    {
        let request: [String: Any] = [
            "op": "coordinate", "path": path, "intent": intent.rawValue, "waitSeconds": timeout,
        ]
        let answer = try ControlSocket.ask(
            try? JSONSerialization.data(withJSONObject: request), as: Answer.self, socketPath: socketPath,
            operation: .coordinate, path: path)
        guard answer.ok, let claim = answer.claim else {
            let code: Int32 =
                switch answer.code {
                case 66: ENOENT
                case 75: ETIMEDOUT
                default: EPROTO
                }
            throw ScopeFSError(errno: code, operation: .coordinate, path: path, message: answer.message)
        }
        return claim
    }

    private static func release(_ claim: UInt64, _ socketPath: String) {
        guard let body = try? JSONSerialization.data(withJSONObject: ["op": "release", "claim": claim]) else { return }
        _ = try? ControlSocket.exchange(body, socketPath: socketPath, operation: .coordinate)
    }
}
