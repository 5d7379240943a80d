// swift-tools-version: 6.1
// A check program for the ScopeFSClient library, driven by
// Tests/integration/test_clients.py against a real mount (SPEC S31).
// Built with: swift build --scratch-path REPO/.build-clients-check
import PackageDescription

let package = Package(
    name: "ScopeFSClientCheck",
    dependencies: [
        // The client's own package, as an app depends on it (by URL and
        // version there; by path here, to test this checkout).
        .package(path: "../../../clients/swift")
    ],
    targets: [
        .executableTarget(
            name: "scopefs-client-check",
            dependencies: [.product(name: "ScopeFSClient", package: "swift")],
            path: "Sources/ScopeFSClientCheck",
            swiftSettings: [.unsafeFlags(["-warnings-as-errors"])]
        )
    ]
)
