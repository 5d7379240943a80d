import ArgumentParser
import CommandErrors
import FleetStore
import Foundation
import HostText
import Launcher
import Policy
import PolicyStore
import Processes

/// `scopefs init --database`: where the fleet's store is and how to log in.
struct FleetOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The fleet's shared isolation layer: postgresql://USER@HOST[:PORT]/DATABASE[?sslmode=MODE] (no password).",
            valueName: "url"))
    var database: String?
    @Option(help: "A file holding the database password (mode 0600); else $PGPASSWORD.", completion: .file())
    var passwordFile: String?
    @Option(help: "This host's name in the fleet's events and status (default: the hostname).")
    var hostName: String?
    @Option(help: "Seconds a daemon keeps serving its grants without the database (default 30).")
    var lease: Double?

    func configuration() throws(CommandError) -> FleetConfiguration? {
        guard let database else {
            if passwordFile != nil || hostName != nil || lease != nil {
                throw CommandError(.usage, "--password-file, --host-name and --lease go with --database")
            }
            return nil
        }
        let file = passwordFile.map { $0.hasPrefix("/") ? $0 : FileManager.default.currentDirectoryPath + "/" + $0 }
        return try FleetConfiguration(url: database, passwordFile: file, hostName: hostName, leaseSeconds: lease)
    }
}

/// `scopefs fleet`: the policy of a state directory on the fleet's store
/// (SPEC S44). Each change is committed to PostgreSQL before the command
/// succeeds, and reaches every host's daemon through LISTEN/NOTIFY; when
/// the database cannot be reached it fails with exit code 74 and changes nothing.
struct FleetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet", abstract: "Change and read a fleet's shared isolation layer (PostgreSQL).",
        subcommands: [
            AddApp.self, AddProvider.self, Grant.self, Revoke.self, Restore.self, Grants.self, Events.self,
            Hosts.self, AddHost.self, Processes.self, Claims.self,
        ])

    struct AddApp: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add-app", abstract: "Register an app fleet-wide.")
        @OptionGroup var options: StateOptions
        @Argument(help: "App ID (reverse-DNS).") var app: String
        @Option(help: "Display name.") var name: String?

        func run() throws {
            try report { () throws(CommandError) in
                let added = try fleetRepository(options, "add an app").addApp(id: app, name: name)
                print("app \(added.id.escapedForTerminal) added to the fleet")
            }
        }
    }

    struct AddProvider: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-provider", abstract: "Register a folder (the same path on every host) fleet-wide.")
        @OptionGroup var options: StateOptions
        @Argument(help: "Provider ID.") var provider: String
        @Argument(help: "Backing directory.", completion: .directory) var directory: String
        @Option(help: "Display name.") var name: String?

        func run() throws {
            try report { () throws(CommandError) in
                // An app process is refused before its folder is looked at (77, SPEC S5).
                let fleet = try fleetRepository(options, "add a provider")
                try FolderOverlap.refuseProvider(provider, at: directory)
                let added = try fleet.addProvider(
                    id: provider, directory: directory, name: name)
                print(
                    "provider \(added.id.escapedForTerminal) added to the fleet at \(added.directory.escapedForTerminal)"
                )
            }
        }
    }

    struct Grant: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Grant an app a file or folder on every host.")
        @OptionGroup var options: StateOptions
        @Argument(help: "App ID.") var app: String
        @Argument(help: "PROVIDER:RELPATH.") var item: String?
        @Option(
            help: ArgumentHelp(
                "Grant every item listed in FILE, one PROVIDER:RELPATH a line ('-': standard input), in one transaction: all or none.",
                valueName: "file"),
            completion: .file())
        var from: String?
        @Flag(help: "Read-write (default: read-only).") var readWrite = false
        @Flag(help: "Allow granting a provider's root folder ('PROVIDER:.'), as `scopefs grant` does.")
        var wholeProvider = false
        @Flag(help: "With --from: print the grants as JSON.") var json = false

        func validate() throws {
            if (item == nil) == (from == nil) {
                throw ValidationError("name one item (PROVIDER:RELPATH) or --from FILE")
            }
        }

        func run() throws {
            try report { () throws(CommandError) in
                let repository = try fleetRepository(options, "grant")
                let access: Access = readWrite ? .readWrite : .read
                if let from {
                    let changes = try repository.grantAll(
                        app: app, items: try GrantList.read(from), access: access, wholeProvider: wholeProvider)
                    if json { return printJSON(changes.map { GrantJSON($0.grant) }) }
                    return print(GrantList.summary(changes, app: app, access: access, fleet: true))
                }
                guard let item else { return }
                guard let colon = item.firstIndex(of: ":") else {
                    throw CommandError(.usage, "name the item as PROVIDER:RELPATH, not \(item)")
                }
                let grant = try repository.grant(
                    app: app, provider: String(item[..<colon]), path: String(item[item.index(after: colon)...]),
                    access: access, wholeProvider: wholeProvider
                ).grant
                print(
                    "grant \(grant.id): \(app.escapedForTerminal) \(grant.access.rawValue) \(item.escapedForTerminal)")
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a grant (or all of an app's) on every host; exit 74 if it cannot be stored.")
        @OptionGroup var options: StateOptions
        @Argument(help: "App ID.") var app: String
        @Option(help: "Only this grant (default: all of the app's).") var grant: Int64?

        func run() throws { try changeState(.revoked, options, app, grant) }
    }

    struct Restore: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Restore a revoked grant on every host.")
        @OptionGroup var options: StateOptions
        @Argument(help: "App ID.") var app: String
        @Option(help: "Only this grant (default: all of the app's).") var grant: Int64?

        func run() throws { try changeState(.active, options, app, grant) }
    }

    struct Grants: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the fleet's grants (of one app).")
        @OptionGroup var options: StateOptions
        @Argument(help: "App ID.") var app: String?
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let grants = try fleetRepository(options, nil).grants(app: app)
                if json { return printJSON(grants) }
                for grant in grants {
                    print(
                        "\(grant.id)\t\(grant.app.escapedForTerminal)\t\(grant.provider.escapedForTerminal):\(grant.relativePath.escapedForTerminal)\t\(grant.access.rawValue)\t\(grant.state.rawValue)"
                    )
                }
            }
        }
    }

    struct Events: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The fleet's events, from every host, with the host that wrote each.")
        @OptionGroup var options: StateOptions
        @Option(help: "Only this app's.") var app: String?
        @Option(help: "At most this many (newest).") var limit = 100
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let events = try fleetRepository(options, nil).events(app: app, limit: max(1, limit))
                if json { return printJSON(events) }
                for event in events {
                    let time = Date(timeIntervalSince1970: event.time).formatted(.iso8601)
                    print(
                        "\(time)\t\(event.host.escapedForTerminal)\t\(event.kind)\t\((event.app ?? "-").escapedForTerminal)\t\((event.path ?? "").escapedForTerminal)"
                    )
                }
            }
        }
    }

    struct Hosts: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The fleet's hosts: the policy version each serves, or why it fails closed.")
        @OptionGroup var options: StateOptions
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let hosts = try fleetRepository(options, nil).hosts()
                if json { return printJSON(hosts) }
                for host in hosts {
                    let state = host.failure.map { "failed closed: \($0)" } ?? "serving version \(host.version)"
                    print(
                        "\(host.name.escapedForTerminal)\t\(host.role)\tseen \(Int(host.secondsSinceSeen)) s ago\t\(state.escapedForTerminal)"
                    )
                    for process in host.processes {
                        print("  \(process.app.escapedForTerminal) pid \(process.pid)")
                    }
                }
            }
        }
    }

    struct AddHost: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-host",
            abstract: "Create a host's database role: reads the policy, writes only its own events (run as the owner).")
        @OptionGroup var options: StateOptions
        @Argument(help: "The role, scopefs_host_NAME.") var role: String
        @Option(help: "A file holding the role's password (mode 0600).", completion: .file()) var passwordFile: String

        func run() throws {
            try report { () throws(CommandError) in
                let password = try FleetConfiguration.readSecret(passwordFile)
                let notes = try fleetRepository(options, "add a host role").createHostRole(role, password: password)
                print("role \(role) may read the fleet's policy and write its own events")
                for note in notes { FileHandle.standardError.write(Data("scopefs: warning: \(note)\n".utf8)) }
            }
        }
    }
}

