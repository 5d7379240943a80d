// swift-tools-version: 6.1
// A check program for the ScopeFSClient library, driven by
// Tests/integration/test_clients.py against a real mount (SPEC S31).
// Built with: swift build --scratch-path REPO/.build-clients-check
import PackageDescription

let package = Package(
    name: "ScopeFSClientCheck",
    dependencies: [
        .package(name: "ScopeFS", path: "../../.."),
    ],
    targets: [
        .executableTarget(
            name: "scopefs-client-check",
            dependencies: [.product(name: "ScopeFSClient", package: "ScopeFS")],
            path: "Sources/ScopeFSClientCheck",
            swiftSettings: [.unsafeFlags(["-warnings-as-errors"])]
        ),
    ]
)
