// swift-tools-version: 6.1
// A tiny app that uses the ScopeFSClient library (docs/CLIENTS.md, SPEC S31).
//
// After the README's session and docs/CLIENTS.md's world ($FILE), from the
// checkout:
//
//   $ cd docs/examples/swift-app && swift build --scratch-path ../../../.build-clients-example && cd ../../..
//   $ scopefs run --app com.example.app --expose "$PWD/.build-clients-example" -- \
//         "$PWD/.build-clients-example/debug/scopefs-example" "$FILE"
import PackageDescription

let package = Package(
    name: "ScopeFSClientExample",
    dependencies: [
        // The client package of this checkout (clients/swift; its identity is
        // the folder's name, which is why this folder is not called "swift").
        // An app outside the repository depends on it by URL and version
        // (clients/swift/README.md).
        .package(path: "../../../clients/swift"),
    ],
    targets: [
        .executableTarget(
            name: "scopefs-example",
            dependencies: [.product(name: "ScopeFSClient", package: "swift")],
            path: "Sources/ScopeFSExample"
        ),
    ]
)
