import ArgumentParser
import CommandErrors
import Control
import FleetStore
import Foundation
import HostText
import Launcher
import Policy
import PolicyStore

struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Run a command as an app process; exits with the command's status.")
    @OptionGroup var options: StateOptions
    @Option(help: "The app to run as.", completion: Completions.apps) var app: String
    @Flag(help: .hidden) var sandbox = false
    @Flag(
        help: """
            Run without the sandbox: the command keeps your access to the host (files, processes, \
            network) and ScopeFS only attributes its requests to the app. Not a security boundary.
            """)
    var noSandbox = false
    @Flag(
        help: """
            With --no-sandbox: use the mount as every process sees it. By default (as root) the app gets a mount \
            namespace where MOUNT holds only MOUNT/<app>, which saves a lookup per path walk.
            """)
    var sharedView = false
    @OptionGroup(title: "Sandbox") var sandboxOptions: SandboxOptions
    @Flag(
        help: """
            Keep the app running when its mount dies (the daemon ended): by default the run ends it and exits 69. \
            Its accesses through the mount then fail with ENOTCONN.
            """)
    var keepOnMountLoss = false
    @Flag(
        help: """
            Start a security scope on each of the app's active grants for CMD, as `scope exec` does: for a \
            program that knows nothing of scopes. CMD and the processes it starts are in scope while CMD runs; \
            a revoke still cuts them.
            """)
    var holdScopes = false
    @Option(
        name: .customLong("hold-scope"),
        help: ArgumentHelp(
            "Start a security scope on this granted item for CMD, as --hold-scopes does (repeatable).",
            valueName: "provider:relpath"),
        completion: Completions.items)
    var heldItems: [ItemReference] = []
    @Argument(parsing: .captureForPassthrough, help: "The command and its arguments (after --).") var command: [String]

    func validate() throws {
        if command.drop(while: { $0 == "--" }).isEmpty { throw ValidationError("name a command to run after --") }
        if sandbox && noSandbox { throw ValidationError("--sandbox and --no-sandbox exclude each other") }
        if sharedView && !noSandbox {
            throw ValidationError("--shared-view chooses a view without the sandbox: add --no-sandbox")
        }
        if noSandbox && sandboxOptions.shapesSandbox {
            throw ValidationError(
                "--share-net, --expose, --env and --cwd shape the sandbox; without it the app has the host already")
        }
    }

    func run() throws {
        var command = self.command
        if command.first == "--" { command.removeFirst() }
        var status: Int32 = 0
        try report { () throws(CommandError) in
            try options.requireInitialised()
            let confinement: AppLauncher.Confinement
            if noSandbox {
                FileHandle.standardError.write(
                    Data(
                        "scopefs: warning: --no-sandbox: \(app) runs with your access to the host; this is no security boundary\n"
                            .utf8))
                confinement = .none(view: sharedView ? .shared : .app)
            } else {
                confinement = .sandbox(sandboxOptions.shape)
            }
            status = try AppLauncher.run(
                app: app, command: command, confinement: confinement, state: options.directory,
                keepOnMountLoss: keepOnMountLoss, held: try heldScopes())
        }
        throw ExitCode(status)
    }

    /// The items of --hold-scopes (every active grant's, from the
    /// isolation layer) and of --hold-scope, in the app's view.
    private func heldScopes() throws(CommandError) -> HeldScopes {
        var seen = Set<[UInt8]>()  // by bytes: names that differ only by normalisation are two items
        let named = heldItems.map { HeldScopes.viewPath(provider: $0.provider, path: $0.path) }
            .filter { seen.insert($0.hostBytes).inserted }
        guard holdScopes else { return HeldScopes(paths: named) }
        let grants = try options.isolationStore().grants(app: app).filter { $0.state == .active }
        if grants.isEmpty {
            FileHandle.standardError.write(
                Data("scopefs: --hold-scopes: \(app.escapedForTerminal) has no active grant to hold\n".utf8))
        }
        let granted = grants.sorted { $0.id < $1.id }
            .map { HeldScopes.viewPath(provider: $0.provider, path: $0.relativePath) }
            .filter { seen.insert($0.hostBytes).inserted }
        return HeldScopes(paths: named, grantPaths: granted)
    }
}

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "The mount and the live app processes.")
    @OptionGroup var options: StateOptions
    @Flag(help: "Print JSON.") var json = false

    struct Report: Encodable {
        var stateDirectory: String
        var daemon: DaemonStatus?
        var recentLeaks: [EventJSON]
        /// Why the database could not be read (the daemon may still serve, failed closed).
        var databaseError: String?
    }

    func run() throws {
        try report { () throws(CommandError) in
            // The daemon's view comes first: with the database gone or
            // corrupt, it is what tells the user that no grant is served.
            let status = try ControlClient.status(state: options.directory)
            var leaks: [Event] = []
            var names = AppNames.none
            var databaseError: CommandError?
            do throws(CommandError) {
                leaks = try options.backend().localEvents().events(.init(kinds: [.leak], limit: 20))
                names = try AppNames(options.isolationStore())
            } catch {
                guard status != nil else { throw error }
                databaseError = error
            }
            if json {
                printJSON(
                    Report(
                        stateDirectory: options.directory.path, daemon: status.map { Self.named($0, names) },
                        recentLeaks: leaks.map { EventJSON($0, appName: $0.app.flatMap(names.name)) },
                        databaseError: databaseError?.message))
            } else {
                printText(status, databaseError: databaseError, leaks: leaks, names: names)
            }
            // Scripts ask `status` whether a mount serves: the answer is the code.
            if status == nil { throw CommandError(.noDaemon, "no daemon serves \(options.directory.path)") }
        }
    }

    /// `status` with each process's display name, as the text shows it.
    static func named(_ status: DaemonStatus, _ names: AppNames) -> DaemonStatus {
        var status = status
        for index in status.processes.indices {
            status.processes[index].appName = names.name(status.processes[index].app)
        }
        status.stranded = status.stranded?.map { process in
            var process = process
            process.appName = names.name(process.app)
            return process
        }
        return status
    }

    /// "300 s", "1 s", "0.5 s".
    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }

    private func printText(_ status: DaemonStatus?, databaseError: CommandError?, leaks: [Event], names: AppNames) {
        if let status {
            print("mounted at \(status.mountpoint.escapedForTerminal) by daemon \(status.pid)")
            if let host = status.fleetHost, let database = status.fleetDatabase {
                print("  fleet host \(host.escapedForTerminal), policy from \(database.escapedForTerminal) (SPEC S44)")
            }
            if let failure = status.policyFailure {
                print(
                    "  policy: FAILED CLOSED, every grant is denied (EPERM) until a valid database returns: \(failure.escapedForTerminal)"
                )
            }
            if let attribution = status.attribution {
                print("  app processes told apart by: \(attribution.escapedForTerminal)")
            }
            print(
                "  scopes: \(status.scopes), budget \(status.scopeBudget); open files on revoke: \(status.openFiles); inodes: \(status.inodes)"
            )
            if let channel = status.hostChanges, let timeout = status.cacheTimeout {
                print("  host changes: \(channel.escapedForTerminal); cache timeout: \(Self.seconds(timeout))")
            }
            if let passthrough = status.containerPassthrough { print("  " + Self.describe(passthrough)) }
            if let transport = status.fuseTransport { print("  " + Self.describe(transport)) }
            // On a fleet, which host these processes run on (issue 34).
            let here = status.fleetHost.map { " on host \($0.escapedForTerminal)" } ?? ""
            print("app processes\(here): \(status.processes.count)")
            for process in status.processes { print(Self.describe(process, names: names)) }
            let stranded = status.stranded ?? []
            if !stranded.isEmpty {
                print(
                    "app processes on a dead mount (their daemon was killed; they cannot reach any mount): \(stranded.count)"
                )
                for process in stranded {
                    print(
                        "  \(process.pid)\t\(names.label(process.app))\t\(process.state) "
                            + "(daemon \(process.daemon), \(process.mountpoint.escapedForTerminal))")
                }
            }
            if let faults = status.faults, !faults.isEmpty {
                print("fault rules: \(faults.count)")
                for rule in faults { print("  " + rule.summary.escapedForTerminal) }
            }
            for line in Self.describe(status.extensions ?? []) { print(line) }
        } else {
            print("no daemon serves \(options.directory.path.escapedForTerminal)")
        }
        if let databaseError {
            print("database unusable: \(databaseError.message.escapedForTerminal)")
        }
        print("recent leaks: \(leaks.count)")
        for leak in leaks { print("  " + EventsCommand.line(leak, names: names)) }
    }

    /// How requests reach the daemon (`mount --io-uring`, issue 52).
    static func describe(_ transport: FuseTransportStatus) -> String {
        var text = "requests: through \(transport.transport)"
        if transport.transport == "io_uring" {
            text += ", \(transport.queues) queues, \(transport.threads) threads, \(transport.served) served"
        }
        if let reason = transport.reason { text += " (\(reason.escapedForTerminal))" }
        return text
    }

    /// Whether container files go through kernel passthrough (issue 33).
    static func describe(_ passthrough: ContainerPassthroughStatus) -> String {
        guard passthrough.on else {
            return "container files: through the daemon (kernel passthrough off: "
                + "\((passthrough.reason ?? "").escapedForTerminal))"
        }
        var text = "container files: kernel passthrough on, \(passthrough.openFiles) open"
        if passthrough.fallbacks > 0 {
            text +=
                "; \(passthrough.fallbacks) opens served by the daemon (\((passthrough.lastFallback ?? "").escapedForTerminal))"
        }
        return text
    }

    /// Each extension provider: its process, cache and queue (SPEC S41).
    static func describe(_ extensions: [ProviderExtensionStatus]) -> [String] {
        guard !extensions.isEmpty else { return [] }
        var lines = ["extension providers: \(extensions.count)"]
        for status in extensions {
            let quota = status.quotaBytes.map { " of \($0)" } ?? ""
            lines.append(
                "  \(status.provider.escapedForTerminal)\t\(status.extension.escapedForTerminal): \(status.state.escapedForTerminal)"
            )
            lines.append(
                "      \(status.items) items, \(status.cachedBytes) bytes downloaded\(quota), \(status.pinned) pinned; "
                    + "queue: \(status.queued)\(status.uploading.map { " (uploading \($0.escapedForTerminal))" } ?? ""), "
                    + "\(status.conflicts) conflicts, \(status.errors) errors")
            if let offline = status.offline { lines.append("      offline: \(offline.escapedForTerminal)") }
            if let error = status.lastError { lines.append("      last error: \(error.escapedForTerminal)") }
        }
        return lines
    }

    static func describe(_ process: DaemonStatus.AppProcessStatus, names: AppNames) -> String {
        var text = "  \(process.pid)\t\(names.label(process.app))\(process.parent.map { "\tchild of \($0)" } ?? "")"
        text += "\tbudget used \(process.budgetUsed)\(process.budgetExhausted ? " (exhausted)" : "")"
        for scope in process.scopes {
            text += "\n      grant \(scope.grant) x\(scope.count)\t\(scope.path.escapedForTerminal)"
        }
        return text
    }
}
