import CommandErrors
import Control
import Documents
import Foundation
import FuseBridge
import Policy
import PolicyStore
import ScopeFS

/// The daemon's services, built once by `Daemon.run` and shared by every
/// control handler.
struct DaemonServices: Sendable {
    let options: DaemonOptions
    let mountpoint: String
    let tracker: ProcessTracker
    let scopes: ScopeRegistry
    let reloader: PolicyReloader
    let inbox: InboxKeeper
    let documents: DocumentBridge
    let fileSystem: ScopeFileSystem
    let picks: PickBroker
    let coordinator: Coordinator
    let channel: ChannelStatus
    let extensions: ExtensionProviders
    /// The FUSE session: whether container files go through passthrough.
    let session: FuseSession

    var state: StateDirectory { options.state }
}

/// Answers each command that passed the router with its own handler.
struct DaemonControl: ControlHandling {
    let services: DaemonServices

    func answer(_ command: ControlCommand, from sender: AdmittedSender) -> ControlResponse {
        let services = services
        switch command {
        case .register(let app):
            return ProcessHandling.register(app, pid: sender.pid, services: services)
        case .whoami:
            var response = ControlResponse(ok: true)
            response.app = sender.app
            return response
        case .status:
            return ProcessHandling.status(services)
        case .endApp(let app):
            return ProcessHandling.endApp(app, services: services)
        case .loseUnsynced(let app):
            let inodes = services.fileSystem.unsynced.lose(app: app)
            for inode in inodes { services.session.invalidateInode(inode) }
            var response = ControlResponse(ok: true)
            response.lost = inodes.count
            return response
        case .identify(let pid):
            return ProcessHandling.identify(pid, services: services)
        case .servedPolicy:
            var response = ControlResponse(ok: true)
            response.servedVersion = services.reloader.servedVersion ?? 0
            response.servedFailure = services.reloader.failure
            return response
        case .reload(let app, let paths, let imported):
            return PolicyHandling.reload(app: app, containerPaths: paths, imported: imported, services: services)
        case .grant, .revoke, .restore, .forget:
            return PolicyHandling.change(command, requester: sender.pid, services: services)
        case .resolve(let token):
            return sender.asApp(for: command) { caller in
                DocumentHandling.resolve(token, app: caller.app, pid: caller.pid, services: services)
            }
        case .watch(let after, let wait):
            return sender.asApp(for: command) { caller in
                DocumentHandling.watch(app: caller.app, after: after, wait: wait, notices: services.reloader.notices)
            }
        case .query(let scope, let name, let digest, let wait):
            return sender.asApp(for: command) { caller in
                QueryHandling.handle(
                    app: caller.app, scope: scope, name: name, digest: digest, wait: wait, state: services.state
                ) { services.fileSystem.snapshot }
            }
        case .pick, .agentNext, .agentAnswer, .pickForApp:
            return PickHandling.handle(command, from: sender, picks: services.picks)
        case .coordinate, .release:
            return CoordinationHandling.handle(
                command, from: sender, coordinator: services.coordinator, snapshot: services.fileSystem.snapshot,
                appRoot: sender.app.map { services.mountpoint + "/" + $0 } ?? services.mountpoint,
                containers: services.state.containersPath)
        case .claimForTransfer(let items, let wait):
            return CoordinationHandling.claimForTransfer(
                items, wait: wait, pid: sender.pid, coordinator: services.coordinator,
                snapshot: services.fileSystem.snapshot, containers: services.state.containersPath)
        case .faultAdd, .faultList, .faultClear:
            let response = FaultHandling.handle(command, faults: services.fileSystem.faults) {
                for inode in services.fileSystem.inodesWithOpenFiles() { services.session.invalidateInode(inode) }
            }
            // No `unsynced` rule left: nothing is losable any more.
            if !services.fileSystem.faults.tracksUnsynced { services.fileSystem.unsynced.forgetAll() }
            return response
        case .providerContent(let provider, let action, let path):
            return ContentHandling.handle(
                provider: provider, action: action, path: path, extensions: services.extensions)
        }
    }
}
