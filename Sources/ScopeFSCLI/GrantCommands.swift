import ArgumentParser
import CommandErrors
import Control
import Documents
import FleetStore
import Foundation
import HostText
import Policy
import PolicyStore

/// `PROVIDER:RELPATH` as typed on the command line.
struct ItemReference: ExpressibleByArgument {
    var provider: String
    var path: String

    init?(argument: String) {
        // By bytes: as a Character, ":" followed by a combining mark is not ":".
        guard let colon = argument.utf8.firstIndex(of: UInt8(ascii: ":")), colon != argument.startIndex else {
            return nil
        }
        provider = String(argument[..<colon])
        path = String(argument[argument.index(after: colon)...])
    }

    static var defaultCompletionKind: CompletionKind { .default }
}

struct GrantCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "grant",
        abstract: "Grant an app a file or folder of a provider (or change its grant); prints the grant id.")
    @OptionGroup var options: StateOptions
    @Argument(completion: Completions.apps) var app: String
    @Argument(
        help: ArgumentHelp(
            "The item, as PROVIDER:RELPATH ('.' for the provider's root).", valueName: "provider:relpath"),
        completion: Completions.items)
    var item: ItemReference?
    @Option(
        help: ArgumentHelp(
            "Grant every item listed in FILE, one PROVIDER:RELPATH a line ('-': standard input), in one transaction: all or none.",
            valueName: "file"),
        completion: .file())
    var from: String?
    @Flag(help: "Grant read access only.") var readOnly = false
    @OptionGroup var lifetime: GrantLifetime
    @Flag(help: "Print the grant as JSON (as in `privacy --json`; with --from, a list).") var json = false

    func validate() throws {
        if (item == nil) == (from == nil) { throw ValidationError("name one item (PROVIDER:RELPATH) or --from FILE") }
        if from != nil && lifetime.session {
            throw ValidationError("--from makes persistent grants; --session is for one item")
        }
    }

    func run() throws {
        try report { () throws(CommandError) in
            if let from { return try grantAll(from) }
            guard let item else { return }
            let order = GrantOrder(
                app: app, provider: item.provider, path: item.path, access: readOnly ? .read : .readWrite,
                session: lifetime.session, wholeProvider: lifetime.wholeProvider)
            guard let change = try options.policy(.grant(order), "grant access").granted else {
                throw CommandError(.internalError, "the daemon did not say which grant it made")
            }
            for description in change.changes { note("grant \(change.grant.id): \(description)") }
            if json {
                let names = try AppNames(options.isolationStore())
                return printJSON(GrantJSON(change.grant, appName: names.name(app)))
            }
            print(change.grant.id)
        }
    }

    /// `--from FILE`: written here, in one transaction, then installed by
    /// the daemon serving the state directory before this returns (SPEC
    /// S13), as `app add` does; the control socket carries one change at a time.
    private func grantAll(_ source: String) throws(CommandError) {
        let repository = try options.storeForChange("grant access")
        let items = try GrantList.read(source)
        let access: Access = readOnly ? .read : .readWrite
        let changes = try repository.grantAll(
            app: app, items: items, access: access, wholeProvider: lifetime.wholeProvider)
        try ControlClient.notifyChange(state: options.directory)
        if json {
            let names = try AppNames(repository)
            return printJSON(changes.map { GrantJSON($0.grant, appName: names.name(app)) })
        }
        print(GrantList.summary(changes, app: app, access: access, fleet: repository is FleetRepository))
    }
}

/// Options of `grant` and `open` about what a grant spans and how long it lasts.
struct GrantLifetime: ParsableArguments {
    @Flag(help: "A session grant: it ends when the app's last process exits (nothing is kept).")
    var session = false
    @Flag(help: "Allow granting a provider's root folder, i.e. every file of the provider.")
    var wholeProvider = false
}

/// `GRANT | --all`, shared by revoke, restore and forget.
struct GrantSelection: ParsableArguments {
    @Argument(completion: Completions.apps) var app: String
    @Argument(
        help: "Grant id, or the granted item as PROVIDER:RELPATH (see `scopefs privacy`).",
        completion: Completions.grants)
    var grant: String?
    @Flag(help: "All of the app's grants.") var all = false
    @Flag(help: "Print the grants changed as JSON (as in `privacy --json`; [] when nothing changed).") var json = false

    func validate() throws {
        if (grant == nil) == !all { throw ValidationError("name one grant (an id or PROVIDER:RELPATH), or --all") }
        if let grant, Int64(grant) == nil, !grant.contains(":") {
            throw ValidationError("a grant is an id (see `scopefs privacy`) or PROVIDER:RELPATH: \(grant)")
        }
    }

    /// The grant named (nil: --all). An item is looked up among the app's
    /// grants, as everything else names items (issue 31): an id needs no
    /// database read, so a revoke still works when the database does not.
    func grantID(_ options: StateOptions) throws(CommandError) -> Int64? {
        guard !all, let grant else { return nil }
        if let id = Int64(grant) { return id }
        let item = grant.hasSuffix(":.") ? String(grant.dropLast(2)) + ":" : grant
        let grants = try options.isolationStore().grants(app: app)
        guard let found = grants.first(where: { "\($0.provider):\($0.relativePath)" == item }) else {
            throw CommandError(.unknown, "\(app) holds no grant on \(grant) (see `scopefs privacy \(app)`)")
        }
        return found.id
    }
}

