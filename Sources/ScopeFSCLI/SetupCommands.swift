import ArgumentParser
import CommandErrors
import Control
import Daemon
import Foundation
import HostText
import Launcher
import Policy
import PolicyStore

struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init", abstract: "Create the state directory and its database.")
    @OptionGroup var options: StateOptions
    @Flag(help: "Print the state directory as JSON.") var json = false

    func run() throws {
        try report { () throws(CommandError) in
            let state = options.directory
            try OwnerCheck.require(state, to: "initialise a state directory")
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
        subcommands: [Add.self, List.self, Remove.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add", abstract: "Register a provider backed by a directory.")
        @OptionGroup var options: StateOptions
        @Argument(help: "Provider ID, e.g. com.example.drive or local.") var id: String
        @Argument(help: "Backing directory.", completion: .directory) var directory: String
        @Option(help: "Display name.") var name: String?
        @Flag(help: "Print the provider as JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let provider = try options.repositoryForChange("add providers").addProvider(
                    id: id, directory: directory, name: name)
                try ControlClient.notifyChange(state: options.directory)
                if json { return printJSON(provider) }
                print("provider \(provider.id) -> \(provider.directory)".escapedForTerminal)
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List providers.")
        @OptionGroup var options: StateOptions
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let providers = try options.repository().providers()
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
                let repository = try options.repositoryForChange("remove providers")
                let removed = try repository.providers().first { $0.id == id }
                try repository.removeProvider(id: id)
                try ControlClient.notifyChange(state: options.directory)
                if json, let removed { printJSON(removed) }
            }
        }
    }
}

struct AppCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app", abstract: "Register apps.", subcommands: [Add.self, List.self, Remove.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add", abstract: "Register an app and create its container.")
        @OptionGroup var options: StateOptions
        @Argument(help: "App ID, e.g. com.example.editor.") var id: String
        @Option(help: "Display name.") var name: String?
        @Flag(help: "Print the app and its container as JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let app = try options.repositoryForChange("add apps").addApp(id: id, name: name)
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
                let apps = try options.repository().apps()
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
        @Flag(help: "Print the removed app as JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let repository = try options.repositoryForChange("remove apps")
                let removed = try repository.apps().first { $0.id == id }
                try repository.removeApp(id: id)
                try ControlClient.notifyChange(state: options.directory)
                if json, let removed { printJSON(removed) }
            }
        }
    }
}
