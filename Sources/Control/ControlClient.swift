import CommandErrors
import Foundation
import Glibc
import Policy
import PolicyStore

/// How the CLI talks to the daemon that serves a state directory.
public enum ControlClient {
    /// Sends one request. Throws `.noDaemon` (exit 69) when no daemon listens.
    public static func send(_ request: ControlRequest, state: StateDirectory, timeoutSeconds: Int = 30)
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
        guard FileManager.default.fileExists(atPath: state.controlSocketPath) else { return }
        let response: ControlResponse
        do {
            response = try send(
                ControlRequest(op: .reload, app: app, containerPaths: containerPaths, imported: imported), state: state)
        } catch  where error.kind == .noDaemon {
            return  // a socket left by a crashed daemon; the next mount reads the database anyway
        }
        if !response.ok {
            throw CommandError(.internalError, "the daemon could not reload: \(response.message ?? "unknown error")")
        }
    }

    /// Revokes through the daemon serving the state directory (see
    /// `ControlRequest.Operation.revoke`); returns the grants revoked and
    /// the daemon's note when it could not write them to the database.
    public static func revoke(app: String, grant: Int64?, state: StateDirectory) throws(CommandError)
        -> (grants: [Grant], note: String?)
    {
        let response = try send(ControlRequest(op: .revoke, app: app, grant: grant), state: state)
        guard response.ok else {
            throw CommandError(
                CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError, response.message ?? "revoke failed")
        }
        return (response.revoked ?? [], response.message)
    }

    /// Restores through the daemon serving the state directory (see
    /// `ControlRequest.Operation.restore`); returns the grants restored, or
    /// nil when no daemon serves it (or one that predates the operation):
    /// then the CLI writes the database itself.
    public static func restore(app: String, grant: Int64?, state: StateDirectory) throws(CommandError) -> [Grant]? {
        guard FileManager.default.fileExists(atPath: state.controlSocketPath) else { return nil }
        let response: ControlResponse
        do {
            response = try send(ControlRequest(op: .restore, app: app, grant: grant), state: state)
        } catch  where error.kind == .noDaemon {
            return nil
        }
        guard response.ok else {
            if response.code == CommandError.Kind.usage.rawValue, response.message == ControlResponse.malformedRequest {
                return nil
            }
            throw CommandError(
                CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError, response.message ?? "restore failed"
            )
        }
        return response.restored ?? []
    }

    public static func status(state: StateDirectory) throws(CommandError) -> DaemonStatus? {
        guard FileManager.default.fileExists(atPath: state.controlSocketPath) else { return nil }
        do {
            return try send(ControlRequest(op: .status), state: state).status
        } catch  where error.kind == .noDaemon {
            return nil
        }
    }
}
