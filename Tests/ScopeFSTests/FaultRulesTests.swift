import Glibc
import Policy
import ScopeFS
import Testing

/// Fault and latency rules (issue 18) without a mount.
@Suite struct FaultRulesTests {
    @Test("a rule matches its operation, app and path glob, and nothing else")
    func matching() {
        let rule = FaultRule(app: "a", path: "Providers/local/docs/*", operation: "read", errno: EIO)
        #expect(rule.applies(app: "a", path: "Providers/local/docs/x.txt", operation: "read"))
        #expect(rule.applies(app: "a", path: "Providers/local/docs/sub/x.txt", operation: "read"))
        #expect(!rule.applies(app: "b", path: "Providers/local/docs/x.txt", operation: "read"))
        #expect(!rule.applies(app: nil, path: "Providers/local/docs/x.txt", operation: "read"))
        #expect(!rule.applies(app: "a", path: "Providers/local/docs/x.txt", operation: "write"))
        #expect(!rule.applies(app: "a", path: "Providers/local/other.txt", operation: "read"))
        // The folder itself is no match, but an operation on a name in it is.
        #expect(!rule.applies(app: "a", path: "Providers/local/docs", operation: "read"))
        let create = FaultRule(path: "Providers/local/docs/*", operation: "create", errno: ENOSPC)
        #expect(create.applies(app: "x", path: "Providers/local/docs", operation: "create", inFolder: true))
        let any = FaultRule(operation: "*", latencyMilliseconds: 5)
        #expect(any.applies(app: nil, path: "", operation: "getattr"))
    }

    @Test("badly formed rules are refused with a reason")
    func validation() {
        #expect(FaultRule(operation: "frobnicate", errno: EIO).problem != nil)
        #expect(FaultRule(operation: "read").problem != nil)
        #expect(FaultRule(operation: "read", errno: EIO, latencyMilliseconds: 3).problem != nil)
        #expect(FaultRule(operation: "read", errno: EIO, percent: 0).problem != nil)
        #expect(FaultRule(operation: "read", errno: EIO, percent: 101).problem != nil)
        #expect(FaultRule(operation: "read", latencyMilliseconds: 90_000).problem != nil)
        #expect(FaultRule(operation: "read", errno: EIO, percent: 5).problem == nil)
        var rules = FaultRules()
        #expect(rules.add(FaultRule(operation: "nope", errno: EIO)) == nil)
        #expect(rules.rules.isEmpty)
    }

    @Test("errno names map both ways")
    func names() {
        #expect(FaultRule.errno(named: "enospc") == ENOSPC)
        #expect(FaultRule.errno(named: "EDQUOT") == EDQUOT)
        #expect(FaultRule.errno(named: "EWHATEVER") == nil)
        #expect(FaultRule.errnoName(ETIMEDOUT) == "ETIMEDOUT")
    }

    @Test("ids are assigned; clear removes one or all")
    func addAndClear() {
        var rules = FaultRules()
        let first = rules.add(FaultRule(operation: "read", errno: EIO))
        let second = rules.add(FaultRule(operation: "open", latencyMilliseconds: 20))
        #expect(first?.id == 1)
        #expect(second?.id == 2)
        #expect(rules.clear(1) == 1)
        #expect(rules.rules.map(\.id) == [2])
        #expect(rules.clear(7) == 0)
        #expect(rules.clear() == 1)
        #expect(rules.rules.isEmpty)
    }

    @Test("the first errno drawn wins; latencies add up")
    func effects() {
        var rules = FaultRules()
        _ = rules.add(FaultRule(operation: "open", latencyMilliseconds: 20))
        _ = rules.add(FaultRule(operation: "open", errno: EIO))
        _ = rules.add(FaultRule(operation: "open", errno: ENOSPC))
        _ = rules.add(FaultRule(operation: "*", latencyMilliseconds: 5))
        let effects = rules.effects(app: "a", path: "x", operation: "open")
        #expect(effects.errno?.errno == EIO)
        #expect(effects.errno?.rule == 2)
        #expect(effects.latencyMilliseconds == 25)
        let read = rules.effects(app: "a", path: "x", operation: "read")
        #expect(read.errno == nil)
        #expect(read.latencyMilliseconds == 5)
    }

