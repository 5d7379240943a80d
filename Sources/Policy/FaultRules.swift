import Glibc
import Synchronization

/// One fault-injection rule (issue 18): requests of `operation` by `app`
/// (any app when nil) on a path matching `path` (an fnmatch glob on the
/// path in the app's view, e.g. `Providers/local/docs/*`; any path when
/// nil) fail with `errno`, or are delayed by `latencyMilliseconds`, in
/// `percent` of the cases. Rules are the owner's test fixture, never
/// policy: a fault only ever hits a request the policy already allowed.
public struct FaultRule: Sendable, Codable, Equatable {
    /// Assigned by `FaultRules.add`.
    public var id: Int
    public var app: AppID?
    public var path: String?
    /// A `FileOperation` raw value (`FaultRule.operations`), or `*` for all.
    public var operation: String
    /// The errno injected (nil: a latency rule).
    public var errno: Int32?
    public var latencyMilliseconds: Int?
    /// 0 < percent <= 100.
    public var percent: Double
    /// How many requests the rule hit so far (filled in by `listed`);
    /// a 0 ms latency rule only counts (`scopefs test`'s `after:` trigger).
    public var hits: Int?
    /// Only the `nth` matching request is hit, once (`read:EIO:#3`):
    /// deterministic without a seed, whatever other rules draw. With it,
    /// `percent` is 100.
    public var nth: Int?
    /// A remote rule: it acts on the calls the daemon makes to this
    /// provider's extension (docs/PROVIDERS.md), not on apps' requests;
    /// `operation` is then a protocol method (`remoteOperations`).
    public var provider: String?
    /// With `provider`: the protocol error the call fails with
    /// (`remoteErrors`: `unreachable`, `conflict`, ...), or `stall` (no
    /// answer until the caller gives up or the stall limit ends it).
    public var remoteError: String?
    /// An `unsynced` rule fails nothing: while it is in force, what the
    /// matching writes change and no fsync made durable can be lost on
    /// cue (`scopefs fault lose-unsynced`, a scenario's `lose-unsynced`),
    /// as LazyFS loses it at a crash (issue 48). `operation` is `write`.
    public var unsynced: Bool?

    public init(
        id: Int = 0, app: AppID? = nil, path: String? = nil, operation: String, errno: Int32? = nil,
        latencyMilliseconds: Int? = nil, percent: Double = 100, nth: Int? = nil, provider: String? = nil,
        remoteError: String? = nil, unsynced: Bool? = nil
    ) {
        self.id = id
        self.app = app
        self.path = path
        self.operation = operation
        self.errno = errno
        self.latencyMilliseconds = latencyMilliseconds
        self.percent = percent
        self.nth = nth
        self.provider = provider
        self.remoteError = remoteError
        self.unsynced = unsynced
    }

    /// The operations a rule can name (`FileOperation.faultable`), or `*`.
    public static let operations: Set<String> = Set(["*"] + FileOperation.faultable.map(\.rawValue))

    /// The extension calls a remote rule can name (docs/PROVIDERS.md,
    /// "Methods"), or `*`.
    public static let remoteOperations: Set<String> = [
        "*", "item", "list", "currentAnchor", "changes", "fetch", "create", "modify", "delete",
    ]

    /// The protocol errors a remote rule can make a call fail with (their
    /// names in docs/PROVIDERS.md, "Errors"), and `stall`.
    public static let remoteErrors: [String] = [
        "unreachable", "conflict", "noSuchItem", "quota", "denied", "notAuthenticated", "busy", "exists", "internal",
        "stall",
    ]

    public var isRemote: Bool { provider != nil }
    public var isUnsynced: Bool { unsynced == true }

    /// The longest delay a rule may inject: a minute is already a hung disk.
    public static let maximumLatencyMilliseconds = 60_000

    /// The errnos a rule can inject, by name: what a real file system
    /// returns, and what an app must survive.
    public static let errnoNames: [(name: String, value: Int32)] = [
        ("EPERM", EPERM), ("ENOENT", ENOENT), ("EINTR", EINTR), ("EIO", EIO), ("ENXIO", ENXIO), ("EAGAIN", EAGAIN),
        ("ENOMEM", ENOMEM), ("EACCES", EACCES), ("EBUSY", EBUSY), ("EEXIST", EEXIST), ("ENOTDIR", ENOTDIR),
        ("EISDIR", EISDIR), ("EINVAL", EINVAL), ("ENFILE", ENFILE), ("EMFILE", EMFILE), ("EFBIG", EFBIG),
        ("ENOSPC", ENOSPC), ("EROFS", EROFS), ("EMLINK", EMLINK), ("ENAMETOOLONG", ENAMETOOLONG),
        ("ENOTEMPTY", ENOTEMPTY), ("ETIMEDOUT", ETIMEDOUT), ("ESTALE", ESTALE), ("EDQUOT", EDQUOT),
        ("ECANCELED", ECANCELED),
    ]

