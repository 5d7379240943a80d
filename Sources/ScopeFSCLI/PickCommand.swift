import ArgumentParser
import CommandErrors
import Documents
import Foundation
import HostText
import Policy
import PolicyStore

extension PickerMode: ExpressibleByArgument {}

/// `scopefs pick`: the document picker in a terminal (SPEC S21). The
/// terminal code is in Picker/Terminal.swift; the listing, the rendering
/// and the key handling in Picker/ are pure.
struct PickCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pick",
        abstract: "Choose a file or folder in a terminal picker, then open, import, export or move it.",
        discussion: """
            Keys: Up/Down or k/j move, PgUp/PgDn/Home/End jump; Enter or Right opens a folder; \
            Left or Backspace goes up; Space or s selects the highlighted file or folder, Enter \
            selects a file, . selects the folder shown; y confirms; Esc, q or Ctrl-C cancels.
            With --multiple: Space, s or . toggle items (kept while you browse), and Enter \
            on a file, or c, confirms them all; export and move then ask for one destination folder for them all.
            export and move first choose an item of the app's container, then a destination folder.
            Exit status: 0 done, 1 cancelled by the user, 64 standard input is not a terminal, \
            others as for scopefs open/import/export/move (docs/CLI.md).
            With --request, from inside an app: ask the owner's agent (`scopefs agent`) to pick for this app, \
            and print the paths received, one per line (exit 1 cancelled, 69 no agent, 75 no answer in time).
            """)

    /// The exit status when the user cancels.
    static let cancelled: Int32 = 1

    @OptionGroup var options: StateOptions
    @Option(name: .customLong("app"), help: "The app the item is chosen for.", completion: Completions.apps)
    var appOption: String?
    var app: String { appOption ?? "" }
    @Option(
        help: "open (grant and reference), import (copy into the inbox), export (copy out of the container) or move.")
    var mode: PickerMode = .open
    @Flag(help: "open: grant read access only.") var readOnly = false
    @Flag(help: "export, move: replace an existing destination.") var force = false
    @OptionGroup var asking: PickRequestOptions
    @OptionGroup var coordination: CoordinationOptions
    @Flag(help: "Print what was done as JSON, as open/import/export/move --json do (one object per item).")
    var json = false

    func validate() throws {
        if asking.request {
            if appOption != nil { throw ValidationError("--request picks for the app it runs in: drop --app") }
            if json {
                throw ValidationError("--json applies to the owner's picker; --request prints one path per line")
            }
            return try asking.validate(mode: mode)
        }
        if appOption == nil { throw ValidationError("missing --app: the app the item is chosen for") }
        if readOnly && mode != .open { throw ValidationError("--read-only applies to --mode open only") }
        if force && !mode.startsInContainer { throw ValidationError("--force applies to --mode export and move only") }
    }

    func run() throws {
        if asking.request { return try asking.send(mode: mode, state: options.directory) }
        var chosen: [PickerSelection]?
        try report { () throws(CommandError) in chosen = try choose() }
        guard let chosen else {
            FileHandle.standardError.write(Data("scopefs: cancelled\n".utf8))
            throw ExitCode(Self.cancelled)
        }
        try report { () throws(CommandError) in
            if mode.startsInContainer {
                // One destination for all: checked together, then placed in
                // order (docs/DECISIONS.md, decision 39).
                try transfer(chosen)
            } else {
                for selection in chosen { try perform(selection) }
            }
        }
    }

    /// Runs the picker; nil when the user cancels. Several selections only
    /// with `--multiple`. `destinationFor`: export and move of container
    /// items an app named (`scopefs agent`): only their destination is chosen.
    func choose(destinationFor items: [String]? = nil) throws(CommandError) -> [PickerSelection]? {
        guard Terminal.isTerminal(0) else {
            throw CommandError(
                .usage,
                "pick is interactive: standard input must be a terminal "
                    + "(in scripts, use scopefs open, import, export or move)")
        }
        guard Terminal.Capabilities.current.canMoveCursor else {
            throw CommandError(
                .usage,
                "pick draws a full screen, which TERM=dumb cannot show "
                    + "(set TERM to your terminal's type, or use scopefs open, import, export or move)")
        }
        let repository = try options.storeForChange("use the document picker")
        guard try repository.apps().contains(where: { $0.id == app }) else { throw CommandError.unknownApp(app) }
        let providers = try repository.providers()
        guard !providers.isEmpty else {
            throw CommandError(
                .noInput, "there are no providers to pick from; add one with `scopefs provider add ID DIR`")
        }
        let container = options.directory.containerPath(of: app)
        if mode.startsInContainer && !FileManager.default.fileExists(atPath: container) {
            throw CommandError(.noInput, "\(app) has no container at \(container)")
        }

        // Marks for what the app already has, and the types asked for (--type).
        let granted = try repository.grants(app: app)
        let types = ContentTypes()
        let list: PickerController.Lister = { place throws(CommandError) in
            switch place {
            case .providers:
                return PickerListing.entries(ofProviders: providers)
            case .provider(let id, let path):
                guard let provider = providers.first(where: { $0.id == id }) else {
                    throw CommandError.unknownProvider(id)
                }
                let entries = try PickerListing.entries(
                    ofFolder: path.isEmpty ? provider.directory : provider.directory + "/" + path)
                return entries.map { entry in
                    var entry = entry
                    let item = RelativePath.join(path, entry.name)
                    entry.granted = granted.contains { $0.provider == id && $0.relativePath.sameHostName(as: item) }
                    entry.dimmed =
                        !entry.isFolder && !types.matches(name: entry.name, isDirectory: false, types: asking.types)
                    return entry
                }
            case .container(let path):
                return try PickerListing.entries(ofFolder: path.isEmpty ? container : container + "/" + path)
            }
        }
        let start = asking.start.flatMap(ItemReference.init(argument:)).map {
            PickerPlace.provider($0.provider, RelativePath.normalize($0.path) ?? "")
        }
        var picker = PickerController(
            mode: mode, app: app, readOnly: readOnly, typesAskedFor: asking.types, start: start,
            allowsMultiple: asking.multiple, list: list)
        if let items, mode.startsInContainer { picker.chooseDestination(for: items, fixed: true) }

        let terminal = try Terminal()
        defer { terminal.restore() }
        while true {
            let (width, height) = terminal.size()
            picker.layout(rows: PickerView.listRows(height: height))
            terminal.draw(PickerView.render(picker, width: width, height: height))
            let key = terminal.readKey()
            switch key {
            case .resize, .redraw:
                terminal.clear()
                continue
            case .endOfInput:
                return nil
            default:
                break
            }
            switch picker.handle(key) {
            case .proceed: continue
            case .cancel: return nil
            case .done(let selections): return selections
            }
        }
    }

    /// Does what was chosen, and prints what the matching command prints.
    private func perform(_ chosen: PickerSelection) throws(CommandError) {
        let actions = DocumentActions(state: options, app: app, coordinationWait: coordination.wait, json: json)
        switch mode {
        case .open:
            // Choosing a provider's root on screen is explicit enough.
            try actions.open(provider: chosen.provider, path: chosen.path, readOnly: readOnly, wholeProvider: true)
        case .import:
            try actions.importItem(provider: chosen.provider, path: chosen.path)
        case .export, .move:
            try transfer([chosen])
        }
    }

    /// export, move: the container items chosen, into their one destination.
    private func transfer(_ chosen: [PickerSelection]) throws(CommandError) {
        guard let destination = chosen.first else { return }
        let actions = DocumentActions(state: options, app: app, coordinationWait: coordination.wait, json: json)
        let items = chosen.map { $0.containerPath ?? "" }
        if mode == .export {
            try actions.export(
                containerPaths: items, provider: destination.provider, folder: destination.path, force: force)
        } else {
            try actions.move(
                containerPaths: items, provider: destination.provider, folder: destination.path, force: force)
        }
    }
}
