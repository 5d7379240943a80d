/// What a tester sees of what the app under test did (SPEC S29).
public struct Event: Sendable, Codable, Equatable {
    public enum Kind: String, Sendable, Codable, CaseIterable {
        case grant, revoke, restore, denial, start, stop
        case unbalancedStop = "unbalanced-stop"
        case budgetExhausted = "budget-exhausted"
        case leak
    }

    /// Assigned by the store.
    public var id: Int64?
    /// Seconds since 1970, UTC.
    public var time: Double
    public var kind: Kind
    public var app: AppID?
    public var pid: Int32?
    /// The path inside the mount, e.g. `/com.example.app/Providers/local/a.txt`.
    public var path: String?
    /// The file-system operation (denials) or command (CLI changes).
    public var operation: String?
    public var errno: Int32?
    public var grant: GrantID?
    /// The counter after the call (start/stop), or the leaked count.
    public var count: Int?

    public init(
        time: Double, kind: Kind, app: AppID?, pid: Int32? = nil, path: String? = nil, operation: String? = nil,
        errno: Int32? = nil, grant: GrantID? = nil, count: Int? = nil
    ) {
        self.time = time
        self.kind = kind
        self.app = app
        self.pid = pid
        self.path = path
        self.operation = operation
        self.errno = errno
        self.grant = grant
        self.count = count
    }
}

/// Where the file system sends events; the daemon buffers them and writes
/// them in batches off the hot path.
public protocol EventSink: Sendable {
    func record(_ event: Event)
}
