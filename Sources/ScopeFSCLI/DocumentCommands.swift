import ArgumentParser
import CommandErrors
import Control
import Documents
import FleetStore
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore

/// The picker's operations as the commands and `scopefs pick` perform them
/// (SPEC S17–S21): the library call, telling a running daemon (the new grant
/// and the container's changed entries are in force when this returns,
/// S13), and what the command prints: a line, or with `json` the created
/// or changed objects (docs/CLI.md, "JSON output").
struct DocumentActions {
    let state: StateOptions
    let app: String
    /// export, move: how long apps' claims may hold the transfer back.
    var coordinationWait = TransferCoordination.defaultWait
    var json = false

    private func picker() throws(CommandError) -> PickerActions {
        PickerActions(state: state.directory, repository: try state.storeForChange("use the document picker"))
    }

    private func changed(_ containerPaths: [String?]) throws(CommandError) {
        try ControlClient.notifyChange(
            state: state.directory, app: app, containerPaths: containerPaths.compactMap { $0 })
    }

    func open(provider: String, path: String, readOnly: Bool, session: Bool = false, wholeProvider: Bool)
        throws(CommandError)
    {
        let picker = try picker()  // an app process is refused first (77)
        let opened = try picker.open(
            app: app, provider: provider, path: path, access: readOnly ? .read : .readWrite, session: session,
            wholeProvider: wholeProvider)
        try changed([opened.reference])
        try report(opened, repository: picker.repository)
    }

    /// What `open` and `move` print with `--json`: the grant as `privacy
    /// --json` shows it, and the reference document in the container.
    struct OpenedJSON: Encodable {
        var grant: GrantJSON?
        var reference: String?
        var reusedGrant: Bool
        var reusedReference: Bool
        var changes: [String]
    }

    /// The line every picker operation that grants prints, and on stderr
    /// what it reused or changed (one grant and reference per item, SPEC S17).
    private func report(_ opened: PickerActions.Opened, repository: any IsolationStore) throws(CommandError) {
        if opened.reusedReference, let reference = opened.reference {
            note(
                "grant \(opened.grant): reused; the app already has it, with its reference \(MountLayout.containerPath(reference))"
            )
        } else if opened.reusedGrant {
            note("grant \(opened.grant): reused; the app already has it")
        }
        for change in opened.changes { note("grant \(opened.grant): \(change)") }
        if json {
            let grant = try repository.grants(app: app).first { $0.id == opened.grant }
            let appName = try AppNames(repository).name(app)
            return printJSON(
                OpenedJSON(
                    grant: grant.map { GrantJSON($0, appName: appName) },
                    reference: opened.reference.map(MountLayout.containerPath),
                    reusedGrant: opened.reusedGrant, reusedReference: opened.reusedReference, changes: opened.changes))
        }
        print(
            "grant \(opened.grant)"
                + (opened.reference.map { "\treference " + MountLayout.containerPath($0.escapedForTerminal) } ?? ""))
    }

    func importItem(provider: String, path: String) throws(CommandError) {
        let copy = try picker().importItem(app: app, provider: provider, path: path, copy: Progress.copy())
        try ControlClient.notifyChange(state: state.directory, app: app, containerPaths: [copy], imported: [copy])
        if json {
            struct Imported: Encodable {
                var app: String
                var copy: String
                var provider: String
                var path: String
            }
            return printJSON(Imported(app: app, copy: MountLayout.containerPath(copy), provider: provider, path: path))
        }
        print(MountLayout.containerPath(copy.escapedForTerminal))
    }

    private func transfers(_ documents: PickerActions, provider: String, folder: String, force: Bool)
        -> ContainerTransfers
    {
        var transfers = ContainerTransfers(
            picker: documents, app: app, provider: provider, folder: folder, replace: force,
            coordination: TransferCoordination(state: state.directory, wait: coordinationWait))
        transfers.copier = { Progress.copy(replace: $0) }
        return transfers
    }

    /// Export (SPEC S19) of one or several container items into one
    /// folder; a line (or a JSON object) per item as it is placed.
    func export(containerPaths: [String], provider: String, folder: String, force: Bool) throws(CommandError) {
        let documents = try picker()
        try transfers(documents, provider: provider, folder: folder, force: force).run(.export, containerPaths) {
            placed throws(CommandError) in
            if json {
                struct Exported: Encodable {
                    var app: String
                    var source: String
                    var provider: String
                    var path: String
                }
                return printJSON(
                    Exported(
                        app: app, source: MountLayout.containerPath(placed.containerPath), provider: provider,
                        path: placed.path))
            }
            print("\(provider):\(placed.path)".escapedForTerminal)
        }
    }

