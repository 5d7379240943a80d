import Foundation
import Glibc
import Logging
import Policy
import PolicyStore

/// Serves the control socket: registration of app processes, reload after
/// CLI changes, status. Each connection is one request and one response.
final class ControlServer: Sendable {
    private let socket: UnixSocket
    private let ownerUID: uid_t
    private let handler: @Sendable (ControlRequest, UnixSocket.PeerCredentials) -> ControlResponse
    private let logger: Logger

    init(
        path: String, ownerUID: uid_t, logger: Logger,
        handler: @escaping @Sendable (ControlRequest, UnixSocket.PeerCredentials) -> ControlResponse
    ) throws {
        socket = try UnixSocket.listening(at: path)
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
