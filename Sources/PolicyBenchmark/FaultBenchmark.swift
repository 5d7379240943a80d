import Dispatch
import Glibc
import Policy
import ScopeFS

/// The fault-rule check every request makes (issue 18), in ns: with no
/// rule (one relaxed load of `isActive`), and with 100 rules on other
/// paths (the lock, and each rule's operation, app and glob compared).
func measureFaultCheck(checks: Int) -> [String: Any] {
    let empty = FaultInjector()
    var taken = 0
    let start = DispatchTime.now().uptimeNanoseconds
    for index in 0..<checks {
        // What the hook in `gate` does: the rules are looked at only when set.
        if empty.isActive {
            taken += empty.effects(app: "a", path: "Providers/local/f\(index)", operation: "read").latencyMilliseconds
        }
    }
    let noRules = DispatchTime.now().uptimeNanoseconds - start

    let full = FaultInjector()
    for index in 0..<100 {
        // Half the rules name the operation asked, so their globs are matched.
        _ = full.add(
            FaultRule(
                app: "com.example.app", path: "Providers/local/folder\(index)/*",
                operation: index % 2 == 0 ? "read" : "write", errno: EIO, percent: 5))
    }
    let fullStart = DispatchTime.now().uptimeNanoseconds
    var hits = 0
    for _ in 0..<checks {
        if full.isActive,
            full.effects(app: "com.example.app", path: "Providers/local/other/file.txt", operation: "read").errno != nil
        {
            hits += 1
        }
    }
    let hundredRules = DispatchTime.now().uptimeNanoseconds - fullStart
    return [
        "checks": checks, "nsPerCheckNoRules": Double(noRules) / Double(checks),
        "nsPerCheck100Rules": Double(hundredRules) / Double(checks), "hits": hits + taken,
    ]
}
