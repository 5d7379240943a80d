import CommandErrors
import Control
import Documents
import Policy
import PolicyStore

/// The owner's policy commands and reloads. A change is written with the
/// daemon's own connection by the same code the CLI runs when no daemon
/// serves (`OwnerPolicy`), and installed before the answer (SPEC S13).
enum PolicyHandling {
    static func change(_ command: ControlCommand, requester: Int32, services: DaemonServices) -> ControlResponse {
        do throws(CommandError) {
            switch command {
            case .revoke(let app, let grant):
                // A revoke the database cannot take is held by the daemon
                // (issue 15): it answers with the note that says so.
                let (revoked, held) = try services.reloader.revoke(
                    app: app, grant: grant, state: services.state, requester: requester)
                var response = ControlResponse(ok: true)
                response.revoked = revoked
                if held { response.message = "held by the daemon until the database takes writes again" }
                return response
            case .restore:
                // Failed closed, the connection may be a placeholder: say why.
                try services.reloader.reload()
                if let failure = services.reloader.failure {
                    throw CommandError(
                        .badState, "cannot restore: no grant is served until a valid database returns (\(failure))")
                }
                fallthrough
            default:
                let response = try OwnerPolicy.apply(
                    command, repository: services.reloader.policyStore, state: services.state, requester: requester)
                try services.reloader.reload()
                if case .forget(let app, _) = command, let references = response.references {
                    services.reloader.dropEntries(services.fileSystem.containerEntries(app: app, paths: references))
                }
                return response
            }
        } catch {
            return .failure(error.exitCode, error.message)
        }
    }

    /// Another owner command changed the store (apps, providers, picks):
    /// install it, and drop what changed in `app`'s container.
    static func reload(app: AppID?, containerPaths: [String]?, imported: [String]?, services: DaemonServices)
        -> ControlResponse
    {
        do throws(CommandError) {
            try services.reloader.reload()
            if let app, let containerPaths {
                services.reloader.dropEntries(services.fileSystem.containerEntries(app: app, paths: containerPaths))
            }
            if let app, let imported {
                let running = services.tracker.appProcesses.filter { $0.app == app }.map(\.key)
                services.inbox.imported(app: app, paths: imported, running: running)
            }
            return ControlResponse(ok: true)
        } catch {
            return .failure(error.exitCode, error.message)
        }
    }
}