    @Test("a seed replays the same draws; another seed draws others")
    func replay() {
        func hits(seed: UInt64) -> [Bool] {
            var rules = FaultRules(seed: seed)
            _ = rules.add(FaultRule(operation: "read", errno: EIO, percent: 30))
            return (0..<200).map { _ in rules.effects(app: "a", path: "f", operation: "read").errno != nil }
        }
        #expect(hits(seed: 42) == hits(seed: 42))
        #expect(hits(seed: 42) != hits(seed: 43))
        var reseeded = FaultRules(seed: 1)
        _ = reseeded.add(FaultRule(operation: "read", errno: EIO, percent: 30))
        reseeded.reseed(42)
        #expect(
            (0..<200).map { _ in reseeded.effects(app: "a", path: "f", operation: "read").errno != nil }
                == hits(seed: 42))
    }

    @Test("a 5% rule hits within binomial bounds over 10,000 requests", arguments: [1, 2, 3, 1234, 99999] as [UInt64])
    func percentage(seed: UInt64) {
        var rules = FaultRules(seed: seed)
        _ = rules.add(FaultRule(operation: "read", errno: EIO, percent: 5))
        let n = 10_000
        let hits = (0..<n).filter { _ in rules.effects(app: "a", path: "f", operation: "read").errno != nil }.count
        // Mean 500, standard deviation sqrt(n p (1-p)) = 21.8: 5 sigma is
        // ±109, a bound a correct generator misses once in ~3.5 million runs.
        let sigma = (Double(n) * 0.05 * 0.95).squareRoot()
        #expect(abs(Double(hits) - 500) <= 5 * sigma, "hits: \(hits)")
    }

    @Test("each rule counts its hits; clearing one keeps the others' counts")
    func hits() {
        var rules = FaultRules()
        _ = rules.add(FaultRule(path: "a/*", operation: "read", latencyMilliseconds: 0))
        _ = rules.add(FaultRule(path: "b/*", operation: "read", latencyMilliseconds: 0))
        for path in ["a/1", "a/2", "b/1", "c/1"] { _ = rules.effects(app: "x", path: path, operation: "read") }
        _ = rules.effects(app: "x", path: "a/3", operation: "write")
        #expect(rules.listed.map(\.hits) == [2, 1])
        rules.clear(1)
        _ = rules.effects(app: "x", path: "b/2", operation: "read")
        #expect(rules.listed.map(\.id) == [2])
        #expect(rules.listed.map(\.hits) == [2])
    }

    @Test("the injector is inactive with no rule and active with one")
    func injector() {
        let injector = FaultInjector()
        #expect(!injector.isActive)
        let rule = injector.add(FaultRule(operation: "read", errno: EIO))
        #expect(injector.isActive)
        #expect(injector.clear(rule?.id) == 1)
        #expect(!injector.isActive)
    }

    @Test("issue 48: an nth rule hits its nth matching request only, whatever the other rules draw")
    func nth() {
        var rules = FaultRules(seed: 3)
        _ = rules.add(FaultRule(path: "a/*", operation: "read", errno: ENOSPC, nth: 3))
        _ = rules.add(FaultRule(operation: "read", latencyMilliseconds: 1, percent: 50))
        var failed: [String] = []
        for path in ["a/1", "b/1", "a/2", "a/3", "a/4", "a/5"] {
            if rules.effects(app: nil, path: path, operation: "read").errno?.errno == ENOSPC { failed.append(path) }
        }
        #expect(failed == ["a/3"])
        #expect(rules.listed[0].hits == 1)
        #expect(FaultRule(operation: "read", errno: EIO, percent: 5, nth: 2).problem != nil)
        #expect(FaultRule(operation: "read", errno: EIO, nth: 0).problem != nil)
    }

    @Test("issue 48: remote rules act on a provider's calls only, and apps' requests never meet them")
    func remote() {
        var rules = FaultRules()
        _ = rules.add(FaultRule(operation: "fetch", nth: 2, provider: "cloud", remoteError: "unreachable"))
        _ = rules.add(FaultRule(operation: "*", latencyMilliseconds: 5, provider: "cloud"))
        #expect(rules.effects(app: nil, path: "x", operation: "read").errno == nil)
        #expect(rules.remoteEffects(provider: "cloud", operation: "fetch").error == nil)
        let second = rules.remoteEffects(provider: "cloud", operation: "fetch")
        #expect(second.error?.name == "unreachable" && second.latencyMilliseconds == 5)
        #expect(rules.remoteEffects(provider: "cloud", operation: "fetch").error == nil)
        #expect(rules.remoteEffects(provider: "other", operation: "fetch").latencyMilliseconds == 0)
        #expect(!rules.actsOnReads && rules.hasRemoteRules && !rules.hasRequestRules)
        #expect(FaultRule(operation: "fetch", provider: "cloud", remoteError: "frob").problem != nil)
        #expect(FaultRule(operation: "read", provider: "cloud", remoteError: "unreachable").problem != nil)
        #expect(FaultRule(operation: "fetch", errno: EIO, provider: "cloud").problem != nil)
        #expect(FaultRule(operation: "read", remoteError: "unreachable").problem != nil)
        for name in FaultRule.remoteErrors {
            #expect(FaultRule(operation: "modify", provider: "cloud", remoteError: name).problem == nil)
        }
    }

    @Test("issue 48: a rule that fails or delays reads makes opens bypass the page cache; a counting rule does not")
    func actsOnReads() {
        let injector = FaultInjector()
        let counter = injector.add(FaultRule(operation: "read", latencyMilliseconds: 0))
        #expect(injector.isActive && !injector.actsOnReads)
        _ = injector.add(FaultRule(operation: "*", errno: EIO, percent: 10))
        #expect(injector.actsOnReads)
        injector.clear(counter?.id)
        #expect(injector.actsOnReads)
        injector.clear()
        #expect(!injector.actsOnReads && !injector.isActive)
    }
}
