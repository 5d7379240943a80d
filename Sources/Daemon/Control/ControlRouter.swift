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

/// An app's process, as the router admitted it for an operation whose
/// audience is `app`: its app is known, so a handler of an app's request
/// is never handed an optional to unwrap.
struct AppCaller: Sendable, Equatable {
    let app: AppID
    let pid: Int32
}

/// Who sent a command the router let through, typed by its operation's
/// audience (SPEC S5): the router's verdict, so that no handler decides
/// again, or trusts without a type, who may send what.
enum AdmittedSender: Sendable, Equatable {
    /// Audience `owner`: one of the owner's processes, on the owner's socket.
    case owner(pid: Int32)
    /// Audience `app`: a process of an app.
    case app(AppCaller)
    /// Audience `both`: either; the handler answers each side its own way.
    case either(ControlSender)

    var pid: Int32 {
        switch self {
        case .owner(let pid): pid
        case .app(let caller): caller.pid
        case .either(let sender): sender.pid
        }
    }

    /// The app of an `app` or `both` sender that is an app's process.
    var app: AppID? {
        switch self {
        case .owner: nil
        case .app(let caller): caller.app
        case .either(let sender): sender.app
        }
    }
}

extension AdmittedSender {
    /// Runs the handler of a command whose audience is `app` with its
    /// caller. The router hands such a command no other sender; one that
    /// came anyway means `Operation.audience` and the handler disagree,
    /// and is an internal error (70), not a crash.
    func asApp(for command: ControlCommand, _ body: (AppCaller) -> ControlResponse) -> ControlResponse {
        guard case .app(let caller) = self else {
            return .failure(
                CommandError.Kind.internalError.rawValue,
                "'\(command.operation.rawValue)' reached its handler from a sender its audience does not admit")
        }
        return body(caller)
    }
}

/// What answers commands that passed the router: the daemon's services
/// (`DaemonControl`), or a fake in the unit tests.
protocol ControlHandling: Sendable {
    func answer(_ command: ControlCommand, from sender: AdmittedSender) -> ControlResponse
}

/// Every control request passes here: it becomes a typed command (or a
/// usage error), and its operation's audience (`Operation.audience`, the
/// one place that says who may send what, SPEC S5) is enforced before any
/// handler runs. A handler never checks who sent a command again: it is
/// handed the sender as the audience admitted it (`AdmittedSender`).
struct ControlRouter: Sendable {
    let handler: any ControlHandling

    func answer(_ request: ControlRequest, from sender: ControlSender) -> ControlResponse {
        let admitted: AdmittedSender
        switch Self.admit(request.op, from: sender) {
        case .success(let sender): admitted = sender
        case .failure(let refusal): return refusal.response
        }
        let command: ControlCommand
        do {
            command = try ControlCommand(request)
        } catch {
            return .failure(error.exitCode, error.message)
        }
        return handler.answer(command, from: admitted)
    }

    /// Why a sender may not send an operation (exit 77).
    struct Refusal: Error {
        let message: String
        var response: ControlResponse { .failure(CommandError.Kind.refused.rawValue, message) }
    }

    /// `sender` as `operation`'s audience admits it, or why it does not.
    static func admit(_ operation: ControlRequest.Operation, from sender: ControlSender) -> Result<
        AdmittedSender, Refusal
    > {
        let name = operation.rawValue
        switch (operation.audience, sender.app) {
        case (.owner, _) where sender.endpoint == .app:
            return .failure(
                Refusal(
                    message: "refused: the app endpoint serves app requests only; '\(name)' is the owner's (SPEC S5)"))
        case (.owner, let app?):
            return .failure(
                Refusal(
                    message: "refused: the sender is an app process of \(app); only the owner may '\(name)' (SPEC S5)"))
        case (.owner, nil):
            return .success(.owner(pid: sender.pid))
        case (.app, let app?):
            return .success(.app(AppCaller(app: app, pid: sender.pid)))
        case (.app, nil):
            return .failure(
                Refusal(
                    message:
                        "refused: only an app process may '\(name)' (its own documents); run it with `scopefs run --app APP`"
                ))
        case (.both, _):
            return .success(.either(sender))
        }
    }
}
