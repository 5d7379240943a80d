import CSystemShims
import CommandErrors
import Control
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore
import SandboxProfile

/// Starts a command as an app process (SPEC S5): registers this process
/// with the daemon as the root of the app's process tree (the daemon moves
/// it into the run's cgroup), then spawns the command in the sandbox
/// (`Sandbox`), or with `--no-sandbox` in the app's view of the mount
/// (`AppNamespace`), and returns its exit status.
public enum AppLauncher {
    /// How the app is run: confined (the default), or attribution only.
    public enum Confinement: Sendable {
        /// In a bubblewrap sandbox (SPEC S5).
        case sandbox(SandboxShape)
        /// No sandbox: the app has the owner's access to the host and sees
        /// the mount through `view`; ScopeFS only attributes its requests.
        case none(view: AppNamespace)
    }

    /// `keepOnMountLoss`: keep the app running when its mount dies
    /// (`MountLossFollower`); by default the run ends it and exits 69.
    public static func run(
        app: String, command: [String], confinement: Confinement, state: StateDirectory, keepOnMountLoss: Bool = false,
        held: HeldScopes = HeldScopes()
    ) throws(CommandError) -> Int32 {
        // Checked before registering: a missing bubblewrap must not leave a
        // registered launcher behind.
        let bubblewrap: String?
        if case .sandbox(let shape) = confinement {
            bubblewrap = try Sandbox.bubblewrap()
            try shape.checkExposedPathsExist()
        } else {
            bubblewrap = nil
        }
        let response = try ControlClient.send(.register(app: app), state: state)
        guard response.ok, let mountpoint = response.mountpoint else {
            throw CommandError(
                CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                response.message ?? "registration failed")
        }
        let watch = response.daemon.flatMap { MountLossFollower(daemon: $0) }
        let loss = MountLoss(watch: watch, app: app, mountpoint: mountpoint, keep: keepOnMountLoss)
        switch confinement {
        case .sandbox(let shape):
            let sandbox = Sandbox(
                app: app, mountpoint: mountpoint, state: state, shape: shape, runAs: try runAs(response),
                appEndpoint: response.appEndpoint)
            return try runSandboxed(command, in: sandbox, bubblewrap: bubblewrap!, loss: loss, held: held)
        case .none(let view):
            var environment = HostEnvironment.current
            environment["SCOPEFS_APP"] = app
            // Client libraries find the control socket (bookmark resolution) here.
            environment["SCOPEFS_STATE"] = state.path
            environment["SCOPEFS_MOUNT"] = mountpoint + "/" + app
            let entered = AppNamespace.enter(view, app: app, mountpoint: mountpoint)
            environment["SCOPEFS_VIEW"] = "\(entered)"
            let binary = Sandbox.executable ?? CommandLine.arguments[0]
            return try spawnAndWait(
                held.wrapping(command, binary: binary, appDirectory: mountpoint + "/" + app),
                environment: environment, directory: nil, loss: loss, app: .child)
        }
    }

    /// The run's watch on its mount, and what to say when it dies.
    private struct MountLoss {
        var watch: MountLossFollower?
        var app: String
        var mountpoint: String
        var keep: Bool

        func start(child: pid_t) {
            guard let watch else { return }
            let (app, mountpoint, keep, daemon) = (app, mountpoint, keep, watch.daemon)
            watch.start(child: child, keep: keep) {
                let text =
                    keep
                    ? "scopefs: warning: the mount at \(mountpoint) died (daemon \(daemon) ended); \(app) keeps running "
                        + "(--keep-on-mount-loss), but every access through the mount fails (ENOTCONN)"
                    : "scopefs: the mount at \(mountpoint) died (daemon \(daemon) ended); ending \(app)"
                FileHandle.standardError.write(Data((text.escapedForTerminal + "\n").utf8))
            }
        }

        /// After the command was reaped: the error that ends the run when the
        /// mount died under it.
        func finish() throws(CommandError) {
            guard let watch else { return }
            watch.childDidEnd()
            if watch.mountLost && !keep {
                throw CommandError(
                    .noDaemon,
                    "\(app) was ended because its mount at \(mountpoint) died; remount and run it again "
                        + "(--keep-on-mount-loss keeps an app running on a dead mount)")
            }
        }
    }

    /// Who a sandboxed app runs as: a root launcher (the owner, or the
    /// owner's `sudo`) hands the app to the account the daemon names and
    /// refuses to run it as root; any other launcher's app keeps its uid.
    private static func runAs(_ registration: ControlResponse) throws(CommandError) -> AppAccount? {
        guard geteuid() == 0 else { return nil }
        guard let account = registration.runAs, account.uid != 0 else {
            throw CommandError(
                .badState,
                "apps never run as root, and this system has no \(AppAccount.systemName) account for them: "
                    + "create it (`\(AppAccount.creation)`, or `make deps`), then unmount and mount again")
        }
        return account
    }

