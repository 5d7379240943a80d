import CommandErrors
import Control
import Policy

/// Who sent a control request, as the kernel and the daemon's attribution
/// say (never as the request says).
public struct ControlSender: Sendable, Equatable {
    /// Which socket it came in on.
    public enum Endpoint: Sendable {
        /// `STATE/control.sock`: the owner's CLI.
        case owner
        /// `STATE/app.sock` or the sandbox's endpoint: app requests only.
        case app
    }

    public var endpoint: Endpoint
    public var pid: Int32
    /// The app the sender is a process of; nil for the owner's processes.
    public var app: AppID?

    public init(endpoint: Endpoint, pid: Int32, app: AppID?) {
        self.endpoint = endpoint
        self.pid = pid
        self.app = app
    }
}

/// What answers commands that passed the router: the daemon's services
/// (`DaemonControl`), or a fake in the unit tests.
protocol ControlHandling: Sendable {
    func answer(_ command: ControlCommand, from sender: ControlSender) -> ControlResponse
}

/// Every control request passes here: it becomes a typed command (or a
/// usage error), and its operation's audience (`Operation.audience`, the
/// one place that says who may send what, SPEC S5) is enforced before any
/// handler runs. A handler never checks who sent a command again, except
/// where its audience is `both` and the two sides get different answers.
struct ControlRouter: Sendable {
    let handler: any ControlHandling

    func answer(_ request: ControlRequest, from sender: ControlSender) -> ControlResponse {
        if let refusal = Self.refusal(of: request.op, from: sender) { return refusal }
        let command: ControlCommand
        do {
            command = try ControlCommand(request)
        } catch {
            return .failure(error.exitCode, error.message)
        }
        return handler.answer(command, from: sender)
    }

    /// Why `sender` may not send `operation` (exit 77), or nil.
    static func refusal(of operation: ControlRequest.Operation, from sender: ControlSender) -> ControlResponse? {
        let name = operation.rawValue
        switch operation.audience {
        case .owner where sender.endpoint == .app:
            return .failure(
                CommandError.Kind.refused.rawValue,
                "refused: the app endpoint serves app requests only; '\(name)' is the owner's (SPEC S5)")
        case .owner where sender.app != nil:
            return .failure(
                CommandError.Kind.refused.rawValue,
                "refused: the sender is an app process of \(sender.app!); only the owner may '\(name)' (SPEC S5)")
        case .app where sender.app == nil:
            return .failure(
                CommandError.Kind.refused.rawValue,
                "refused: only an app process may '\(name)' (its own documents); run it with `scopefs run --app APP`"
            )
        default:
            return nil
        }
    }
}
