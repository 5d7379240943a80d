// swift-tools-version: 6.1
// A tiny app that uses the ScopeFSClient library (docs/CLIENTS.md, SPEC S31).
//
//   cd docs/examples/swift
//   swift build --scratch-path ../../../.build-clients-example
//   scopefs run --app com.example.app -- \
//       ../../../.build-clients-example/debug/scopefs-example MOUNT/com.example.app/Providers/local/docs/file.txt
import PackageDescription

let package = Package(
    name: "ScopeFSClientExample",
    dependencies: [
        // The ScopeFS repository itself (three levels up), for its ScopeFSClient product.
        .package(name: "ScopeFS", path: "../../.."),
    ],
    targets: [
        .executableTarget(
            name: "scopefs-example",
            dependencies: [.product(name: "ScopeFSClient", package: "ScopeFS")],
            path: "Sources/ScopeFSExample"
        ),
    ]
)
