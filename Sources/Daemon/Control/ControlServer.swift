import CommandErrors
import Control
import Foundation
import Glibc
import HostText
import Logging
import Policy
import PolicyStore
import Processes
import Synchronization

/// Serves a control socket: registration of app processes, reload after
/// CLI changes, status. Each connection is one request and one response.
/// The daemon listens twice: the owner's socket, and the app endpoint that
/// the sandbox shows its app instead (bookmark resolution only).
final class ControlServer: Sendable {
    typealias Endpoint = ControlSender.Endpoint

    private let socket: UnixSocket
    let endpoint: Endpoint
    /// Who a peer is (`CallerIdentity` on the tracker's attribution),
    /// looked up once per connection; its app is handed to the handler
    /// with the request.
    private let identity: CallerIdentity
    /// Connections of app processes being served, over both endpoints' own
    /// counts: each costs the daemon a thread, so app processes, which are
    /// assumed hostile, get at most `appConnectionLimit` at once, and the
    /// owner's commands are always served.
    private let appConnections = Atomic<Int>(0)
    static let appConnectionLimit = 16
    /// One app's share of them: requests that wait (a pick for the user, a
    /// presenter's watch, a coordination claim) must not let one app keep
    /// every other app's bookmarks from resolving.
    private let connectionsByApp = Mutex<[AppID: Int]>([:])
    static let perAppConnectionLimit = 8
    private let ownerUID: uid_t
    /// On the app endpoint: the account apps run as when it is not the
    /// owner's (root's apps, `AppAccount`); its processes may connect.
    private let appAccount: AppAccount?
    private let router: ControlRouter
    private let logger: Logger
    /// Descriptors held back for the owner's requests (owner socket only).
    private let reserve: DescriptorReserve?

    init(
        path: String, endpoint: Endpoint, ownerUID: uid_t, appAccount: AppAccount? = nil, logger: Logger,
        attribution: @escaping @Sendable (Int32) -> CallerIdentity.Attribution, router: ControlRouter
    ) throws {
        socket = try UnixSocket.listening(at: path)
        if let appAccount, appAccount.uid != ownerUID {
            // Reachable only where the sandbox binds it: the state
            // directory stays the owner's alone.
            chown(path, ownerUID, appAccount.gid)
            chmod(path, 0o660)
        }
        self.endpoint = endpoint
        self.appAccount = appAccount
        // Root's processes are served as the owner's (they could do what
        // the daemon does anyway); the app account's are apps' or strangers.
        self.identity = CallerIdentity(
            source: .tracker(attribution), ownerUIDs: [0, ownerUID],
            appUIDs: appAccount.map { [$0.uid] } ?? [])
        self.ownerUID = ownerUID
        self.router = router
        self.logger = logger
        reserve = endpoint == .owner ? DescriptorReserve(size: DaemonTunables.ownerReserveDescriptors) : nil
    }

    /// Accepts for as long as the daemon runs: a failed accept is retried,
    /// never the end of the socket (`AcceptLoop`).
    func start() {
        let loop = AcceptLoop(
            socket: socket, logger: logger, endpoint: endpoint == .owner ? "control" : "app", reserve: reserve,
            stopping: { [self] in stopped.load(ordering: .acquiring) })
        Thread.detachNewThread { [self] in
            loop.run { client, whenDone in
                Thread.detachNewThread {
                    self.serve(client)
                    whenDone()
                }
            }
        }
    }

