import CommandErrors
import Policy
import PolicyStore

/// What the user chose in `scopefs pick`.
struct PickerSelection: Equatable, Sendable {
    /// open and import: the chosen item; export and move: the destination
    /// folder. "" is the provider's root folder.
    var provider: ProviderID
    var path: String
    var isFolder: Bool
    /// export and move: the chosen item of the app's container.
    var containerPath: String?
}

/// The picker's state and its key handling: no terminal, no file system
/// (listings come from `list`), so it can be driven by a test.
struct PickerController {
    enum Stage: Equatable, Sendable {
        /// open, import: a provider item; export, move: a container item.
        case source
        /// export, move: the destination folder in a provider.
        case destination
    }

    enum Outcome: Equatable, Sendable {
        case proceed
        case cancel
        /// One selection, or several with `--multiple` (open, import).
        case done([PickerSelection])
    }

    struct Confirmation: Equatable, Sendable {
        var question: String
        var selections: [PickerSelection]
    }

    typealias Lister = (PickerPlace) throws(CommandError) -> [PickerEntry]

    let mode: PickerMode
    let app: AppID
    let readOnly: Bool
    /// `--multiple`: Space toggles items into `selected` (open, import) or
    /// `selectedContainerItems` (export, move), Enter confirms them all.
    let allowsMultiple: Bool
    private let list: Lister

    private(set) var stage: Stage = .source
    private(set) var place: PickerPlace
    private(set) var entries: [PickerEntry] = []
    /// The highlighted row (0 when the list is empty).
    private(set) var cursor = 0
    /// The first row shown; kept so that the cursor stays visible.
    private(set) var top = 0
    /// Rows the list had at the last layout: the page size.
    private(set) var pageSize = 10
    /// A line for the user: an error, or what to do next.
    private(set) var message: String?
    /// Set while the picker waits for y/N.
    private(set) var confirmation: Confirmation?
    /// export, move: the container items chosen in the first stage (one,
    /// or several with `--multiple`), placed in one destination folder.
    private(set) var containerChoices: [String] = []
    /// export, move for an app's request (`scopefs agent`): the app named
    /// the items, so the picker starts at the destination and never goes
    /// back to choosing others.
    private(set) var itemsFixed = false
    /// `--multiple`: the items toggled on so far, in the order chosen; kept
    /// while the user browses other folders.
    /// (Set by the key handling of PickerController+Multiple.swift.)
    var selected: [PickerSelection] = []
    /// `--multiple` with export or move: the container items toggled on.
    var selectedContainerItems: [String] = []

    /// What the picker was asked for (`--type`), for the message when a
    /// dimmed file is chosen.
    let typesAskedFor: [String]

    init(
        mode: PickerMode, app: AppID, readOnly: Bool, typesAskedFor: [String] = [], start: PickerPlace? = nil,
        allowsMultiple: Bool = false, list: @escaping Lister
    ) {
        self.mode = mode
        self.app = app
        self.readOnly = readOnly
        self.allowsMultiple = allowsMultiple
        self.typesAskedFor = typesAskedFor
        self.list = list
        self.place = mode.startsInContainer ? .container("") : .providers
        if let start, !mode.startsInContainer {
            place = start
            if reload(highlighting: nil) { return }
            place = .providers  // a start folder that cannot be listed: the list of providers
        }
        reload(highlighting: nil)
    }

    var highlighted: PickerEntry? { entries.indices.contains(cursor) ? entries[cursor] : nil }

    /// Keeps the cursor within the `rows` visible rows of the list.
    mutating func layout(rows: Int) {
        pageSize = max(rows, 1)
        if cursor < top { top = cursor }
        if cursor >= top + pageSize { top = cursor - pageSize + 1 }
        top = max(0, min(top, max(entries.count - pageSize, 0)))
    }

