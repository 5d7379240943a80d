import Foundation
import ScopeFSTesting

/// One app of the corpus (docs/SCENARIOS.md "The corpus of buggy apps"):
/// a bug pattern, the language of the app, buggy or fixed. Its
/// description names the case in the test report, as
/// Tests/integration/test_buggy_apps.py reads it.
struct Case: Sendable, CustomStringConvertible {
    let pattern: String
    let language: String
    let fixed: Bool

    var description: String { "\(pattern)-\(language)-\(fixed ? "fixed" : "buggy")" }

    /// The pattern's apps: each language, buggy and fixed.
    static func of(_ pattern: String, _ languages: [String] = ["python"]) -> [Case] {
        languages.flatMap { language in [false, true].map { Case(pattern: pattern, language: language, fixed: $0) } }
    }
}

/// Where the apps are: the Python ones beside this package, the C ones
/// where the integration test compiled them (`$CORPUS_C_APPS`), the Swift
/// ones built with these tests.
enum Corpus {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../..").standardized.path
    static let pythonClient = URL(fileURLWithPath: root).appendingPathComponent("../../../clients/python")
        .standardized.path
    static let cApps = ProcessInfo.processInfo.environment["CORPUS_C_APPS"] ?? "/nonexistent"
    static let document = "Providers/local/docs/report.txt"
    static let content = "numbers\n"

    /// Every test's world: the document, a grant of its folder.
    static func withMount(_ body: (ScopeFSMount) throws -> Void) throws {
        try withScopeFSMount(app: "com.example.corpus", files: ["docs/report.txt": content], grants: ["local:docs"]) {
            try body($0)
        }
    }

    static func command(_ item: Case) throws -> [String] {
        let module = item.pattern.replacingOccurrences(of: "-", with: "_")
        let program: [String] =
            switch item.language {
            case "python": ["python3", root + "/python/" + module + ".py"]
            case "c": [cApps + "/" + item.pattern]
            default: [try ScopeFSMount.builtExecutable(named: item.pattern)]
            }
        return program + (item.fixed ? ["--fixed"] : []) + [document]
    }

    /// The app in the default sandbox: its program and the Python client
    /// exposed, `PYTHONPATH` given (the sandbox passes no environment on).
    static func start(_ mount: ScopeFSMount, _ item: Case) throws -> AppProcess {
        let swiftApps = (try ScopeFSMount.builtExecutable(named: "cached-descriptor") as NSString)
            .deletingLastPathComponent
        return try mount.start(
            try command(item), sandbox: true, expose: [root, cApps, swiftApps, pythonClient],
            environment: ["PYTHONPATH": pythonClient])
    }

    /// Starts the app, revokes its grant once it printed READY, waits for its end.
    static func revokedWhileOpen(_ mount: ScopeFSMount, _ item: Case, timeout: Duration = .seconds(10)) throws
        -> AppProcess
    {
        let app = try start(mount, item)
        try app.waitForLine("READY")
        try mount.revoke("local:docs")
        try app.wait(timeout: timeout)
        return app
    }
}
