import CommandErrors
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore

/// How the CLI talks to the daemon that serves a state directory.
public enum ControlClient {
    /// Sends one command. Throws `.noDaemon` (exit 69) when no daemon listens.
    public static func send(_ command: ControlCommand, state: StateDirectory, timeoutSeconds: Int = 30)
        throws(CommandError) -> ControlResponse
    {
        try send(request: command.request, state: state, timeoutSeconds: timeoutSeconds)
    }

    /// Sends a request as it is, well-formed or not (the tests' hostile client).
    package static func send(request: ControlRequest, state: StateDirectory, timeoutSeconds: Int = 30)
        throws(CommandError) -> ControlResponse
    {
        let socket: UnixSocket
        do {
            socket = try UnixSocket.connected(to: state.controlSocketPath, timeoutSeconds: timeoutSeconds)
        } catch {
            throw CommandError(
                .noDaemon,
                "no ScopeFS daemon serves \(state.path); start one with `scopefs --state \(state.path) mount MOUNTPOINT`"
            )
        }
        defer { socket.close() }
        // Paths travel with host bytes as `\udcXX` both ways (SPEC S33a, `HostJSON`).
        guard let body = try? JSONEncoder().encode(request), socket.writeLine(Data(HostJSON.escaped(body))),
            let line = socket.readLine(limit: UnixSocket.responseLimit),
            let response = try? JSONDecoder().decode(ControlResponse.self, from: Data(HostJSON.decodable(line)))
        else {
            throw CommandError(.timedOut, "the daemon serving \(state.path) did not answer")
        }
        return response
    }

    /// Tells a running daemon that the isolation layer changed, and waits
    /// until it has taken the change in (SPEC S13). No daemon: nothing to do.
    /// `containerPaths` name what changed in `app`'s container behind the mount.
    public static func notifyChange(
        state: StateDirectory, app: String? = nil, containerPaths: [String]? = nil, imported: [String]? = nil
    ) throws(CommandError) {
        guard FileManager.default.fileExists(atPath: state.controlSocketPath) else {
            return ServedPolicyPage.storeChangedWithoutDaemon(state: state)
        }
        let response: ControlResponse
        do {
            response = try send(
                .reload(app: app, containerPaths: containerPaths, imported: imported), state: state)
        } catch  where error.kind == .noDaemon {
            // A socket left by a crashed daemon; the next mount reads the
            // database anyway, and the portal's layout, once told, too.
            return ServedPolicyPage.storeChangedWithoutDaemon(state: state)
        }
        if !response.ok {
            throw CommandError(.internalError, "the daemon could not reload: \(response.message ?? "unknown error")")
        }
    }

    /// Carries out one of the owner's policy commands (`OwnerPolicy`):
    /// through the daemon serving the state directory, which writes and
    /// installs it before it answers (SPEC S13), or, when none serves it,
    /// against the store here with the same code. Either way the answer
    /// has the same shape, and a refusal becomes its exit code.
    public static func policy(
        _ command: ControlCommand, state: StateDirectory, store: () throws(CommandError) -> any IsolationStore
    ) throws(CommandError) -> ControlResponse {
        precondition(OwnerPolicy.isPolicyCommand(command))
        if FileManager.default.fileExists(atPath: state.controlSocketPath) {
            do throws(CommandError) {
                let response = try send(command, state: state)
                guard response.ok else {
                    throw CommandError(
                        CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                        response.message ?? "\(command.operation.rawValue) failed")
                }
                return response
            } catch  where error.kind == .noDaemon {
                // A socket left by a crashed daemon: nobody serves the mount.
            }
        }
        let response = try OwnerPolicy.apply(command, repository: store(), state: state)
        // Written behind any daemon: the page it published no longer vouches (S14).
        ServedPolicyPage.storeChangedWithoutDaemon(state: state)
        return response
    }

    /// The policy version the daemon serving `state` has installed, or
    /// why it fails closed; nil when no daemon serves it.
    public static func servedPolicy(state: StateDirectory) throws(CommandError) -> (
        version: Int64, failure: String?
    )? {
        guard FileManager.default.fileExists(atPath: state.controlSocketPath) else { return nil }
        let response: ControlResponse
        do {
            response = try send(.servedPolicy, state: state, timeoutSeconds: 5)
        } catch  where error.kind == .noDaemon {
            return nil
        }
        guard response.ok, let version = response.servedVersion else {
            throw CommandError(.internalError, response.message ?? "the daemon named no policy version")
        }
        return (version, response.servedFailure)
    }

    /// Which app process `pid` is of, as the daemon serving `state`
    /// attributes it (`identify`): the app, nil for a process of no app;
    /// a failure when the daemon could not tell (the process is gone, the
    /// daemon did not answer); nil when no daemon serves `state`. Only
    /// `CallerIdentity` asks (SPEC S5).
    public static func identify(pid: Int32, state: StateDirectory) -> Result<AppID?, CommandError>? {
        guard FileManager.default.fileExists(atPath: state.controlSocketPath) else { return nil }
        let response: ControlResponse
        do {
            response = try send(.identify(pid: pid), state: state, timeoutSeconds: 5)
        } catch  where error.kind == .noDaemon {
            return nil
        } catch {
            return .failure(error)
        }
        guard response.ok else {
            return .failure(
                CommandError(
                    CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                    response.message ?? "the daemon could not identify process \(pid)"))
        }
        return .success(response.app)
    }

    public static func status(state: StateDirectory) throws(CommandError) -> DaemonStatus? {
        guard FileManager.default.fileExists(atPath: state.controlSocketPath) else { return nil }
        let response: ControlResponse
        do {
            response = try send(.status, state: state)
        } catch  where error.kind == .noDaemon {
            return nil
        }
        // A daemon that answered with an error serves the state directory:
        // say what failed, not that nobody serves it (seen at EMFILE).
        guard response.ok, let status = response.status else {
            throw CommandError(
                CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                response.message ?? "the daemon sent no status")
        }
        return status
    }
}