func changeState(_ state: GrantState, _ selection: GrantSelection, _ options: StateOptions) throws {
    try report { () throws(CommandError) in
        let grant = try selection.grantID(options)
        let command: ControlCommand =
            state == .active ? .restore(app: selection.app, grant: grant) : .revoke(app: selection.app, grant: grant)
        let response = try options.policy(command, "revoke or restore grants")
        let changed = OwnerPolicy.changedGrants(response)
        if let held = response.message {
            // The daemon could not write the database (issue 15) and holds
            // the revocation itself.
            note("warning: revoked through the daemon, \(held)")
        }
        if selection.json {
            // Names are an extra: a database the daemon had to revoke through may not read.
            let names = (try? AppNames(options.isolationStore())) ?? .none
            return printJSON(changed.map { GrantJSON($0, appName: names.name($0.app)) })
        }
        for grant in changed {
            print("\(grant.id)\t\(state.rawValue)\t\("\(grant.provider):\(grant.relativePath)".escapedForTerminal)")
        }
        if changed.isEmpty {
            let what = grant.map { "grant \($0) is" } ?? "every grant of \(selection.app) is"
            print("nothing changed: \(what) already \(state.rawValue)".escapedForTerminal)
        }
    }
}

struct RevokeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke", abstract: "Revoke a grant (or all of an app's): the next access fails with EPERM.")
    @OptionGroup var options: StateOptions
    @OptionGroup var selection: GrantSelection
    @Flag(help: "Then kill every process of the app, as Android's `pm revoke` does (needs a running daemon).")
    var kill = false
    @Flag(
        help:
            "Then lose what the app wrote and did not fsync, as a crash would (needs an `unsynced` fault rule in force)."
    )
    var loseUnsynced = false

    func run() throws {
        try changeState(.revoked, selection, options)
        try report { () throws(CommandError) in
            if kill { try AppEnding.end(selection.app, state: options.directory) }
            if loseUnsynced {
                let lost = try FaultCommand.loseUnsynced(app: selection.app, state: options.directory)
                FileHandle.standardError.write(Data("\(lost) files back to their last fsync\n".utf8))
            }
        }
    }
}

struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore", abstract: "Restore a revoked grant (or all of an app's) without remounting.")
    @OptionGroup var options: StateOptions
    @OptionGroup var selection: GrantSelection

    func run() throws { try changeState(.active, selection, options) }
}

struct ForgetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forget",
        abstract: "Remove a grant (or all of an app's) for good, with the app's references to its item.")
    @OptionGroup var options: StateOptions
    @OptionGroup var selection: GrantSelection

    func run() throws {
        try report { () throws(CommandError) in
            let response = try options.policy(
                .forget(app: selection.app, grant: try selection.grantID(options)), "forget grants")
            let (grants, references) = (response.forgotten ?? [], response.references ?? [])
            if selection.json {
                struct Forgotten: Encodable {
                    var grants: [GrantJSON]
                    var references: [String]
                }
                let names = try AppNames(options.isolationStore())
                return printJSON(
                    Forgotten(
                        grants: grants.map { GrantJSON($0, appName: names.name($0.app)) },
                        references: references.map(MountLayout.containerPath)))
            }
            for grant in grants {
                print("\(grant.id)\tforgotten\t\("\(grant.provider):\(grant.relativePath)".escapedForTerminal)")
            }
            for reference in references {
                print("reference " + MountLayout.containerPath(reference.escapedForTerminal) + "\tremoved")
            }
            if grants.isEmpty { print("nothing changed: \(selection.app.escapedForTerminal) has no grants") }
        }
    }
}

struct PrivacyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "privacy", abstract: "Per app: granted items, provider, access, state and grant date.")
    @OptionGroup var options: StateOptions
    @Argument(completion: Completions.apps) var app: String?
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        try report { () throws(CommandError) in
            let repository = try options.isolationStore()
            let names = try AppNames(repository)
            // Extension providers' state, queue and errors, from the daemon
            // that runs them (SPEC S41); none without one.
            let extensions = Dictionary(
                ((try? ControlClient.status(state: options.directory))?.extensions ?? []).map { ($0.provider, $0) },
                uniquingKeysWith: { first, _ in first })
            let rows = try repository.grants(app: app).map {
                GrantJSON($0, appName: names.name($0.app), providerExtension: extensions[$0.provider])
            }
            if json { return printJSON(rows) }
            print(["GRANT", "APP", "ITEM", "KIND", "ACCESS", "STATE", "GRANTED", "LIFETIME"].joined(separator: "\t"))
            let formatter = ISO8601DateFormatter()
            for row in rows {
                let item = "\(row.provider):\(row.path)".escapedForTerminal
                let granted = formatter.string(from: row.grantedAt)
                print(
                    "\(row.grant)\t\(names.label(row.app))\t\(item)\t\(row.kind)\t\(row.access)\t\(row.state)\t\(granted)\t\(row.lifetime)"
                )
            }
            FleetCommand.Processes.printWhereAppsRun(options, app: app)
            let shown = Set(rows.map(\.provider))
            for line in StatusCommand.describe(
                extensions.values.filter { shown.contains($0.provider) }.sorted {
                    $0.provider < $1.provider
                })
            {
                print(line)
            }
        }
    }
}
