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

    public init(
        id: Int = 0, app: AppID? = nil, path: String? = nil, operation: String, errno: Int32? = nil,
        latencyMilliseconds: Int? = nil, percent: Double = 100
    ) {
        self.id = id
        self.app = app
        self.path = path
        self.operation = operation
        self.errno = errno
        self.latencyMilliseconds = latencyMilliseconds
        self.percent = percent
    }

    /// The operations a rule can name (`FileOperation.faultable`), or `*`.
    public static let operations: Set<String> = Set(["*"] + FileOperation.faultable.map(\.rawValue))

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
        if !Self.operations.contains(operation) {
            return "unknown operation '\(operation)'; operations: \(Self.operations.sorted().joined(separator: ", "))"
        }
        if (errno == nil) == (latencyMilliseconds == nil) { return "a rule injects either an errno or a latency" }
        if let errno, errno <= 0 { return "errno must be positive" }
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
        if self.operation != "*" && self.operation != operation { return false }
        if let wanted = self.app, wanted != app { return false }
        guard let glob = self.path else { return true }
        if fnmatch(glob, path, 0) == 0 { return true }
        return inFolder && fnmatch(glob, path + "/", 0) == 0
    }

    /// One line for `fault list` and `status`.
    public var summary: String {
        var text = "#\(id) \(operation)"
        if let errno { text += " \(Self.errnoName(errno))" }
        if let latencyMilliseconds { text += " +\(latencyMilliseconds)ms" }
        text += " \(percent.formatted)%"
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

/// What a rule does to one request.
public struct FaultEffect: Sendable, Equatable {
    public var rule: Int
    public var errno: Int32?
    public var latencyMilliseconds: Int?
}

/// SplitMix64: a small, fast generator whose whole state is one seed, so a
/// run replays from the seed it prints (chaos, fault percentages).
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The rule set and the generator the percentages are drawn from. Pure:
/// the daemon keeps one behind a lock (`FaultInjector`).
public struct FaultRules: Sendable {
    public private(set) var rules: [FaultRule] = [] {
        didSet { globs = rules.map { $0.path.map(Glob.init) } }
    }
    /// Each rule's glob as C bytes, with its literal prefix: most paths
    /// are told apart by the prefix, without a call to fnmatch.
    private var globs: [Glob?] = []
    /// Each rule's hits, kept apart so that counting does not rebuild `globs`.
    private var counts: [Int] = []
    private var nextID = 1
    private var generator: SeededGenerator

    public init(seed: UInt64 = 0) { generator = SeededGenerator(seed: seed) }

    /// Adds a rule (its id assigned) and returns it; nil when not well formed.
    public mutating func add(_ rule: FaultRule) -> FaultRule? {
        guard rule.problem == nil else { return nil }
        var added = rule
        added.id = nextID
        added.hits = nil
        nextID += 1
        counts.append(0)
        rules.append(added)
        return added
    }

    /// The rules with their hit counts.
    public var listed: [FaultRule] {
        rules.indices.map { index in
            var rule = rules[index]
            rule.hits = counts[index]
            return rule
        }
    }

    /// Removes rule `id` (all rules when nil); returns how many went.
    @discardableResult
    public mutating func clear(_ id: Int? = nil) -> Int {
        let before = rules.count
        let kept = rules.indices.filter { index in id.map { rules[index].id != $0 } ?? false }
        counts = kept.map { counts[$0] }
        rules = kept.map { rules[$0] }
        return before - rules.count
    }

    /// Restarts the percentages' draws from `seed`.
    public mutating func reseed(_ seed: UInt64) { generator = SeededGenerator(seed: seed) }

    /// The effects for one request: every matching rule draws once, in
    /// rule order; the first errno drawn wins, latencies add up. A rule at
    /// 100% draws nothing, so it does not shift the other rules' draws.
    public mutating func effects(app: AppID?, path: String, operation: String, inFolder: Bool = false)
        -> (errno: FaultEffect?, latencyMilliseconds: Int, latencyRules: [Int])
    {
        var failure: FaultEffect? = nil
        var latency = 0
        var latencyRules: [Int] = []
        let bytes = Array(path.utf8CString)
        let folderBytes = inFolder ? Array((path + "/").utf8CString) : []
        // By index, not by element: no copy (and retain) of each rule.
        for index in rules.indices {
            if rules[index].operation != "*" && rules[index].operation != operation { continue }
            if let wanted = rules[index].app, wanted != app { continue }
            if globs[index] != nil, !globs[index]!.matches(bytes) && !(inFolder && globs[index]!.matches(folderBytes)) {
                continue
            }
            let rule = rules[index]
            guard draw(rule.percent) else { continue }
            counts[index] += 1
            if let errno = rule.errno, failure == nil {
                failure = FaultEffect(rule: rule.id, errno: errno, latencyMilliseconds: nil)
            }
            if let milliseconds = rule.latencyMilliseconds {
                latency += milliseconds
                latencyRules.append(rule.id)
            }
        }
        return (failure, latency, latencyRules)
    }

    /// True in `percent` of the draws.
    public mutating func draw(_ percent: Double) -> Bool {
        if percent >= 100 { return true }
        // 53 random bits make a uniform double in [0, 1).
        let unit = Double(generator.next() >> 11) / Double(1 << 53)
        return unit * 100 < percent
    }
}

/// An fnmatch glob ready for matching many paths.
struct Glob: Sendable {
    let pattern: [CChar]
    /// How many bytes before the first wildcard (`*`, `?`, `[`, `\\`).
    let literal: Int

    init(_ text: String) {
        pattern = Array(text.utf8CString)
        literal = pattern.firstIndex { [42, 63, 91, 92, 0].contains($0) } ?? pattern.count - 1
    }

    /// `path`: NUL-terminated C bytes.
    func matches(_ path: [CChar]) -> Bool {
        guard path.count > literal else { return false }
        for index in 0..<literal where pattern[index] != path[index] { return false }
        return fnmatch(pattern, path, 0) == 0
    }
}

/// The daemon's rule set, shared by every FUSE thread. With no rule, the
/// check every request pays is one relaxed atomic load (`isActive`).
public final class FaultInjector: Sendable {
    private let active = Atomic<Bool>(false)
    private let state = Mutex(FaultRules())

    public init() {}

    @inline(__always)
    public var isActive: Bool { active.load(ordering: .relaxed) }

    public func add(_ rule: FaultRule, seed: UInt64? = nil) -> FaultRule? {
        state.withLock { rules in
            if let seed { rules.reseed(seed) }
            let added = rules.add(rule)
            active.store(!rules.rules.isEmpty, ordering: .relaxed)
            return added
        }
    }

    @discardableResult
    public func clear(_ id: Int? = nil) -> Int {
        state.withLock { rules in
            let removed = rules.clear(id)
            active.store(!rules.rules.isEmpty, ordering: .relaxed)
            return removed
        }
    }

    public var rules: [FaultRule] { state.withLock { $0.listed } }

    public func effects(app: AppID?, path: String, operation: String, inFolder: Bool = false)
        -> (errno: FaultEffect?, latencyMilliseconds: Int, latencyRules: [Int])
    {
        state.withLock { $0.effects(app: app, path: path, operation: operation, inFolder: inFolder) }
    }
}