    private func serve(_ client: UnixSocket) {
        defer { client.close() }
        client.setTimeout(seconds: 10)
        let peer = client.peer
        switch endpoint {
        case .app:
            // Every peer here is an app's: counted before anything is read
            // about it.
            withAppSlot(client) {
                let who = peer.map { identity.identify(pid: $0.pid, uid: $0.uid) }
                withAppShare(client, who?.app) { respond(client, answer(client, peer, who)) }
            }
        case .owner:
            var who = peer.map { identity.identify(pid: $0.pid, uid: $0.uid) }
            // At the descriptor limit the peer's /proc files cannot be read
            // and it looks gone: asked again with the owner's reserve free
            // (SPEC S40), a gone process is still unknown, the owner served.
            // Another thread (the tracker reading a new process's /proc)
            // may take the freed numbers first; its reads are brief, so a
            // few more tries, 25 ms apart, while the peer lives (seen on a
            // loaded machine: the owner's `status` refused at the limit).
            if case .unknown? = who, let peer, let reserve {
                let released = reserve.release()
                for _ in 0..<20 {
                    who = identity.identify(pid: peer.pid, uid: peer.uid)
                    guard case .unknown? = who, kill(peer.pid, 0) == 0 else { break }
                    usleep(25_000)
                }
                if released { reserve.refill() }
            }
            if who?.isOwner == true {
                respond(client, answer(client, peer, who))
            } else {
                withAppSlot(client) { withAppShare(client, who?.app) { respond(client, answer(client, peer, who)) } }
            }
        }
    }

    /// Runs `body` in one of the `appConnectionLimit` slots for app
    /// connections, or answers "busy" at once when none is free.
    private func withAppSlot(_ client: UnixSocket, _ body: () -> Void) {
        defer { appConnections.subtract(1, ordering: .relaxed) }
        guard appConnections.add(1, ordering: .relaxed).newValue <= Self.appConnectionLimit else {
            respond(
                client,
                .failure(CommandError.Kind.timedOut.rawValue, "the daemon is busy with other app requests; try again"))
            return
        }
        body()
    }

    /// Runs `body` within the app's share of the slots, or answers "busy".
    private func withAppShare(_ client: UnixSocket, _ app: AppID?, _ body: () -> Void) {
        guard let app else { return body() }
        let admitted = connectionsByApp.withLock { counts in
            guard counts[app, default: 0] < Self.perAppConnectionLimit else { return false }
            counts[app, default: 0] += 1
            return true
        }
        guard admitted else {
            respond(
                client,
                .failure(
                    CommandError.Kind.timedOut.rawValue,
                    "this app has \(Self.perAppConnectionLimit) requests in progress; try again"))
            return
        }
        defer { connectionsByApp.withLock { $0[app] = $0[app, default: 1] > 1 ? $0[app]! - 1 : nil } }
        body()
    }

    private func answer(
        _ client: UnixSocket, _ peer: UnixSocket.PeerCredentials?, _ who: CallerIdentity.Peer?
    ) -> ControlResponse {
        let response: ControlResponse
        if case .unknown(let reason)? = who {
            // Fail closed: a peer that may be an app process is not served
            // as the owner's (nor as an app it cannot be shown to be).
            logger.warning("control connection refused: \(reason)")
            response = .failure(
                CommandError.Kind.refused.rawValue,
                "refused: the sending process's app cannot be established (\(reason)); SPEC S5")
        } else if let peer, peer.uid == 0 || peer.uid == ownerUID || peer.uid == appAccount?.uid {
            let peerApp = who?.app
            // Paths arrive with host bytes as `\udcXX` (SPEC S33a, `HostJSON`).
            if let line = client.readLine(),
                let request = try? JSONDecoder().decode(ControlRequest.self, from: Data(HostJSON.decodable(line)))
            {
                response = router.answer(request, from: ControlSender(endpoint: endpoint, pid: peer.pid, app: peerApp))
            } else {
                response = .failure(CommandError.Kind.usage.rawValue, ControlResponse.malformedRequest)
            }
        } else {
            logger.warning("control connection refused: peer is not the mount's owner")
            response = .failure(CommandError.Kind.refused.rawValue, "only the mount's owner may use the control socket")
        }
        return response
    }

    private func respond(_ client: UnixSocket, _ response: ControlResponse) {
        if let body = try? JSONEncoder().encode(response) { _ = client.writeLine(Data(HostJSON.escaped(body))) }
    }

    /// Set before the socket closes, so the accept loop ends quietly.
    private let stopped = Atomic<Bool>(false)

    func stop() {
        stopped.store(true, ordering: .releasing)
        shutdown(socket.descriptor, Int32(SHUT_RDWR))
        socket.close()
    }
}
