import Glibc
import Policy
import Synchronization

/// What a rule does to one request.
public struct FaultEffect: Sendable, Equatable {
    public var rule: Int
    public var errno: Int32?
    public var latencyMilliseconds: Int?
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
    /// Each rule's matching requests so far, for `nth` (hit or not).
    private var matched: [Int] = []
    private var nextID = 1
    private var generator: SeededGenerator
    /// Remote rules draw apart: the extension's calls come from other
    /// threads than apps' requests, and neither shifts the other's draws.
    private var remoteGenerator: SeededGenerator

    public init(seed: UInt64 = 0) {
        generator = SeededGenerator(seed: seed)
        remoteGenerator = SeededGenerator(seed: seed ^ Self.remoteSeedMix)
    }

    private static let remoteSeedMix: UInt64 = 0x5EED_0F_C10D

    /// Adds a rule (its id assigned) and returns it; nil when not well formed.
    public mutating func add(_ rule: FaultRule) -> FaultRule? {
        guard rule.problem == nil else { return nil }
        var added = rule
        added.id = nextID
        added.hits = nil
        nextID += 1
        counts.append(0)
        matched.append(0)
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
        matched = kept.map { matched[$0] }
        rules = kept.map { rules[$0] }
        return before - rules.count
    }

    /// Restarts the percentages' draws from `seed`.
    public mutating func reseed(_ seed: UInt64) {
        generator = SeededGenerator(seed: seed)
        remoteGenerator = SeededGenerator(seed: seed ^ Self.remoteSeedMix)
    }

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
            if rules[index].isRemote || rules[index].isUnsynced { continue }
            if rules[index].operation != "*" && rules[index].operation != operation { continue }
            if let wanted = rules[index].app, wanted != app { continue }
            if globs[index] != nil, !globs[index]!.matches(bytes) && !(inFolder && globs[index]!.matches(folderBytes)) {
                continue
            }
            let rule = rules[index]
            guard hits(index) else { continue }
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

    /// The effects for one call to `provider`'s extension (a remote rule's
    /// `operation` is the protocol method): the first protocol error hit
    /// wins, latencies add up, as for requests.
    public mutating func remoteEffects(provider: String, operation: String)
        -> (error: (rule: Int, name: String)?, latencyMilliseconds: Int)
    {
        var failure: (rule: Int, name: String)? = nil
        var latency = 0
        for index in rules.indices where rules[index].provider == provider {
            let rule = rules[index]
            if rule.operation != "*" && rule.operation != operation { continue }
            guard hits(index) else { continue }
            if let name = rule.remoteError, failure == nil { failure = (rule.id, name) }
            latency += rule.latencyMilliseconds ?? 0
        }
        return (failure, latency)
    }

    /// Whether rule `index`, which matches a request, hits it (and counts
    /// the hit): its `nth` match only, else a draw of its percentage.
    private mutating func hits(_ index: Int) -> Bool {
        matched[index] += 1
        let hit =
            rules[index].nth.map { matched[index] == $0 }
            ?? (rules[index].isRemote ? drawRemote(rules[index].percent) : draw(rules[index].percent))
        if hit { counts[index] += 1 }
        return hit
    }

    /// Whether a rule in force acts on apps' reads (an errno or a latency
    /// above 0, on `read` or `*`; a 0 ms rule only counts): opens then bypass the page cache, so that every
    /// read meets it.
    public var actsOnReads: Bool {
        rules.contains {
            !$0.isRemote && ($0.operation == "read" || $0.operation == "*")
                && ($0.errno != nil || ($0.latencyMilliseconds ?? 0) > 0)
        }
    }

    public var hasRequestRules: Bool { rules.contains { !$0.isRemote } }
    public var hasUnsyncedRules: Bool { rules.contains(where: \.isUnsynced) }

    /// Whether an `unsynced` rule covers a write by `app` to `path`.
    public func keepsUnsynced(app: AppID?, path: String) -> Bool {
        rules.contains { $0.isUnsynced && $0.applies(app: app, path: path, operation: "write") }
    }
    public var hasRemoteRules: Bool { rules.contains(where: \.isRemote) }

    private mutating func drawRemote(_ percent: Double) -> Bool {
        if percent >= 100 { return true }
        let unit = Double(remoteGenerator.next() >> 11) / Double(1 << 53)
        return unit * 100 < percent
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
    private let remoteActive = Atomic<Bool>(false)
    private let reads = Atomic<Bool>(false)
    private let unsynced = Atomic<Bool>(false)
    private let state = Mutex(FaultRules())

    public init() {}

    /// A rule on apps' requests is in force.
    @inline(__always)
    public var isActive: Bool { active.load(ordering: .relaxed) }

    /// A remote rule (on extension calls) is in force.
    @inline(__always)
    public var isRemoteActive: Bool { remoteActive.load(ordering: .relaxed) }

    /// A rule that fails or delays reads is in force (`FaultRules.actsOnReads`).
    @inline(__always)
    public var actsOnReads: Bool { reads.load(ordering: .relaxed) }

    public func add(_ rule: FaultRule, seed: UInt64? = nil) -> FaultRule? {
        state.withLock { rules in
            if let seed { rules.reseed(seed) }
            let added = rules.add(rule)
            publish(rules)
            return added
        }
    }

    @discardableResult
    public func clear(_ id: Int? = nil) -> Int {
        state.withLock { rules in
            let removed = rules.clear(id)
            publish(rules)
            return removed
        }
    }

    private func publish(_ rules: FaultRules) {
        active.store(rules.hasRequestRules, ordering: .relaxed)
        remoteActive.store(rules.hasRemoteRules, ordering: .relaxed)
        reads.store(rules.actsOnReads, ordering: .relaxed)
        unsynced.store(rules.hasUnsyncedRules, ordering: .relaxed)
    }

    /// An `unsynced` rule is in force (one relaxed load per write).
    @inline(__always)
    public var tracksUnsynced: Bool { unsynced.load(ordering: .relaxed) }

    public func keepsUnsynced(app: AppID?, path: String) -> Bool {
        state.withLock { $0.keepsUnsynced(app: app, path: path) }
    }

    public func remoteEffects(provider: String, operation: String)
        -> (error: (rule: Int, name: String)?, latencyMilliseconds: Int)
    {
        state.withLock { $0.remoteEffects(provider: provider, operation: operation) }
    }

    public var rules: [FaultRule] { state.withLock { $0.listed } }

    public func effects(app: AppID?, path: String, operation: String, inFolder: Bool = false)
        -> (errno: FaultEffect?, latencyMilliseconds: Int, latencyRules: [Int])
    {
        state.withLock { $0.effects(app: app, path: path, operation: operation, inFolder: inFolder) }
    }
}