    /// Move (SPEC S20) of one or several container items into one folder:
    /// each leaves the container, and the app gets a grant and a reference.
    func move(containerPaths: [String], provider: String, folder: String, force: Bool) throws(CommandError) {
        let documents = try picker()
        try transfers(documents, provider: provider, folder: folder, force: force).run(.move, containerPaths) {
            placed throws(CommandError) in
            guard let opened = placed.opened else { return }
            try changed([placed.containerPath, opened.reference])
            try report(opened, repository: documents.repository)
        }
    }
}

struct OpenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Open a file or folder for an app: a grant, plus a reference document for a file.")
    @OptionGroup var options: StateOptions
    @Argument(completion: Completions.apps) var app: String
    @Argument(
        help: ArgumentHelp("The item, as PROVIDER:RELPATH.", valueName: "provider:relpath"),
        completion: Completions.items) var item: ItemReference
    @Flag(help: "Grant read access only (an existing read-write grant stays read-write).") var readOnly = false
    @OptionGroup var lifetime: GrantLifetime
    @Flag(help: "Print the grant and the reference as JSON.") var json = false

    func run() throws {
        try report { () throws(CommandError) in
            try DocumentActions(state: options, app: app, json: json).open(
                provider: item.provider, path: item.path, readOnly: readOnly, session: lifetime.session,
                wholeProvider: lifetime.wholeProvider)
        }
    }
}

struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Copy a provider file into the app's Container/tmp/<APP>-Inbox/.")
    @OptionGroup var options: StateOptions
    @Argument(completion: Completions.apps) var app: String
    @Argument(
        help: ArgumentHelp("The item, as PROVIDER:RELPATH.", valueName: "provider:relpath"),
        completion: Completions.items) var item: ItemReference
    @Flag(help: "Print the copy as JSON.") var json = false

    func run() throws {
        try report { () throws(CommandError) in
            try DocumentActions(state: options, app: app, json: json).importItem(
                provider: item.provider, path: item.path)
        }
    }
}

/// What export and move take: one or several items of the app's
/// container, then the provider folder to put them in (the last argument).
struct ContainerTransfer: ParsableArguments {
    @OptionGroup var options: StateOptions
    @Argument(completion: Completions.apps) var app: String
    @Argument(
        help: ArgumentHelp(
            "Paths inside the app's container (e.g. Documents/report.pdf), then the destination folder as PROVIDER:DIR.",
            valueName: "container-path... provider:dir"),
        completion: Completions.items) var paths: [String] = []
    @Flag(help: "Replace an existing destination.") var force = false
    @OptionGroup var coordination: CoordinationOptions
    @Flag(help: "Print the result as JSON.") var json = false

    var containerPaths: [String] { Array(paths.dropLast()) }
    /// Checked by `validate`.
    var destination: ItemReference { ItemReference(argument: paths.last ?? "")! }

    func validate() throws {
        guard paths.count >= 2 else {
            throw ValidationError("name at least one container path, then the destination folder as PROVIDER:DIR")
        }
        guard ItemReference(argument: paths[paths.count - 1]) != nil else {
            throw ValidationError("the last argument, \(paths[paths.count - 1]), is not a folder as PROVIDER:DIR")
        }
    }

    var actions: DocumentActions {
        DocumentActions(state: options, app: app, coordinationWait: coordination.wait, json: json)
    }
}

struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract:
            "Copy items of the app's container into a provider folder; the app gets no access to the copies."
    )
    @OptionGroup var transfer: ContainerTransfer

    func run() throws {
        try report { () throws(CommandError) in
            try transfer.actions.export(
                containerPaths: transfer.containerPaths, provider: transfer.destination.provider,
                folder: transfer.destination.path, force: transfer.force)
        }
    }
}

struct MoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "move",
        abstract:
            "Move items out of the app's container into a provider folder; the app keeps access through a grant and a reference."
    )
    @OptionGroup var transfer: ContainerTransfer

    func run() throws {
        try report { () throws(CommandError) in
            try transfer.actions.move(
                containerPaths: transfer.containerPaths, provider: transfer.destination.provider,
                folder: transfer.destination.path, force: transfer.force)
        }
    }
}

