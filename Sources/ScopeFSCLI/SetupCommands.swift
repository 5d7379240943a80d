import ArgumentParser
import CommandErrors
import Control
import Daemon
import FleetStore
import Foundation
import HostText
import Launcher
import Policy
import PolicyStore
import Processes

struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init", abstract: "Create the state directory and its database.")
    @OptionGroup var options: StateOptions
    @Flag(help: "Print the state directory as JSON.") var json = false
    @OptionGroup var fleet: FleetOptions

    func run() throws {
        try report { () throws(CommandError) in
            let state = options.directory
            try OwnerCheck.require(state, to: "initialise a state directory")
            if let configuration = try fleet.configuration() {
                // The shared isolation layer (SPEC S44): migrated as the owner's role.
                _ = try PolicyDatabase.create(state)  // this host's own events and documents
                try FleetRepository(database: try FleetDatabase(configuration)).migrate()
                try configuration.save(state)
                if json {
                    struct Initialised: Encodable {
                        var stateDirectory: String
                        var database: String
                        var host: String
                    }
                    return printJSON(
                        Initialised(
                            stateDirectory: state.path, database: try configuration.endpoint().description,
                            host: configuration.hostName))
                }
                print(
                    "initialised \(state.path.escapedForTerminal) on the fleet database \(try configuration.endpoint().description.escapedForTerminal) as host \(configuration.hostName.escapedForTerminal)"
                )
                return
            }
            if DaemonLock.isHeld(state) {
                // Issue 15: the daemon serves this directory's database. With
                // the database present, init has nothing to create and would
                // only hide a mix-up; with it gone, a new one is how the user
                // gets grants back, and the daemon (failed closed meanwhile)
                // must let go of the old file first.
                let daemon = DaemonInfo.read(from: state)
                let mountpoint = daemon?.mountpoint ?? "MOUNTPOINT"
                if FileManager.default.fileExists(atPath: state.databasePath) {
                    throw CommandError(
                        .refused,
                        """
                        refused: a ScopeFS daemon\(daemon.map { " (pid \($0.pid))" } ?? "") serves \(state.path) at \(mountpoint) \
                        and its database exists; nothing to initialise. To start over, run `scopefs --state \(state.path) unmount \(mountpoint)` \
                        and move \(state.databasePath) away first. If the database is corrupt, move it away and run init again: \
                        the daemon denies every grant until a valid database returns
                        """)
                }
                try ControlClient.notifyChange(state: state)
            }
            _ = try PolicyDatabase.create(state)
            try ControlClient.notifyChange(state: state)
            if json {
                struct Initialised: Encodable {
                    var stateDirectory: String
                    var database: String
                }
                return printJSON(Initialised(stateDirectory: state.path, database: state.databasePath))
            }
            print("initialised \(options.directory.path.escapedForTerminal)")
        }
    }
}

