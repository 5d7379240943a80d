// The cost of one access decision (SPEC S36): coverage lookup in the policy
// snapshot plus the decision, with the scope check of strict mode, at 10k
// and 100k grants. Prints one JSON object per size (ns per decision).
import Foundation
import Policy

func measure(grants count: Int, decisions: Int) -> [String: Any] {
    let apps = (0..<100).map { App(id: "com.example.app\($0)", name: "App \($0)") }
    let grants = (0..<count).map { index in
        Grant(
            id: GrantID(index), app: apps[index % apps.count].id, provider: "local", item: "item-\(index)",
            relativePath: "folder\(index / 100)/item\(index)", isDirectory: index % 2 == 0, access: .readWrite,
            state: .active, grantedAt: 0)
    }
    let built = Date()
    let snapshot = PolicySnapshot(
        generation: 1, apps: apps, providers: [Provider(id: "local", name: "Local", directory: "/p")], grants: grants)
    let buildSeconds = Date().timeIntervalSince(built)
    // A revoke of one grant applied to the snapshot (what a daemon does
    // after a change, issue 34), rather than a snapshot built anew.
    let revoked = grants[count / 2].with(state: .revoked)
    let applied = Date()
    let after = snapshot.applying(PolicyChanges(version: 2, grants: [revoked]), generation: 2)
    let applySeconds = Date().timeIntervalSince(applied)
    precondition(after.grantsByID[revoked.id]?.state == .revoked)
    var table = ScopeTable(budget: count)
    for grant in grants { _ = table.start(pid: 42, app: grant.app, grant: grant.id, path: "") }
    // Paths inside granted folders, three levels below the grant.
    let paths = (0..<1024).map { index -> (AppID, String) in
        let grant = grants[(index * 7919) % grants.count]
        return (grant.app, grant.relativePath + "/sub/dir/file\(index).txt")
    }
    var allowed = 0
    let start = DispatchTime.now().uptimeNanoseconds
    for index in 0..<decisions {
        let (app, path) = paths[index & 1023]
        let caller = Caller.app(app, ProcessKey(pid: 42, startTime: 1))
        let coverage = snapshot.coverage(app: app, provider: "local", path: path)
        if Decision.provider(
            .read, coverage: coverage, caller: caller, scopeHeld: { table.holds(lineage: [42, 1], grant: $0.id) })
            == nil
        {
            allowed += 1
        }
    }
    let elapsed = DispatchTime.now().uptimeNanoseconds - start
    // The coverage lookup alone (what a node's cached coverage saves).
    var granted = 0
    let coverageStart = DispatchTime.now().uptimeNanoseconds
    for index in 0..<decisions {
        let (app, path) = paths[index & 1023]
        if case .granted = snapshot.coverage(app: app, provider: "local", path: path) { granted += 1 }
    }
    let coverageElapsed = DispatchTime.now().uptimeNanoseconds - coverageStart
    return [
        "nsPerCoverageLookup": Double(coverageElapsed) / Double(decisions), "granted": granted,
        "grants": count, "decisions": decisions, "nsPerDecision": Double(elapsed) / Double(decisions),
        "snapshotBuildSeconds": buildSeconds, "snapshotApplyOneRevokeSeconds": applySeconds, "allowed": allowed,
    ]
}

let quick = CommandLine.arguments.contains("--quick")
let decisions = quick ? 200_000 : 2_000_000
var results: [[String: Any]] = []
// `--grants N`: one size only (e.g. 1000000, issue 34's scale).
let sizes =
    CommandLine.arguments.firstIndex(of: "--grants").flatMap {
        CommandLine.arguments.indices.contains($0 + 1) ? Int(CommandLine.arguments[$0 + 1]).map { [$0] } : nil
    } ?? [10_000, 100_000]
for size in sizes {
    results.append(measure(grants: size, decisions: decisions))
}
let faultCheck = measureFaultCheck(checks: quick ? 100_000 : 1_000_000)
let data = try JSONSerialization.data(
    withJSONObject: ["policyDecision": results, "faultCheck": faultCheck], options: [.prettyPrinted, .sortedKeys])
print(String(decoding: data, as: UTF8.self))
