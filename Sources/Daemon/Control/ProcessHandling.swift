import CommandErrors
import Control
import Foundation
import FuseBridge
import Glibc
import Policy
import Processes

/// The owner's requests about app processes: `register` (the root of a
/// `scopefs run`) and `status`.
enum ProcessHandling {
    static func register(_ app: AppID, pid: Int32, services: DaemonServices) -> ControlResponse {
        guard services.fileSystem.snapshot.apps[app] != nil else {
            return .failure(CommandError.Kind.unknown.rawValue, CommandError.unknownApp(app).message)
        }
        switch services.tracker.register(pid: pid, app: app) {
        case .success:
            var response = ControlResponse(ok: true, mountpoint: services.mountpoint)
            response.daemon = getpid()
            response.runAs = Daemon.appAccount
            response.appEndpoint = Daemon.sandboxEndpoint
            return response
        case .failure(.alreadyApp(let existing)):
            return .failure(
                CommandError.Kind.refused.rawValue,
                "refused: this process already is an app process of \(existing); an app cannot start an app (SPEC S5)"
            )
        case .failure(.gone):
            return .failure(CommandError.Kind.refused.rawValue, "the registering process is gone")
        case .failure(.noCgroup):
            return .failure(
                CommandError.Kind.ioError.rawValue,
                "cannot make or join a cgroup for this run (\(services.tracker.attribution)): \(String(cString: strerror(errno)))"
            )
        }
    }

    /// `identify`: which app process `pid` is of, by the attribution FUSE
    /// requests are served by, for the owner's other processes'
    /// `CallerIdentity` (the portal, the settings page). A process that is
    /// gone cannot be told: a failure, never "no app" (fail closed).
    static func identify(_ pid: Int32, services: DaemonServices) -> ControlResponse {
        switch services.tracker.attribution(of: pid) {
        case .app(let app):
            var response = ControlResponse(ok: true)
            response.app = app
            return response
        case .notApp:
            return ControlResponse(ok: true)
        case .unknown(let reason):
            return .failure(CommandError.Kind.noInput.rawValue, reason)
        }
    }

    /// `endApp`: SIGKILL to every process of `app`, as Android's `pm
    /// revoke` ends the app whose permission it took (`scopefs revoke
    /// --kill`, issue 48). Again while new ones appear (a fork racing the
    /// kill), a few rounds at most; answers the pids it killed.
    static func endApp(_ app: AppID, services: DaemonServices) -> ControlResponse {
        guard services.fileSystem.snapshot.apps[app] != nil else {
            return .failure(CommandError.Kind.unknown.rawValue, CommandError.unknownApp(app).message)
        }
        var ended = Set<Int32>()
        for _ in 0..<10 {
            let live = services.tracker.processes(of: app).filter { $0 != getpid() && !ended.contains($0) }
            if live.isEmpty { break }
            for pid in live where kill(pid, SIGKILL) == 0 { ended.insert(pid) }
            usleep(10_000)
        }
        var response = ControlResponse(ok: true)
        response.ended = ended.sorted()
        return response
    }

    static func status(_ services: DaemonServices) -> ControlResponse {
        let counters = services.scopes.processes
        // bubblewrap's own processes (the sandbox's keeper and its pid 1)
        // are in the run's cgroup but are not the app's (issue 31).
        let processes = services.tracker.appProcesses.filter { !ProcFS.isBubblewrap(pid: $0.key.pid) }.map {
            process in
            let held = counters[process.key.pid]
            return DaemonStatus.AppProcessStatus(
                pid: process.key.pid, app: process.app, parent: process.parent,
                scopes: (held?.counts ?? [:]).sorted { $0.key < $1.key }.map {
                    DaemonStatus.ScopeStatus(grant: $0.key, path: held?.paths[$0.key] ?? "", count: $0.value)
                },
                budgetUsed: held?.outstanding ?? 0, budgetExhausted: held?.exhausted ?? false)
        }
        let options = services.options
        var status = DaemonStatus(
            pid: getpid(), mountpoint: services.mountpoint, stateDirectory: options.state.path,
            openFiles: options.openFiles.rawValue, scopes: options.scopeMode.rawValue,
            scopeBudget: options.scopeBudget,
            followsProcessEvents: services.tracker.followsEvents, attribution: services.tracker.attribution,
            policyGeneration: services.fileSystem.snapshot.generation, policyFailure: services.reloader.failure,
            inodes: services.fileSystem.inodeCount,
            processes: processes, stranded: strandedStatus(services.tracker),
            faults: services.fileSystem.faults.rules, hostChanges: services.channel.name,
            cacheTimeout: services.channel.cacheTimeout)
        status.fleetHost = services.reloader.fleet?.hostName
        status.fleetDatabase = services.reloader.fleet?.description
        let extensions = services.extensions.statuses
        status.extensions = extensions.isEmpty ? nil : extensions
        let passthrough = services.session.passthrough
        let reason = options.containerPassthrough ? passthrough.reason : "turned off (--no-container-passthrough)"
        status.containerPassthrough = ContainerPassthroughStatus(
            on: passthrough.isOn, reason: reason, openFiles: passthrough.openFiles,
            fallbacks: passthrough.fallbacks, lastFallback: passthrough.lastFallback)
        status.fuseTransport = Self.transportStatus(services.session.ring)
        return ControlResponse(ok: true, mountpoint: services.mountpoint, status: status)
    }

    private static func transportStatus(_ ring: FuseRingReport) -> FuseTransportStatus {
        let reason: String? =
            switch ring.state {
            case .notAsked, .running: nil
            case .notOffered: "the kernel does not offer io_uring (before Linux 6.14, or fuse's enable_uring is N)"
            case .failed(let why): why
            case .ended: "the ring has ended"
            }
        return FuseTransportStatus(
            transport: ring.state == .running ? "io_uring" : "/dev/fuse", reason: reason, queues: ring.queues,
            threads: ring.threads, served: ring.served)
    }

    private static func strandedStatus(_ tracker: ProcessTracker) -> [DaemonStatus.StrandedProcessStatus] {
        (tracker.stranded?.processes ?? []).flatMap { record, pids in
            pids.map {
                DaemonStatus.StrandedProcessStatus(
                    pid: $0, app: record.app, daemon: record.daemon, mountpoint: record.mountpoint,
                    state: "on a dead mount")
            }
        }
    }
}