/// A progress bar on stderr for copies of large files, when it is a terminal.
enum Progress {
    static func copy(replace: Bool = false) -> AtomicCopy {
        guard isatty(2) == 1 else { return AtomicCopy(replace: replace) }
        var last = -1
        return AtomicCopy(replace: replace) { done, total in
            guard total >= 16 << 20 else { return }
            let percent = Int(done * 100 / max(total, 1))
            guard percent != last else { return }
            last = percent
            let width = 40
            let filled = width * percent / 100
            let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
            FileHandle.standardError.write(Data("\r[\(bar)] \(percent)% of \(total >> 20) MiB".utf8))
            if done >= total { FileHandle.standardError.write(Data("\n".utf8)) }
        }
    }
}

extension DocumentQuery.SearchScope: ExpressibleByArgument {}

struct QueryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query", abstract: "An app's documents, as NSMetadataQuery lists them.")
    @OptionGroup var options: StateOptions
    @Option(help: "The app.", completion: Completions.apps) var app: String
    @Option(help: "documents (its own), external (its references), or all.") var scope: DocumentQuery.SearchScope = .all
    @Option(help: "Only names matching this glob.") var name: String?
    @Flag(help: "Print JSON.") var json = false
    @Flag(help: "Keep listing: the initial result, then additions, removals and changes (a live query).")
    var follow = false

    func run() throws {
        try report { () throws(CommandError) in
            // The isolation layer's items; moved ones found again on the SQLite file alone.
            let store = try options.isolationStore()
            let query = DocumentQuery(
                state: options.directory, repository: store,
                locator: try options.backend().locator(over: store as? PolicyRepository))
            let mount = DaemonInfo.read(from: options.directory)?.mountpoint
            if follow {
                try QueryFollower(query: query, app: app, scope: scope, name: name, mount: mount, json: json).run()
            }
            let results = try query.run(app: app, scope: scope, nameGlob: name, mount: mount)
            if json { return printJSON(results) }
            for result in results {
                let kind = result.isExternalDocument ? "external" : "local"
                print(
                    [
                        result.urlInLocalContainer.escapedForTerminal, "->", result.url.escapedForTerminal, kind,
                        result.containerDisplayName.escapedForTerminal,
                    ].joined(separator: "\t"))
            }
        }
    }
}

struct BookmarkCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bookmark", abstract: "Bookmarks from the shell, inside `scopefs run`.",
        subcommands: [Create.self, Resolve.self])

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create", abstract: "Print a bookmark for PATH (this process must be an app process).")
        @Argument var path: String
        @Flag(help: "A read-only bookmark.") var readOnly = false
        @Flag(help: "Print the bookmark as JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let bookmark = try ControlAttributes.read(path, readOnly ? .readOnlyBookmark : .bookmark)
                if json {
                    struct Created: Encodable {
                        var bookmark: String
                        var path: String
                        var access: String
                    }
                    return printJSON(
                        Created(
                            bookmark: bookmark, path: path,
                            access: readOnly ? Access.read.rawValue : Access.readWrite.rawValue))
                }
                print(bookmark)
            }
        }
    }

    struct Resolve: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "resolve", abstract: "Resolve a bookmark: its current path and whether it is stale.")
        @OptionGroup var options: StateOptions
        @Argument(help: "The bookmark, or - to read it from standard input.") var bookmark: String
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            try report { () throws(CommandError) in
                let token = bookmark == "-" ? (readLine() ?? "") : bookmark
                let response = try ControlClient.send(
                    .resolve(bookmark: token), state: options.directory)
                guard response.ok, let resolution = response.resolution, let path = response.path else {
                    throw CommandError(
                        CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                        response.message ?? "cannot resolve")
                }
                if json {
                    struct Output: Encodable {
                        var path: String
                        var pathInApp: String
                        var isStale: Bool
                        var access: String
                    }
                    return printJSON(
                        Output(
                            path: path, pathInApp: resolution.pathInApp, isStale: resolution.isStale,
                            access: resolution.access.rawValue))
                }
                print("\(path.escapedForTerminal)\tisStale=\(resolution.isStale)")
            }
        }
    }
}