struct ProviderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "provider", abstract: "Register storage locations.",
        subcommands: [Add.self, List.self, Remove.self, Sync.self, Restart.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add", abstract: "Register a provider backed by a directory or supplied by an extension.",
            discussion: """
                With --extension, the provider's items come from an extension process (docs/PROVIDERS.md): \
                s3, rclone, folder, or a command of yours. Credentials are never given here: the extension \
                reads them from the usual places (AWS environment and files, rclone's configuration).
                """)
        @OptionGroup var options: StateOptions
        @Argument(help: "Provider ID, e.g. com.example.drive or local.") var id: String
        @Argument(help: "Backing directory (not with --extension).", completion: .directory) var directory: String?
        @Option(help: "Display name.") var name: String?
        @Option(
            name: .customLong("extension"),
            help: "An extension that supplies the items: s3, rclone, folder, or a command (split at spaces).")
        var extensionName: String?
        @Option(name: .customLong("option"), help: "KEY=VALUE for the extension (repeatable), e.g. bucket=docs.")
        var extensionOptions: [String] = []
        @Option(
            name: .customLong("writable"), help: "A host folder the extension's sandbox may write (repeatable).",
            completion: .directory)
        var writablePaths: [String] = []
        @Option(help: "Bytes of downloaded content to keep at most (least recently used go first).")
        var cacheQuota: Int64?
        @Flag(help: "Print the provider as JSON.") var json = false

        func validate() throws {
            if extensionName == nil && directory == nil {
                throw ValidationError("give a backing directory, or --extension NAME")
            }
            if extensionName != nil && directory != nil {
                throw ValidationError(
                    "an extension's provider has no backing directory: its replica is in the state directory")
            }
            if extensionName == nil && !(extensionOptions.isEmpty && writablePaths.isEmpty && cacheQuota == nil) {
                throw ValidationError("--option, --writable and --cache-quota need --extension")
            }
            if let cacheQuota, cacheQuota < 0 { throw ValidationError("--cache-quota must be 0 or more bytes") }
            for option in extensionOptions where !option.contains("=") || option.hasPrefix("=") {
                throw ValidationError("--option \(option): expected KEY=VALUE")
            }
        }

        func run() throws {
            try report { () throws(CommandError) in
                // An app process is refused before anything about its
                // request is looked at (77, SPEC S5).
                let store = try options.storeForChange("add providers")
                var spec: ProviderExtensionSpec?
                var backing = directory ?? ""
                if let directory { try FolderOverlap.refuseProvider(id, at: directory) }
                if let extensionName {
                    let named = try Self.spec(extensionName, extensionOptions)
                    if options.isOnFleet { try Self.refuseOnFleet(named, writable: writablePaths) }
                    spec = named
                    spec?.cacheQuota = cacheQuota
                    if !writablePaths.isEmpty {
                        spec?.writablePaths = try writablePaths.map { path throws(CommandError) in
                            guard path.hasPrefix("/"), FileManager.default.fileExists(atPath: path) else {
                                throw CommandError(.noInput, "--writable \(path): not an existing absolute path")
                            }
                            return path
                        }
                    }
                    let layout = ExtensionLayout(state: options.directory, provider: id)
                    do { try layout.create() } catch {
                        throw CommandError(.ioError, "cannot create \(layout.folder): \(error.localizedDescription)")
                    }
                    backing = layout.files
                }
                let provider = try store.addProvider(
                    id: id, directory: backing, name: name, extension: spec)
                try ControlClient.notifyChange(state: options.directory)
                if json { return printJSON(provider) }
                if let extensionName {
                    print("provider \(provider.id) -> extension \(extensionName)".escapedForTerminal)
                } else {
                    print("provider \(provider.id) -> \(provider.directory)".escapedForTerminal)
                }
            }
        }

        /// A fleet's provider is one every host may start (decision 63):
        /// refused here, before anything is written, as each host's daemon
        /// would refuse it.
        static func refuseOnFleet(_ spec: ProviderExtensionSpec, writable: [String]) throws(CommandError) {
            var given = spec
            given.writablePaths = writable.isEmpty ? nil : writable
            guard let why = given.refusedOnFleet else { return }
            throw CommandError(
                .badState,
                "cannot add this provider here: its extension has \(why); a fleet's provider uses a built-in extension (\(ExtensionCommands.builtIns.keys.sorted().joined(separator: ", "))) without --writable (see docs/CLI.md, \"A fleet\")"
            )
        }

        /// A built-in's name, or a command of the owner's.
        static func spec(_ value: String, _ options: [String]) throws(CommandError) -> ProviderExtensionSpec {
            let pairs = options.map { option in
                let key = option.prefix { $0 != "=" }
                return (String(key), String(option.dropFirst(key.count + 1)))
            }
            let values = Dictionary(pairs, uniquingKeysWith: { _, last in last })
            let words = value.split(separator: " ").map(String.init)
            if let name = words.first, words.count == 1 && !name.contains("/") {
                guard ExtensionCommands.builtIns[name] != nil else {
                    throw CommandError(
                        .usage,
                        "no built-in extension \(name) (there are \(ExtensionCommands.builtIns.keys.sorted().joined(separator: ", "))); a command of yours is given by its path"
                    )
                }
                return ProviderExtensionSpec(name: name, command: nil, options: values)
            }
            guard let program = words.first, access(program, X_OK) == 0 else {
                throw CommandError(.noInput, "the extension command \(words.first ?? "") is not an executable file")
            }
            return ProviderExtensionSpec(name: nil, command: words, options: values)
        }
    }

    struct Sync: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sync",
            abstract: "Bring an extension's provider up to date now: remote changes in, local changes out.")
        @OptionGroup var options: StateOptions
        @Argument(completion: Completions.providers) var id: String

        func run() throws {
            try report { () throws(CommandError) in
                try ContentCommands.send(.sync, provider: id, path: nil, state: options.directory)
            }
        }
    }

    struct Restart: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "restart",
            abstract: "Start an extension's provider again, a failed one too, without a remount.",
            discussion: """
                An extension that exits 5 times within 10 minutes marks its provider failed: its items stay \
                readable where downloaded, nothing is synced, and `provider sync` refuses at once (69). \
                Once the cause is fixed, this starts the extension again with its past exits forgotten, \
                waits until it runs, and syncs. Exit 69 if it does not start.
                """)
        @OptionGroup var options: StateOptions
        @Argument(completion: Completions.providers) var id: String

        func run() throws {
            try report { () throws(CommandError) in
                try ContentCommands.send(.restart, provider: id, path: nil, state: options.directory)
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List providers.")
        @OptionGroup var options: StateOptions
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let providers = try options.isolationStore().providers()
                if json { return printJSON(providers) }
                for provider in providers {
                    print(
                        [provider.id, provider.name, provider.directory].map(\.escapedForTerminal).joined(
                            separator: "\t"))
                }
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove", abstract: "Unregister a provider and drop its grants.")
        @OptionGroup var options: StateOptions
        @Argument(completion: Completions.providers) var id: String
        @Flag(help: "Print the removed provider as JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let repository = try options.storeForChange("remove providers")
                let removed = try repository.providers().first { $0.id == id }
                try repository.removeProvider(id: id)
                try ControlClient.notifyChange(state: options.directory)
                if json, let removed { printJSON(removed) }
            }
        }
    }
}

