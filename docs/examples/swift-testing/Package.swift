// swift-tools-version: 6.1
// An app's own tests against revocation with ScopeFSTesting (issue 18,
// docs/SCENARIOS.md): `reader-app` reads a document again and again; the
// tests revoke its grant, restore it, rename the document on the host and
// inject a fault while it runs, each in a mount of its own.
//
// From the checkout, with scopefs on your PATH (or SCOPEFS_BIN naming it);
// Tests/integration/test_swift_testing_library.py runs it:
//
//   cd docs/examples/swift-testing && swift test --scratch-path ../../../.build-swift-testing-example
import PackageDescription

let package = Package(
    name: "ScopeFSTestingExample",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The client package of this checkout (its identity is the folder's
        // name, `swift`); an app outside the repository depends on it by URL
        // and version (clients/swift/README.md).
        .package(path: "../../../clients/swift")
    ],
    targets: [
        // The app under test: it runs as an app process, under `scopefs run`.
        .executableTarget(
            name: "reader-app",
            dependencies: [.product(name: "ScopeFSClient", package: "swift")],
            path: "Sources/ReaderApp"
        ),
        // Its tests: Swift Testing and XCTest, both through ScopeFSTesting.
        .testTarget(
            name: "ReaderAppTests",
            dependencies: [.product(name: "ScopeFSTesting", package: "swift")],
            path: "Tests/ReaderAppTests"
        ),
    ]
)