    mutating func handle(_ key: Key) -> Outcome {
        if key == .interrupt { return .cancel }
        if let pending = confirmation {
            confirmation = nil
            if key == .character("y") || key == .character("Y") { return .done(pending.selections) }
            message = "Not confirmed: choose again, or press Esc to cancel."
            return .proceed
        }
        if allowsMultiple, stage == .source, handleMultiple(key) { return .proceed }
        switch key {
        case .escape, .character("q"): return .cancel
        case .up, .character("k"): move(to: cursor - 1)
        case .down, .character("j"): move(to: cursor + 1)
        case .pageUp: move(to: cursor - pageSize)
        case .pageDown: move(to: cursor + pageSize)
        case .home, .character("g"): move(to: 0)
        case .end, .character("G"): move(to: entries.count - 1)
        case .right, .character("l"):
            if let entry = highlighted, entry.isFolder { enter(entry) }
        case .enter:
            guard let entry = highlighted else {
                chooseCurrentFolder()
                break
            }
            if entry.isFolder { enter(entry) } else { choose(entry) }
        case .left, .backspace, .character("h"): goUp()
        case .space, .character("s"):
            if let entry = highlighted { choose(entry) } else { chooseCurrentFolder() }
        case .character("."): chooseCurrentFolder()
        default: break
        }
        return .proceed
    }

    // MARK: Titles and lines for the view

    var title: String {
        let access = readOnly ? " (read-only)" : ""
        switch (mode, stage) {
        case (.open, _): return "Open\(access): choose a file or folder for \(app)"
        case (.import, _): return "Import: choose a file to copy into the inbox of \(app)"
        case (.export, .source), (.move, .source):
            let verb = mode == .export ? "Export" : "Move"
            return "\(verb): choose \(allowsMultiple ? "items" : "an item") of the container of \(app)"
        case (.export, .destination), (.move, .destination):
            let verb = mode == .export ? "Export" : "Move"
            return "\(verb) \(Self.containerItemsName(containerChoices)): choose a destination folder"
        }
    }

    var location: String {
        switch place {
        case .providers: return MountLayout.providers
        case .provider(let provider, let path): return "\(provider):\(path)"
        case .container(let path): return MountLayout.container + "/" + path
        }
    }

    var help: String {
        let choose: String
        switch (mode, stage) {
        case (_, .source) where allowsMultiple:
            choose = "Space/s toggle  Enter/c confirm"
        case (.import, _): choose = "Space/s/Enter select file"
        case (_, .destination): choose = "Space/s or . select folder"
        default: choose = "Space/s select"
        }
        return "↑↓/jk move  →/Enter open  ←/Bksp up  \(choose)  Esc/q cancel"
    }

    /// Whether the folder shown can be chosen (open, and destinations).
    var canChooseFolder: Bool {
        switch place {
        case .providers: return false
        case .provider: return mode == .open || stage == .destination
        case .container(let path): return !path.isEmpty
        }
    }

    // MARK: Navigation

    private mutating func move(to row: Int) {
        guard !entries.isEmpty else { return }
        cursor = max(0, min(row, entries.count - 1))
        message = nil
    }

    private mutating func enter(_ entry: PickerEntry) {
        guard let child = place.child(entry) else { return }
        go(to: child, highlighting: nil)
    }

    private mutating func goUp() {
        if let parent = place.parent {
            go(to: parent, highlighting: place.name)
        } else if stage == .destination, !itemsFixed, let chosen = containerChoices.first {
            // Back to the first stage, on the item chosen there; with
            // several, they stay selected.
            stage = .source
            if allowsMultiple { selectedContainerItems = containerChoices }
            containerChoices = []
            go(
                to: .container(RelativePath.parent(of: chosen) ?? ""),
                highlighting: RelativePath.lastComponent(of: chosen))
        }
    }

    /// Moves to `target` if it can be listed; else stays and says why.
    private mutating func go(to target: PickerPlace, highlighting name: String?) {
        let previous = place
        place = target
        if !reload(highlighting: name) { place = previous }
    }

