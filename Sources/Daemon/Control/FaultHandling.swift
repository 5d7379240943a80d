import CommandErrors
import Control
import Policy
import PolicyStore
import ScopeFS

/// The control requests for fault and latency rules (issue 18). Owner-only
/// (their audience): the router refuses them on the app endpoint and from
/// app processes before they come here, so an app under test can neither
/// see, add nor clear the faults it is tested against.
enum FaultHandling {
    /// Enough for any test; a bound keeps a runaway script from making
    /// every request scan thousands of rules.
    static let maximumRules = 1000

    /// `dropCachedPages`: called after a rule on reads was added, to drop
    /// the pages open files cached, which reads would be served from
    /// without meeting the rule (off the FUSE threads: this is a control
    /// thread).
    static func handle(
        _ command: ControlCommand, faults: FaultInjector, dropCachedPages: () -> Void = {}
    ) -> ControlResponse {
        switch command {
        case .faultAdd(let rule, let seed):
            if let problem = rule.problem {
                return .failure(CommandError.Kind.usage.rawValue, "bad fault rule: \(problem)")
            }
            guard faults.rules.count < maximumRules else {
                return .failure(
                    CommandError.Kind.usage.rawValue, "at most \(maximumRules) fault rules; clear some first")
            }
            guard let added = faults.add(rule, seed: seed) else {
                return .failure(CommandError.Kind.usage.rawValue, "bad fault rule")
            }
            if faults.actsOnReads { dropCachedPages() }
            var response = ControlResponse(ok: true)
            response.faults = [added]
            return response
        case .faultClear(let faultID):
            let removed = faults.clear(faultID)
            if let id = faultID, removed == 0 {
                return .failure(CommandError.Kind.unknown.rawValue, "no fault rule #\(id)")
            }
            var response = ControlResponse(ok: true)
            response.faults = faults.rules
            return response
        default:
            var response = ControlResponse(ok: true)
            response.faults = faults.rules
            return response
        }
    }
}
