// swift-tools-version: 6.1
import Foundation
import PackageDescription

// The layers, what each target owns and which uses which: docs/ARCHITECTURE.md,
// whose table Tests/docs/test_architecture_map.py holds to these targets.
// Each target declares what its sources import, and only that
// (Tests/repo/test_declared_dependencies.py). Policy has no libfuse, no
// SQLite and no syscalls: it is unit-tested in memory.
let strict: [SwiftSetting] = [.unsafeFlags(["-warnings-as-errors"])]

// `scopefs --version` names the commit when the Makefile passes
// `git describe` in SCOPEFS_GIT_DESCRIBE (characters of a describe only, so
// the value can go into a C string literal as it is).
let gitDescribe = ProcessInfo.processInfo.environment["SCOPEFS_GIT_DESCRIBE"].flatMap { value in
    value.allSatisfy { $0.isLetter || $0.isNumber || "._-+~".contains($0) } && !value.isEmpty ? value : nil
}

let package = Package(
    name: "ScopeFS",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "scopefs", targets: ["ScopeFSCLI"]),
        .library(name: "ScopeFSClient", targets: ["ScopeFSClient"]),
        .library(name: "ScopeFSTesting", targets: ["ScopeFSTesting"]),
        .executable(name: "scopefs-bench-policy", targets: ["PolicyBenchmark"]),
        .library(name: "ScopeFSExtension", targets: ["ScopeFSExtension"]),
        .executable(name: "scopefs-folder-extension", targets: ["FolderExtension"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        // Scenario files of `scopefs test` (issue 18), with line numbers for errors.
        .package(url: "https://github.com/jpsim/Yams", from: "5.0.1"),
        // `scopefs settings` (issue 36): the owner's web page. Without the
        // ConfigurationSupport trait, which would build swift-configuration
        // for nothing the page reads.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: ["FullFoundation"]),
        // Named by the page's code (socket addresses, header names); already
        // in the build as Hummingbird's own dependencies.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // The page's live streams end on SIGTERM through its graceful
        // shutdown (already in the build as Hummingbird's dependency).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // The fleet's shared isolation layer on PostgreSQL (issue 34, SPEC S44).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CFuse3",
            pkgConfig: "fuse3",
            providers: [.apt(["libfuse3-dev"])]
        ),
        // The sandbox's seccomp filter (SPEC S5), from Debian's libseccomp.
        .systemLibrary(
            name: "CSeccomp",
            pkgConfig: "libseccomp",
            providers: [.apt(["libseccomp-dev"])]
        ),
        // CRC-32 of the PNG chunks of previews kept for the owner's file
        // manager (SPEC S50), from Debian's zlib.
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // Readiness for systemd (sd_notify) and the journal (sd_journal_sendv).
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // The document portal's sd-bus vtable and descriptor checks
        // (Sources/Portal): C, where sd-bus's macros and O_PATH live.
        .target(
            name: "CPortalBus",
            linkerSettings: [.linkedLibrary("systemd")]
        ),
        .target(
            name: "CBuildInfo",
            cSettings: gitDescribe.map { [.define("SCOPEFS_GIT_DESCRIBE", to: "\"\($0)\"")] } ?? []
        ),
        // GNU-only libc calls that Swift's Glibc module hides (header), and
        // the one helper that needs _GNU_SOURCE itself (statx).
        .target(name: "CSystemShims"),
        // FUSE over io_uring (`scopefs mount --io-uring`), which libfuse
        // 3.14 does not speak: the rings, on Debian's liburing.
        .target(name: "CFuseRing", linkerSettings: [.linkedLibrary("uring")]),
        .target(
            name: "FuseBridge",
            dependencies: [
                "CFuse3", "CFuseRing", "CSystemShims", "HostText",
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strict
        ),
        // Host names as bytes, JSON and terminal escaping: the leaf every
        // layer that shows or carries a host name uses (SPEC S29, S33a).
        .target(
            name: "HostText",
            swiftSettings: strict
        ),
        // The isolation layer's model and decisions, pure: no libfuse, no
        // SQLite, no syscalls.
        .target(
            name: "Policy",
            dependencies: ["HostText"],
            swiftSettings: strict
        ),
        // The error a person reads, with its documented exit code (SPEC S34).
        .target(
            name: "CommandErrors",
            swiftSettings: strict
        ),
        .target(
            name: "PolicyStore",
            dependencies: [
                "HostText", "Policy", "CommandErrors", "CSystemShims", .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        // The fleet's isolation layer on PostgreSQL (SPEC S44): the shared
        // store many hosts' daemons serve from, its LISTEN/NOTIFY follower
        // and the per-host roles, and `IsolationBackend`, which of the two stores
        // a state directory is on. The CLI, the daemon and the settings page link it.
        .target(
            name: "FleetStore",
            dependencies: [
                "Policy", "PolicyStore", "CommandErrors",
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: strict
        ),
        // Documents (SPEC S17-S28): item locations, picker operations,
        // bookmarks, queries. Used by the CLI and the daemon, not by the mount.
        .target(
            name: "Documents",
            dependencies: [
                "HostText",
                "Policy", "PolicyStore", "CommandErrors", "CSystemShims", "CZlib",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "ScopeFS",
            dependencies: [
                "HostText",
                "FuseBridge", "Policy", "CSystemShims", .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strict
        ),
        // The control protocol (requests, responses, the daemon's handshake
        // files) and its client side, shared by the daemon and the CLI.
        .target(
            name: "Control",
            dependencies: ["HostText", "Policy", "PolicyStore", "Documents", "CommandErrors", "CSystemShims"],
            swiftSettings: strict
        ),
        // Processes as the kernel shows them (/proc, cgroups, the process
        // connector, the runs' journal): shared by the launcher and the daemon.
        .target(
            name: "Processes",
            dependencies: ["HostText", "Policy", "PolicyStore", "CommandErrors", "CSystemShims"],
            swiftSettings: strict
        ),
        // The one sandbox profile (SPEC S5, S41; docs/SECURITY.md): every
        // bubblewrap command line ScopeFS starts (apps, provider
        // extensions, the portal's bus proxy) is built here, with the same
        // hardening and its seccomp filter; callers name only their mounts.
        .target(
            name: "SandboxProfile",
            dependencies: ["CommandErrors", "CSystemShims", "CSeccomp"],
            swiftSettings: strict
        ),
        // `scopefs run`: the app's sandbox and launch. Runs in the CLI's
        // process, never in the daemon's.
        .target(
            name: "Launcher",
            dependencies: [
                "HostText", "SandboxProfile",
                "Processes", "Control", "Policy", "PolicyStore", "CommandErrors", "CSystemShims",
            ],
            swiftSettings: strict
        ),
        // Provider extensions (docs/PROVIDERS.md, SPEC S41-S43): the
        // supervised extension process and its JSON-RPC client, and the
        // replica of the provider's items that the mount serves.
        .target(
            name: "ProviderExtensions",
            dependencies: [
                "HostText", "CSystemShims", "SandboxProfile", "CommandErrors",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        // `scopefs portal` (SPEC S45, docs/PORTAL.md): org.freedesktop.portal.Documents
        // on the session bus, its documents ScopeFS grants changed through
        // the owner's policy path (Control).
        .target(
            name: "Portal",
            dependencies: [
                "CPortalBus", "CSystemShims", "Control", "CommandErrors", "Documents", "FuseBridge", "HostText",
                "Policy",
                "PolicyStore", "Processes", .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strict
        ),
        // The daemon: the mount, the control socket and its handlers.
        .target(
            name: "Daemon",
            dependencies: [
                "HostText",
                "ScopeFS", "FuseBridge", "Policy", "PolicyStore", "CommandErrors", "Control", "CSystemShims",
                "CSystemd", "Documents", "Processes", "ProviderExtensions", "FleetStore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strict
        ),
        // `scopefs settings` (issue 36): the "Files and Folders" page, server-
        // rendered HTML on Hummingbird, talking to the daemon through the
        // same control client as the CLI.
        .target(
            name: "SettingsPage",
            dependencies: [
                "HostText", "Control", "Policy", "PolicyStore", "FleetStore", "Documents", "Processes",
                "CommandErrors", "CSystemShims",
                .product(name: "Hummingbird", package: "hummingbird"),
                // The HTTP/1 server channel and its idle timeout (SettingsServer).
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // The `scopefs` command (the product keeps that name; the target's
        // differs from the `ScopeFS` module by more than case).
        .executableTarget(
            name: "ScopeFSCLI",
            dependencies: [
                "HostText",
                "Daemon", "Launcher", "Processes", "Control", "CommandErrors", "Policy", "PolicyStore", "ScopeFS",
                "CSystemShims", "CBuildInfo", "Documents", "ProviderExtensions", "Portal",
                "SettingsPage", "FleetStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict,
            // Every CLI command and every `scopefs run` is a new process:
            // linked statically, the Swift runtime and Foundation cost no
            // symbol lookups in 20 shared libraries at each start, which
            // was a third of a short command's CPU time (docs/PERFORMANCE.md,
            // "The control socket while 200 app processes start"). Debug
            // builds stay dynamic: they link faster. The modules were
            // compiled against the shared Foundation, whose autolink
            // entries leave out the static archives it needs, so they are
            // named here, and lld takes archives in any order.
            linkerSettings: [
                .unsafeFlags(
                    [
                        "-static-stdlib", "-use-ld=lld", "-lCoreFoundation", "-l_FoundationICU", "-l_FoundationCShims",
                        "-l_FoundationCollections",
                    ],
                    .when(configuration: .release))
            ]
        ),
        // The Swift client library for apps (SPEC S31): Foundation only. Its
        // sources are those of the standalone package in clients/swift,
        // which apps depend on by URL and version (one copy of the code).
        .target(
            name: "ScopeFSClient",
            path: "clients/swift/Sources/ScopeFSClient",
            swiftSettings: strict
        ),
        // An app's own tests against revocation (issue 18): a mount per
        // test, driven through the `scopefs` binary. Sources in clients/swift too.
        .target(
            name: "ScopeFSTesting",
            path: "clients/swift/Sources/ScopeFSTesting",
            swiftSettings: strict
        ),
        // The Swift SDK for provider extensions (docs/PROVIDERS.md): the
        // protocol in the shape of Apple's replicated extension and its stdio
        // loop. Foundation only; sources in clients/swift, like ScopeFSClient.
        .target(
            name: "ScopeFSExtension",
            path: "clients/swift/Sources/ScopeFSExtension",
            swiftSettings: strict
        ),
        // The smallest extension on that SDK, a local folder: the example and
        // the conformance suite's subject (`make test-extensions`).
        .executableTarget(
            name: "FolderExtension",
            dependencies: ["ScopeFSExtension"],
            path: "docs/examples/extensions/swift-folder",
            swiftSettings: strict
        ),
        // `make bench`: the policy decision alone, in ns (SPEC S36).
        .executableTarget(
            name: "PolicyBenchmark",
            dependencies: ["Policy", "ScopeFS"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "PolicyTests",
            dependencies: ["HostText", "Policy", "PolicyStore", "Documents", "CommandErrors"]
        ),
        // The fleet store's configuration: URLs, TLS modes, password files
        // (the store itself is tested against a real server: `make test-fleet`).
        .testTarget(
            name: "FleetStoreTests",
            dependencies: ["FleetStore", "CommandErrors"]
        ),
        // One body of repository tests against both stores (decision 59):
        // SQLite in a temporary folder, PostgreSQL on a server of its own.
        .testTarget(
            name: "IsolationStoreTests",
            dependencies: [
                "Policy", "PolicyStore", "FleetStore", "CommandErrors",
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        // The node table against a model of the host and the kernel (no mount).
        .testTarget(
            name: "ScopeFSTests",
            dependencies: [
                "ScopeFS", "FuseBridge", "Policy", "CSystemShims",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // What the daemon reads from /proc, parsed without a mount; the
        // control router and handlers on their own services (no mount).
        .testTarget(
            name: "DaemonTests",
            dependencies: [
                "Daemon", "Processes", "Control", "Policy", "PolicyStore", "ScopeFS", "FuseBridge", "HostText",
                "ProviderExtensions", "CommandErrors",
            ]
        ),
        // The Swift client's error kinds and control socket (no daemon needed).
        .testTarget(
            name: "ScopeFSClientTests",
            dependencies: ["ScopeFSClient"]
        ),
        // ScopeFSTesting's process plumbing with real processes (no mount).
        .testTarget(
            name: "ScopeFSTestingTests",
            dependencies: ["ScopeFSTesting"]
        ),
        // The bridge's wire hooks (set-id clearing) on requests built in memory.
        .testTarget(
            name: "FuseBridgeTests",
            dependencies: ["FuseBridge"]
        ),
        // The extension host with real child processes: the folder example
        // (python3), the SDK's slow test extension, and hostile scripts
        // (hostile/) that break the protocol on purpose.
        .testTarget(
            name: "ProviderExtensionsTests",
            dependencies: [
                "ProviderExtensions", "SandboxProfile", "Policy", .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["hostile"]
        ),
        // The settings page's routes through Hummingbird's test client (no
        // sockets) on a fake daemon: tokens, CSRF, origins, escaping.
        .testTarget(
            name: "SettingsPageTests",
            dependencies: [
                "SettingsPage", "Control", "Policy", "PolicyStore", "CommandErrors", "HostText",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        // The command line's pure parts: the picker's model (no terminal).
        .testTarget(
            name: "CLITests",
            dependencies: ["ScopeFSCLI", "Policy"]
        ),
    ]
)
