import Glibc
/// What a tester sees of what the app under test did (SPEC S29).
public struct Event: Sendable, Codable, Equatable {
    public enum Kind: String, Sendable, Codable, CaseIterable {
        case grant, revoke, restore, denial, start, stop
        /// A grant removed for good (`scopefs forget`, or a session grant
        /// whose app's last process exited).
        case forget
        case unbalancedStop = "unbalanced-stop"
        case budgetExhausted = "budget-exhausted"
        case leak
        /// The daemon served no grant while its database was gone,
        /// replaced or corrupt (SPEC S13); recorded once a database is back.
        case policyFailedClosed = "policy-failed-closed"
        /// An app process of a previous daemon still runs on that daemon's
        /// dead mount (ENOTCONN); recorded by the next daemon (issue 15).
        case stranded
        /// A fault or latency injected by an owner's rule (issue 18).
        case fault
        /// An app resolved a bookmark whose item had moved or been replaced
        /// (the resolution said `isStale`, SPEC S26): what a tester checks
        /// to know the app met, and renewed, a stale bookmark.
        case staleBookmark = "stale-bookmark"
        /// An app reached its budget of backing descriptors and got EMFILE
        /// (SPEC S40); `count` is the budget.
        case descriptorBudgetExhausted = "descriptor-budget-exhausted"
        /// An app had as many reads waiting for downloads as it may and got
        /// EAGAIN for one more (SPEC S40); `count` is the bound.
        case downloadBudgetExhausted = "download-budget-exhausted"
        /// A provider extension's life and errors (SPEC S41): `operation`
        /// says what (started, restarting, failed, a method that failed),
        /// `path` is `/Providers/ID[/item]`, `errno` what an app got.
        case `extension`
        /// An upload met a remote change (SPEC S43): the local edit was kept
        /// as a conflict copy, whose path is `path`.
        case conflict
        /// A provider a reload brought (another host's, on a fleet) has a
        /// folder that is, is inside or is above a ScopeFS mount of this
        /// host: the daemon does not serve it (issue 50, SPEC S34).
        /// `path` is `/Providers/ID`, `operation` names both folders.
        case providerRefused = "provider-refused"

        /// Which events rotation gives up first (SPEC S29).
        public var retention: Retention {
            switch self {
            case .start, .stop, .unbalancedStop, .budgetExhausted, .fault, .staleBookmark, .descriptorBudgetExhausted,
                .downloadBudgetExhausted:
                .routine
            case .denial, .leak, .policyFailedClosed, .stranded, .extension, .conflict, .providerRefused: .incident
            case .grant, .revoke, .restore, .forget: .policyChange
            }
        }
    }

    /// The classes of events the log keeps apart. Each keeps its own newest
    /// events, so no flood of one class evicts another: an app that issues
    /// millions of stops (routine) or of denials on ever new names
    /// (incidents) cannot push a grant or a revoke out of the trail.
    public enum Retention: Int, Sendable, CaseIterable {
        /// Scope bookkeeping an app can issue at will.
        case routine = 0
        /// What went wrong for an app: denials and leaks.
        case incident = 1
        /// The owner's changes to the isolation layer; no app can cause them.
        case policyChange = 2
    }

    /// Assigned by the store.
    public var id: Int64?
    /// Seconds since 1970, UTC; the first occurrence when coalesced.
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
    /// How many identical events this one stands for: the store coalesces
    /// repeats (`isRepeat(of:)`) into one event.
    public var occurrences: Int
    /// The last occurrence, when there was more than one.
    public var lastTime: Double?

    public init(
        time: Double, kind: Kind, app: AppID?, pid: Int32? = nil, path: String? = nil, operation: String? = nil,
        errno: Int32? = nil, grant: GrantID? = nil, count: Int? = nil, occurrences: Int = 1, lastTime: Double? = nil
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
        self.occurrences = occurrences
        self.lastTime = lastTime
    }

    /// Whether `self` says again what `other` said: the same kind of event
    /// by the same process on the same path with the same outcome. Times,
    /// ids and occurrences do not count.
    public func isRepeat(of other: Event) -> Bool {
        kind == other.kind && pid == other.pid && errno == other.errno && count == other.count
            && grant == other.grant && app == other.app && path == other.path && operation == other.operation
    }
}

/// Where the file system sends events; the daemon buffers them and writes
/// them in batches off the hot path.
public protocol EventSink: Sendable {
    func record(_ event: Event)
}

extension Event {
    /// An event's errno as `scopefs events` and the settings page print it:
    /// its name where ScopeFS answers or injects it, else the number.
    public static func errnoName(_ code: Int32) -> String {
        code == EXDEV ? "EXDEV" : FaultRule.errnoNames.first { $0.value == code }?.name ?? String(code)
    }
}
