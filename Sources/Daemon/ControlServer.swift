import Foundation
import Glibc
import Logging
import Policy
import PolicyStore

/// Serves a control socket: registration of app processes, reload after
/// CLI changes, status. Each connection is one request and one response.
/// The daemon listens twice: the owner's socket, and the app endpoint that
/// the sandbox shows its app instead (bookmark resolution only).
final class ControlServer: Sendable {
    enum Endpoint: Sendable {
        /// `STATE/control.sock`: the owner's CLI.
        case owner
        /// `STATE/app.sock`: bound into each sandbox; app requests only.
        case app
    }

    private let socket: UnixSocket
    let endpoint: Endpoint
    private let ownerUID: uid_t
    private let handler: @Sendable (ControlRequest, UnixSocket.PeerCredentials) -> ControlResponse
    private let logger: Logger

    init(
        path: String, endpoint: Endpoint, ownerUID: uid_t, logger: Logger,
        handler: @escaping @Sendable (ControlRequest, UnixSocket.PeerCredentials) -> ControlResponse
    ) throws {
        socket = try UnixSocket.listening(at: path)
        self.endpoint = endpoint
        self.ownerUID = ownerUID
        self.handler = handler
        self.logger = logger
    }

    func start() {
        Thread.detachNewThread { [self] in
            while let client = socket.accept() {
                Thread.detachNewThread { self.serve(client) }
            }
        }
    }

    private func serve(_ client: UnixSocket) {
        defer { client.close() }
        client.setTimeout(seconds: 10)
        let response: ControlResponse
        if let peer = client.peer, peer.uid == 0 || peer.uid == ownerUID {
            if let line = client.readLine(), let request = try? JSONDecoder().decode(ControlRequest.self, from: line) {
                response = handler(request, peer)
            } else {
                response = .failure(ScopeFSError.Kind.usage.rawValue, "malformed control request")
            }
        } else {
            logger.warning("control connection refused: peer is not the mount's owner")
            response = .failure(ScopeFSError.Kind.refused.rawValue, "only the mount's owner may use the control socket")
        }
        if let body = try? JSONEncoder().encode(response) { _ = client.writeLine(body) }
    }

    func stop() {
        shutdown(socket.descriptor, Int32(SHUT_RDWR))
        socket.close()
    }
}
