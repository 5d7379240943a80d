import CommandErrors
import Documents
import Glibc
import Policy
import PolicyStore

/// The owner's four policy commands (grant, revoke, restore, forget)
/// carried out against the store. The same code runs in the daemon, when
/// one serves the state directory and the CLI sent it the command, and in
/// the CLI when none does: one path per command, and the answer has the
/// same shape either way (issue 30).
public enum OwnerPolicy {
    /// Whether `command` is one of the four.
    public static func isPolicyCommand(_ command: ControlCommand) -> Bool {
        switch command {
        case .grant, .revoke, .restore, .forget: true
        default: false
        }
    }

    /// Writes `command` to the store; `requester` is the process that asked,
    /// which the change's event names. The caller installs the change (the
    /// daemon before it answers, SPEC S13).
    public static func apply(
        _ command: ControlCommand, repository: any IsolationStore, state: StateDirectory, requester: Int32 = getpid()
    ) throws(CommandError) -> ControlResponse {
        var response = ControlResponse(ok: true)
        switch command {
        case .grant(let order):
            response.granted = try repository.grant(
                app: order.app, provider: order.provider, path: order.path, access: order.access,
                session: order.session, update: .replace, wholeProvider: order.wholeProvider)
        case .revoke(let app, let grant):
            response.revoked = try repository.setState(.revoked, app: app, grant: grant, requester: requester)
        case .restore(let app, let grant):
            response.restored = try repository.setState(.active, app: app, grant: grant, requester: requester)
        case .forget(let app, let grant):
            let (grants, references) = try PickerActions(state: state, repository: repository)
                .forget(app: app, grant: grant)
            response.forgotten = grants
            response.references = references
        default:
            throw CommandError(.internalError, "\(command.operation.rawValue) is not a policy command")
        }
        return response
    }

    /// The grants a response says changed, whichever command it answers.
    public static func changedGrants(_ response: ControlResponse) -> [Grant] {
        response.revoked ?? response.restored ?? response.forgotten ?? response.granted.map { [$0.grant] } ?? []
    }
}
