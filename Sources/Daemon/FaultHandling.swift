import CommandErrors
import Control
import Policy
import PolicyStore

/// The control requests for fault and latency rules (issue 18). Owner-only:
/// `Daemon.handle` refuses them on the app endpoint and from app processes
/// before they come here (`isForApps` is false), so an app under test can
/// neither see, add nor clear the faults it is tested against.
enum FaultHandling {
    /// Enough for any test; a bound keeps a runaway script from making
    /// every request scan thousands of rules.
    static let maximumRules = 1000

    static func handle(_ request: ControlRequest, faults: FaultInjector) -> ControlResponse {
        switch request.op {
        case .faultAdd:
            guard let rule = request.fault else {
                return .failure(CommandError.Kind.usage.rawValue, "faultAdd needs a rule")
            }
            if let problem = rule.problem {
                return .failure(CommandError.Kind.usage.rawValue, "bad fault rule: \(problem)")
            }
            guard faults.rules.count < maximumRules else {
                return .failure(
                    CommandError.Kind.usage.rawValue, "at most \(maximumRules) fault rules; clear some first")
            }
            guard let added = faults.add(rule, seed: request.seed) else {
                return .failure(CommandError.Kind.usage.rawValue, "bad fault rule")
            }
            var response = ControlResponse(ok: true)
            response.faults = [added]
            return response
        case .faultClear:
            let removed = faults.clear(request.faultID)
            if let id = request.faultID, removed == 0 {
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