    private static func runSandboxed(
        _ command: [String], in sandbox: Sandbox, bubblewrap: String, loss: MountLoss, held: HeldScopes
    ) throws(CommandError) -> Int32 {
        // The filter travels through a pipe that bubblewrap reads to its end;
        // a compiled filter is a few hundred bytes, far below a pipe's size.
        let filter = try SeccompFilter.pipe()
        defer { filter.close() }
        var binary: Int32? = nil
        if Sandbox.binaryNeedsCopy, let executable = Sandbox.executable {
            let descriptor = open(executable, O_RDONLY)
            if descriptor >= 0 { binary = descriptor }
        }
        defer { if let binary { close(binary) } }
        var environment = sandbox.environment(from: HostEnvironment.current)
        if let folder = sandbox.shape.workingDirectory, !sandbox.shows(folder) {
            throw CommandError(
                .noInput, "--cwd \(folder): the sandbox does not show it; --expose it (or a folder above it)")
        }
        var sandbox = sandbox
        var proxy: PortalBusProxy?
        defer { proxy?.stop() }
        if sandbox.shape.portalBus {
            let owners = HostEnvironment.current
            let started = try PortalBusProxy(
                app: sandbox.app, appInfo: sandbox.appInfo, bubblewrap: bubblewrap, environment: owners,
                account: sandbox.runAs, identity: sandbox.identity)
            proxy = started
            sandbox.portalBusSocket = started.socket
            sandbox.documentMount = PortalBusProxy.documentMount(owners)
            environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=" + PortalBusProxy.socketInside
        }
        if let program = try sandbox.checkCommand(command[0], environment: environment) {
            sandbox.commandLibraryFolders = ElfRunPath.folders(of: program).filter {
                access($0, F_OK) == 0 && !SandboxProfile.isSystemPath($0)
            }
        }
        let appInfo = try InheritedPipe { descriptor throws(CommandError) in
            try InheritedPipe.writeAll(Array(sandbox.appInfo.utf8), to: descriptor)
        }
        defer { appInfo.close() }
        let profile = sandbox.profile(
            binaryDescriptor: binary, appInfoDescriptor: appInfo.descriptor, environment: environment)
        // Options (a few kilobytes) go through a pipe too: bubblewrap's own
        // command line is the sandbox's /proc/1/cmdline.
        let options = profile.options(seccompDescriptor: filter.descriptor)
        let optionBytes: [UInt8] = options.reduce(into: []) { $0 += $1.hostBytes + [0] }
        let arguments = try InheritedPipe { descriptor throws(CommandError) in
            try InheritedPipe.writeAll(optionBytes, to: descriptor)
        }
        defer { arguments.close() }
        // CMD was checked above as itself; `scope exec` in front of it is
        // the binary the sandbox always shows.
        let inScope = held.wrapping(
            command, binary: Sandbox.binaryInside + "/scopefs", appDirectory: sandbox.appDirectory)
        let argv = profile.commandLine(
            bubblewrap: bubblewrap, optionsDescriptor: arguments.descriptor, command: inScope)
        return try spawnAndWait(argv, environment: [:], directory: nil, loss: loss, app: .sandboxedCommand)
    }

    /// Spawns `command`, passes the run's signals on to the app in it
    /// (`SignalForwarder`) and waits for it.
    private static func spawnAndWait(
        _ command: [String], environment: [String: String], directory: String?, loss: MountLoss,
        app: SignalForwarder.Target
    ) throws(CommandError) -> Int32 {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigfillset(&defaults)
        // bubblewrap starts with the forwarded signals ignored, as they are
        // here now (`SandboxProfile.launcherSignals`): none of them ends it.
        if app == .sandboxedCommand { SignalForwarder.signals.forEach { sigdelset(&defaults, $0) } }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let directory { directory.withHostCString { _ = posix_spawn_file_actions_addchdir_np(&actions, $0) } }

        let argv = command.map { $0.withHostCString { strdup($0) } } + [nil]
        let envp = environment.map { "\($0.key)=\($0.value)".withHostCString { strdup($0) } } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // Ignored until the forwarder's handlers replace it: a signal in
        // between neither ends the run nor reaches the app.
        SignalForwarder.signals.forEach { signal($0, SIG_IGN) }
        var child: pid_t = 0
        let result = posix_spawnp(&child, argv[0]!, &actions, &attributes, argv, envp)
        guard result == 0 else {
            let message = "cannot run \(command[0]): \(String(cString: strerror(result)))"
            throw CommandError(result == ENOENT ? .runNotFound : .runNotExecutable, message)
        }
        let forwarder = SignalForwarder(child: child, target: app)
        loss.start(child: child)
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        forwarder.childDidEnd()
        try loss.finish()
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }
}

extension CommandError.Kind {
    /// Shell conventions for a command that cannot be run.
    package static var runNotFound: CommandError.Kind { .commandNotFound }
    package static var runNotExecutable: CommandError.Kind { .commandNotExecutable }
}