    @discardableResult
    private mutating func reload(highlighting name: String?) -> Bool {
        do throws(CommandError) {
            entries = try list(place)
        } catch {
            message = error.message
            return false
        }
        cursor = name.flatMap { name in entries.firstIndex { $0.name == name } } ?? 0
        top = 0
        message = nil
        layout(rows: pageSize)
        return true
    }

    // MARK: Choosing

    /// A chosen item: a provider item or a container item.
    private enum Item {
        case provider(ProviderID, String, isFolder: Bool)
        case container(String, isFolder: Bool)
    }

    private func item(for entry: PickerEntry) -> Item {
        switch place {
        case .providers: return .provider(entry.name, "", isFolder: true)
        case .provider(let provider, let path):
            return .provider(provider, RelativePath.join(path, entry.name), isFolder: entry.isFolder)
        case .container(let path): return .container(RelativePath.join(path, entry.name), isFolder: entry.isFolder)
        }
    }

    /// A highlighted row: a file of a type not asked for is refused here.
    private mutating func choose(_ entry: PickerEntry) {
        guard !entry.dimmed else {
            message = "\(entry.name) is not of a type asked for (\(typesAskedFor.joined(separator: ", ")))."
            return
        }
        choose(item(for: entry))
    }

    private mutating func chooseCurrentFolder() {
        switch place {
        case .providers: message = "Choose a provider, or open one."
        case .provider(let provider, let path): choose(.provider(provider, path, isFolder: true))
        case .container(let path):
            if path.isEmpty {
                message = "Choose an item of the container."
            } else {
                choose(.container(path, isFolder: true))
            }
        }
    }

    private mutating func choose(_ item: Item) {
        switch (stage, item) {
        case (.source, .provider(let provider, let path, let isFolder)):
            if mode == .import && isFolder {
                message = "Import copies a file: choose a file."
                return
            }
            let verb = mode == .import ? "Import" : "Open"
            let access = mode == .open && readOnly ? " read-only" : ""
            confirmation = Confirmation(
                question: "\(verb) \(Self.displayName(provider, path))\(access) for \(app)? [y/N]",
                selections: [PickerSelection(provider: provider, path: path, isFolder: isFolder)])
        case (.source, .container(let path, _)):
            chooseDestination(for: [path])
        case (.destination, .provider(let provider, let path, let isFolder)):
            guard isFolder, !containerChoices.isEmpty else {
                message = "Choose a destination folder, not a file."
                return
            }
            let verb = mode == .export ? "Export" : "Move"
            confirmation = Confirmation(
                question: "\(verb) \(Self.containerItemsName(containerChoices)) to \(provider):\(path)? [y/N]",
                selections: containerChoices.map {
                    PickerSelection(provider: provider, path: path, isFolder: true, containerPath: $0)
                })
        case (.destination, .container):
            break  // not reachable: the destination stage browses providers
        }
        if confirmation != nil { message = nil }
    }

    /// export, move: the second stage, a destination folder for `items`;
    /// `fixed` when the app named them (the user may not choose others).
    mutating func chooseDestination(for items: [String], fixed: Bool = false) {
        itemsFixed = itemsFixed || fixed
        containerChoices = items
        stage = .destination
        go(to: .providers, highlighting: nil)
        message = "Now choose the destination folder for \(Self.containerItemsName(items))."
    }

    /// "notes.txt", or "3 items (a, b, c)".
    static func containerItemsName(_ items: [String]) -> String {
        let names = items.map { RelativePath.lastComponent(of: $0) }.joined(separator: ", ")
        return items.count == 1 ? names : "\(items.count) items (\(names))"
    }

    /// For the key handling in other files: a line for the user, and a
    /// question whose yes chooses `selections`.
    mutating func setMessage(_ text: String) { message = text }

    mutating func ask(_ question: String, _ selections: [PickerSelection]) {
        confirmation = Confirmation(question: question, selections: selections)
        message = nil
    }

    /// "chapter1.txt" for a provider item, the provider's ID for its root.
    static func displayName(_ provider: ProviderID, _ path: String) -> String {
        path.isEmpty ? provider : RelativePath.lastComponent(of: path)
    }
}
