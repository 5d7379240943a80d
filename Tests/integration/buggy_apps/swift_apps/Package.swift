// swift-tools-version: 6.1
// The Swift apps of the corpus of buggy apps (issue 48, docs/SCENARIOS.md
// "The corpus"), each with its fixed twin behind `--fixed`, and the tests
// that judge every app of the corpus (Python, C and Swift) with
// ScopeFSTesting, as an app's own tests would.
// Tests/integration/test_buggy_apps.py builds it once per run:
//   swift build --build-tests --scratch-path REPO/.build-buggy-apps
import PackageDescription

let package = Package(
    name: "BuggyApps",
    dependencies: [.package(path: "../../../../clients/swift")],
    targets: [
        // What the apps share: their command line and their wait for the revoke.
        .target(
            name: "CorpusApp", dependencies: [.product(name: "ScopeFSClient", package: "swift")],
            path: "Sources/CorpusApp"),
        .executableTarget(
            name: "cached-descriptor",
            dependencies: ["CorpusApp", .product(name: "ScopeFSClient", package: "swift")],
            path: "Sources/CachedDescriptor"),
        .executableTarget(
            name: "cached-mapping",
            dependencies: ["CorpusApp", .product(name: "ScopeFSClient", package: "swift")],
            path: "Sources/CachedMapping"),
        .executableTarget(
            name: "scope-leak-in-loop",
            dependencies: ["CorpusApp", .product(name: "ScopeFSClient", package: "swift")],
            path: "Sources/ScopeLeakInLoop"),
        .testTarget(
            name: "CorpusTests",
            dependencies: [.product(name: "ScopeFSTesting", package: "swift")],
            path: "Tests/CorpusTests"),
    ]
)