/// The repository of a fleet state directory; `action` (a change) is
/// refused inside an app process (SPEC S5).
func fleetRepository(_ options: StateOptions, _ action: String?) throws(CommandError) -> FleetRepository {
    if let action { try OwnerCheck.require(options.directory, to: action) }
    let backend = try options.backend()
    _ = try backend.requireFleet()
    // Non-nil: `requireFleet` said this state directory is on a fleet.
    return try backend.fleetRepository()!
}

private func changeState(_ state: GrantState, _ options: StateOptions, _ app: String, _ grant: Int64?) throws {
    try report { () throws(CommandError) in
        let changed = try fleetRepository(options, state == .revoked ? "revoke grants" : "restore grants").setState(
            state, app: app, grant: grant)
        let verb = state == .revoked ? "revoked" : "restored"
        if changed.isEmpty { print("nothing to change: \(app.escapedForTerminal) has no such grant left to \(verb)") }
        for grant in changed { print("grant \(grant.id) \(verb) on every host") }
    }
}

/// `scopefs mount --database`: a state directory joins the fleet's store
/// as `init --database` records it, without changing the schema (a host's
/// role cannot: it must be migrated by the owner's `init --database`).
enum FleetMembership {
    static func join(_ state: StateDirectory, _ configuration: FleetConfiguration) throws(CommandError) {
        if let recorded = try IsolationBackend(state).fleet, recorded.url != configuration.url {
            throw CommandError(
                .badState,
                "\(state.path) is on the fleet database \(recorded.url) already, not \(configuration.url); mount without --database, or use another state directory"
            )
        }
        _ = try PolicyDatabase.create(state)  // this host's own events and documents
        let database = try FleetDatabase(configuration)
        defer { database.disconnect() }
        try FleetRepository(database: database).checkSchema()
        try configuration.save(state)
    }
}
