import CommandErrors
import Foundation
import Glibc
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import PolicyStore
import ServiceLifecycle

/// `scopefs settings`: serves the page until SIGINT or SIGTERM, on a
/// loopback port or a unix socket, and tells the owner where (with this
/// start's token) once it listens.
public struct SettingsServer: Sendable {
    public enum Endpoint: Sendable {
        /// 127.0.0.1 and a port (0: one the kernel picks).
        case loopback(port: Int)
        case unixSocket(path: String)
    }

    public let state: StateDirectory
    public let endpoint: Endpoint
    public let secrets: SettingsSecrets

    public init(state: StateDirectory, endpoint: Endpoint, secrets: SettingsSecrets = SettingsSecrets()) {
        self.state = state
        self.endpoint = endpoint
        self.secrets = secrets
    }

    /// How long a connection may take to send its request's headers, or
    /// stay idle between requests, before the page closes it (issue 46,
    /// 5d: 600 connections that never finished their headers stayed open).
    /// A response in progress (the live Activity stream) is not idle.
    public static let idleTimeout = TimeAmount.seconds(10)
    /// Connections the page holds at once; more wait in the listen backlog
    /// until one closes (an idle one within `idleTimeout`), so a flood of
    /// them by another local user holds a bounded number of descriptors
    /// (SPEC S40); the owner's connection waits its turn behind them.
    public static let connectionLimit = 128

    /// The file that holds the address with the token, 0600, removed when
    /// the server stops: for the owner's scripts and a second look.
    public var tokenFilePath: String { state.path + "/settings.url" }

    /// Runs until a signal; `ready` gets the address with the token once
    /// the socket listens.
    public func run(ready: @escaping @Sendable (String) -> Void) async throws {
        let backend = LiveSettingsBackend(state: state)
        let peerCheck = AppPeerCheck(state: state)
        let live = LiveActivity(backend: backend)
        let router = SettingsRoutes.router(backend: backend, secrets: secrets, live: live) { context in
            peerCheck.refusal(remote: context.remoteAddress, local: context.localAddress)
        }
        let address: BindAddress
        switch endpoint {
        case .loopback(let port): address = .hostname("127.0.0.1", port: port)
        case .unixSocket(let path):
            unlink(path)  // a socket a stopped page left; bind refuses to replace it
            address = .unixDomainSocket(path: path)
        }
        var logger = Logger(label: "scopefs.settings")
        logger.logLevel = .error
        let tokenFile = tokenFilePath
        let token = secrets.token
        let endpoint = endpoint
        let app = Application(
            router: router,
            server: .http1(configuration: HTTP1Channel.Configuration(idleTimeout: Self.idleTimeout)),
            configuration: .init(
                address: address, serverName: nil,
                availableConnectionsDelegate: MaximumAvailableConnections(Self.connectionLimit)),
            services: [LiveActivityTicker(live: live)],
            onServerRunning: { channel in
                let url: String
                switch endpoint {
                case .loopback:
                    url = "http://127.0.0.1:\(channel.localAddress?.port ?? 0)/?token=\(token)"
                case .unixSocket(let path):
                    // Only its owner may connect (the token still applies).
                    chmod(path, 0o600)
                    url = "unix:\(path) http://localhost/?token=\(token)"
                }
                Self.writePrivate(url + "\n", to: tokenFile)
                ready(url)
            },
            logger: logger)
        defer { unlink(tokenFile) }
        try await app.runService()
    }

    /// The live view's one reader of the event log: a tick each period
    /// while the server runs (streams end on SIGTERM in their route).
    struct LiveActivityTicker: Service {
        let live: LiveActivity

        func run() async throws {
            let live = live
            await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    try? await Task.sleep(for: live.limits.period)
                    live.tick()
                }
            }
            live.close()
        }
    }

    /// Writes `text` to a new file only its owner can read.
    static func writePrivate(_ text: String, to path: String) {
        unlink(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        fchmod(fd, 0o600)  // whatever the umask said
        _ = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
    }
}
