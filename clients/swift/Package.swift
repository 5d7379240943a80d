// swift-tools-version: 6.0
// The ScopeFS Swift client (SPEC S31): security-scoped URLs, bookmarks,
// file presenters and the document picker for Linux apps, with Apple's
// names; and ScopeFSTesting, for an app's own tests against revocation
// (issue 18); and ScopeFSExtension, for provider extensions (issue 32).
// Foundation only, no unsafe flags: other packages can depend
// on it by URL and version (README.md).
import PackageDescription

let package = Package(
    name: "ScopeFSClient",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ScopeFSClient", targets: ["ScopeFSClient"]),
        // For test targets: a mount of its own per test, with revoke(),
        // restore(), renameOnHost() and inject() (the pytest plugin's helpers).
        .library(name: "ScopeFSTesting", targets: ["ScopeFSTesting"]),
        // For provider extensions (docs/PROVIDERS.md): the protocol in the
        // shape of NSFileProviderReplicatedExtension, and the stdio loop.
        .library(name: "ScopeFSExtension", targets: ["ScopeFSExtension"]),
    ],
    targets: [
        // The same sources the ScopeFS package builds (its Package.swift
        // points its ScopeFSClient target here): one copy.
        .target(name: "ScopeFSClient"),
        .target(name: "ScopeFSTesting"),
        .target(name: "ScopeFSExtension"),
    ]
)