    public static func errno(named name: String) -> Int32? {
        errnoNames.first { $0.name == name.uppercased() }?.value
    }

    public static func errnoName(_ value: Int32) -> String {
        errnoNames.first { $0.value == value }?.name ?? "errno \(value)"
    }

    /// Why the rule is not well formed, or nil.
    public var problem: String? {
        if let nth {
            if nth < 1 { return "the nth request counts from 1" }
            if percent != 100 { return "a rule hits the nth request or a percentage, not both" }
        }
        if isRemote { return remoteProblem }
        if isUnsynced {
            if operation != "write" { return "an unsynced rule is on write (its changes are what can be lost)" }
            if errno != nil || latencyMilliseconds != nil || remoteError != nil || nth != nil || percent != 100 {
                return "an unsynced rule injects nothing: no errno, latency, nth or percentage"
            }
            return nil
        }
        if !Self.operations.contains(operation) {
            return "unknown operation '\(operation)'; operations: \(Self.operations.sorted().joined(separator: ", "))"
        }
        if remoteError != nil { return "a protocol error is for a remote rule (one that names a provider)" }
        if (errno == nil) == (latencyMilliseconds == nil) { return "a rule injects either an errno or a latency" }
        if let errno, errno <= 0 { return "errno must be positive" }
        if let latency = latencyMilliseconds, latency < 0 || latency > Self.maximumLatencyMilliseconds {
            return "latency must be between 0 and \(Self.maximumLatencyMilliseconds) ms"
        }
        if !(percent > 0 && percent <= 100) { return "percent must be above 0 and at most 100" }
        return nil
    }

    private var remoteProblem: String? {
        if !Self.remoteOperations.contains(operation) {
            return
                "unknown extension call '\(operation)'; calls: \(Self.remoteOperations.sorted().joined(separator: ", "))"
        }
        if errno != nil || app != nil || path != nil {
            return "a remote rule acts on the provider's calls: no errno, app or path (a protocol error instead)"
        }
        if (remoteError == nil) == (latencyMilliseconds == nil) {
            return "a remote rule injects either a protocol error or a latency"
        }
        if let remoteError, !Self.remoteErrors.contains(remoteError) {
            return "unknown protocol error '\(remoteError)'; errors: \(Self.remoteErrors.joined(separator: ", "))"
        }
        if let latency = latencyMilliseconds, latency < 0 || latency > Self.maximumLatencyMilliseconds {
            return "latency must be between 0 and \(Self.maximumLatencyMilliseconds) ms"
        }
        if !(percent > 0 && percent <= 100) { return "percent must be above 0 and at most 100" }
        return nil
    }

    /// Whether the rule applies to a request (the percentage aside).
    /// `path` is the path in the app's view; `inFolder` marks operations
    /// on a name in a folder (lookup, create, unlink, ...), whose path is
    /// the folder's: `docs/*` then matches them as it matches `docs/x`.
    public func applies(app: AppID?, path: String, operation: String, inFolder: Bool = false) -> Bool {
        if isRemote { return false }
        if self.operation != "*" && self.operation != operation { return false }
        if let wanted = self.app, wanted != app { return false }
        guard let glob = self.path else { return true }
        if fnmatch(glob, path, 0) == 0 { return true }
        return inFolder && fnmatch(glob, path + "/", 0) == 0
    }

    /// One line for `fault list` and `status`.
    public var summary: String {
        var text = "#\(id) " + (provider.map { "remote \($0) " } ?? "") + operation
        if let errno { text += " \(Self.errnoName(errno))" }
        if let remoteError { text += " \(remoteError)" }
        if isUnsynced { text += " unsynced (losable)" }
        if let latencyMilliseconds { text += " +\(latencyMilliseconds)ms" }
        if !isUnsynced { text += nth.map { " request \($0) only" } ?? " \(percent.formatted)%" }
        if let app { text += " app \(app)" }
        if let path { text += " path \(path)" }
        if let hits { text += " (\(hits) hits)" }
        return text
    }
}

extension Double {
    fileprivate var formatted: String {
        self == rounded() ? String(Int(self)) : String(self)
    }
}