extension DownloadPolicy: ExpressibleByArgument {}

struct AppCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app", abstract: "Register apps.", subcommands: [Add.self, List.self, Remove.self, Set.self])

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set", abstract: "Change an app's settings.",
            discussion: """
                --downloads never: the app's reads never download an extension provider's dataless items \
                (as Apple's iopolicy for indexers and backup tools); they fail with EDEADLK and cause no traffic.
                """)
        @OptionGroup var options: StateOptions
        @Argument(completion: Completions.apps) var id: String
        @Option(help: "on-demand (the default) or never.") var downloads: DownloadPolicy

        func run() throws {
            try report { () throws(CommandError) in
                try options.storeForChange("change apps").setDownloads(downloads, of: id)
                try ControlClient.notifyChange(state: options.directory)
            }
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add", abstract: "Register an app and create its container.")
        @OptionGroup var options: StateOptions
        @Argument(help: "App ID, e.g. com.example.editor.") var id: String
        @Option(help: "Display name.") var name: String?
        @Flag(help: "Print the app and its container as JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let app = try options.storeForChange("add apps").addApp(id: id, name: name)
                try options.directory.createContainer(for: app.id)
                try ControlClient.notifyChange(state: options.directory)
                if json {
                    struct Added: Encodable {
                        var id: String
                        var name: String
                        var container: String
                    }
                    return printJSON(
                        Added(id: app.id, name: app.name, container: options.directory.containerPath(of: app.id)))
                }
                print("app \(app.id) container \(options.directory.containerPath(of: app.id))".escapedForTerminal)
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List apps.")
        @OptionGroup var options: StateOptions
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let apps = try options.isolationStore().apps()
                if json { return printJSON(apps) }
                for app in apps { print([app.id, app.name].map(\.escapedForTerminal).joined(separator: "\t")) }
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove", abstract: "Unregister an app and drop its grants (its container stays on disk).")
        @OptionGroup var options: StateOptions
        @Argument(completion: Completions.apps) var id: String
        @Flag(help: "End the app's running processes first (SIGTERM, then SIGKILL after 5 s).") var force = false
        @Flag(help: "Print the removed app as JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let repository = try options.storeForChange("remove apps")
                let removed = try repository.apps().first { $0.id == id }
                // Not while its processes run (issue 46, 5c): they would go
                // on reading and writing its container, of no app.
                if removed != nil { try endProcesses() }
                try repository.removeApp(id: id)
                try ControlClient.notifyChange(state: options.directory)
                // A run that registered meanwhile is of an app that is gone.
                if removed != nil, force, let late = try? AppProcesses.running(id, state: options.directory) {
                    _ = AppProcesses.end(late)
                }
                if json, let removed { printJSON(removed) }
            }
        }

        private func endProcesses() throws(CommandError) {
            var running = try AppProcesses.running(id, state: options.directory)
            if running.isEmpty { return }
            guard force else {
                throw CommandError(
                    .timedOut,
                    "\(id) has \(AppProcesses.describe(running)); stop them first, or end them with "
                        + "`scopefs app remove --force \(id)`; the app was not removed")
            }
            // Those that end may start others meanwhile: a few rounds.
            for _ in 0..<3 {
                let left = AppProcesses.end(running)
                if !left.isEmpty {
                    throw CommandError(
                        .timedOut, "cannot end \(AppProcesses.describe(left)) of \(id); the app was not removed")
                }
                running = try AppProcesses.running(id, state: options.directory)
                if running.isEmpty { return }
            }
            throw CommandError(
                .timedOut, "\(id) keeps starting processes: \(AppProcesses.describe(running)); the app was not removed")
        }
    }
}
