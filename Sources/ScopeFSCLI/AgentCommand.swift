import ArgumentParser
import CommandErrors
import Control
import Documents
import Foundation
import Glibc
import HostText
import Launcher
import Policy
import PolicyStore

/// `scopefs agent`: answers apps' pick requests (issue 17) on the owner's
/// side. Each request is shown (or matched by a script's next step), the
/// choice is applied with the owner's rights exactly as `scopefs open`,
/// `import`, `export` and `move` apply it, and the app is told the paths it
/// got. An app never answers its own requests: the agent's requests are
/// refused on the app endpoint and from app processes (SPEC S5).
struct AgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Answer apps' pick requests: from the terminal, or from a script (tests, CI).",
        discussion: """
            Without --script, in a terminal, each request is shown with what the app asks for and the \
            terminal picker of `scopefs pick` opens, for one item or several alike (for export and move, \
            on the destination folder of the items the app named). With standard input not a terminal, \
            you type the items (PROVIDER:RELPATH, one per line for several; for export and move the \
            destination folder), or an empty line to cancel.
            A script is JSON: {"steps": [{"choose": ["local:Novel/a.txt"]}, {"cancel": true}, \
            {"waitMs": 200, "choose": ["local:Inbox"], "readOnly": true}]}; steps answer requests in order.
            """)

    @OptionGroup var options: StateOptions
    @Option(help: "Answer from this JSON script instead of the terminal.", completion: .file()) var script: String?
    @Option(help: "Stop after answering N requests (default: run until interrupted, or a script's last step).")
    var count: Int?
    @OptionGroup var coordination: CoordinationOptions
    @Flag(help: "One JSON object per request answered.") var json = false

    func run() throws {
        try report { () throws(CommandError) in
            // Only the owner may place what apps receive: an app process
            // running an agent would answer its own requests (SPEC S5).
            try OwnerCheck.require(options.directory, to: "answer pick requests")
            let steps = try script.map(AgentScript.load)
            let limit = count ?? steps?.count
            var answered = 0
            while limit.map({ answered < $0 }) ?? true {
                guard
                    let pending = try PickAgentClient.next(
                        state: options.directory, wait: 10, timeoutSeconds: 20)
                else { continue }
                let step = steps.flatMap { answered < $0.count ? $0[answered] : nil }
                let answer = decide(pending, step: step)
                let delivered = try PickAgentClient.answer(pending, with: answer, state: options.directory)
                print(
                    json
                        ? Self.json(pending, answer, delivered: delivered)
                        : Self.summary(pending, answer, delivered: delivered))
                fflush(nil)  // all streams: stdout is not concurrency-safe to name
                answered += 1
            }
        }
    }

    private func decide(_ pending: PendingPick, step: AgentScript.Step?) -> PickAnswer {
        let choice: AgentScript.Step
        if let step {
            choice = step
        } else if script != nil {
            choice = AgentScript.Step(cancel: true)  // past the script's last step
        } else if isatty(0) == 1 {
            choice = showPicker(pending)
        } else {
            choice = Self.ask(pending)
        }
        return PickApplier.answer(pending, with: choice, state: options, coordinationWait: coordination.wait)
    }

    /// The terminal picker of `scopefs pick`, for the app and mode asked,
    /// one item or several alike; for export and move the app named the
    /// items, so the picker asks only for their destination folder. What it
    /// chooses is applied below like a script's choice.
    private func showPicker(_ pending: PendingPick) -> AgentScript.Step {
        let request = pending.request
        let transfers = request.mode == .export || request.mode == .move
        print(Self.describe(pending).escapedForTerminal)
        var arguments = ["--state", options.directory.path, "--app", pending.app, "--mode", request.mode.rawValue]
        for type in request.contentTypes { arguments += ["--type", type] }
        if let start = request.directory, !transfers { arguments += ["--start", start] }
        if request.allowsMultipleSelection && !transfers { arguments.append("--multiple") }
        guard let picker = try? PickCommand.parse(arguments) else { return AgentScript.Step(cancel: true) }
        do {
            let items = transfers ? request.items : nil
            guard var selections = try picker.choose(destinationFor: items) else {
                return AgentScript.Step(cancel: true)
            }
            // export, move: one selection per item, all in the one destination.
            if transfers { selections = Array(selections.prefix(1)) }
            return AgentScript.Step(choose: selections.map { "\($0.provider):\($0.path.isEmpty ? "." : $0.path)" })
        } catch {
            FileHandle.standardError.write(Data("scopefs: \(error.message.escapedForTerminal)\n".utf8))
            return AgentScript.Step(cancel: true)
        }
    }

    private static func describe(_ pending: PendingPick) -> String {
        let request = pending.request
        let types = request.contentTypes.isEmpty ? "any type" : request.contentTypes.joined(separator: ", ")
        var text = "\(pending.app) (pid \(pending.pid)) wants to \(request.mode.rawValue)"
        if request.mode == .export || request.mode == .move {
            // Every item, so that the user sees all that will leave or be copied.
            let items = request.items.joined(separator: ", ")
            text += request.items.count == 1 ? " \(items)" : " \(request.items.count) items (\(items))"
            text += " into a provider folder"
        } else {
            text += " a document: \(types)"
        }
        if request.allowsMultipleSelection { text += "; several allowed" }
        if let directory = request.directory { text += "; starting at \(directory)" }
        return text
    }

    /// The request in the owner's terminal; the answer typed on stdin.
    private static func ask(_ pending: PendingPick) -> AgentScript.Step {
        let request = pending.request
        print(describe(pending).escapedForTerminal)  // the app wrote most of it
        print(
            request.mode == .export || request.mode == .move
                ? "destination folder (PROVIDER:DIR), empty line cancels:"
                : "item(s) as PROVIDER:RELPATH, one per line, empty line ends:")
        var chosen: [String] = []
        while let line = readLine(), !line.isEmpty {
            chosen.append(line)
            if !request.allowsMultipleSelection || request.mode == .export || request.mode == .move { break }
        }
        return AgentScript.Step(choose: chosen)
    }

    /// One line of `agent --json` per request answered.
    private static func json(_ pending: PendingPick, _ answer: PickAnswer, delivered: Bool) -> String {
        struct Answered: Encodable {
            var pick: UInt64
            var app: String
            var mode: String
            var paths: [String]
            var cancelled: Bool
            var error: String?
            var delivered: Bool
        }
        return JSONOutput.text(
            Answered(
                pick: pending.id, app: pending.app, mode: pending.request.mode.rawValue, paths: answer.paths,
                cancelled: answer.cancelled, error: answer.error, delivered: delivered), .line)
    }

    private static func summary(_ pending: PendingPick, _ answer: PickAnswer, delivered: Bool) -> String {
        // Fields escaped one by one: names must not forge a tab or a line.
        let line =
            "pick \(pending.id)\t\(pending.app.escapedForTerminal)\t\(pending.request.mode.rawValue)\t\(answer.summary.escapedForTerminal)"
        return delivered ? line : line + "\t(the app had stopped waiting)"
    }
}

/// A script's answers, in order (`scopefs agent --script FILE`).
struct AgentScript: Decodable {
    struct Step: Decodable, Equatable {
        /// PROVIDER:RELPATH items (open, import), or the destination folder (export, move).
        var choose: [String]?
        var cancel: Bool?
        /// Wait this long before answering (a user taking their time).
        var waitMs: Int?
        /// open: grant read access only.
        var readOnly: Bool?

        init(choose: [String]? = nil, cancel: Bool? = nil, readOnly: Bool? = nil, waitMs: Int? = nil) {
            self.readOnly = readOnly
            self.waitMs = waitMs
            self.choose = choose
            self.cancel = cancel
        }
    }

    var steps: [Step]

    static func load(_ path: String) throws(CommandError) -> [Step] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CommandError(.noInput, "cannot read the agent script \(path)")
        }
        let steps: [Step]
        do {
            // Items named with `\udcXX` for a byte that is not UTF-8, as
            // the control socket does (SPEC S33a).
            steps = try JSONDecoder().decode(AgentScript.self, from: Data(HostJSON.decodable(data))).steps
        } catch {
            throw CommandError(.badData, "agent script \(path) is not valid: \(error)")
        }
        try checkKeys(data, path: path)
        return steps
    }

    /// A mistyped key (`chose`) would make its step a silent cancel:
    /// refused (65), as a scenario refuses an unknown key.
    private static func checkKeys(_ data: Data, path: String) throws(CommandError) {
        let allowed = ["choose", "cancel", "waitMs", "readOnly"]
        guard let top = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return }
        if let unknown = top.keys.sorted().first(where: { $0 != "steps" }) {
            throw CommandError(.badData, "agent script \(path): unknown key '\(unknown)' (allowed: steps)")
        }
        for (index, step) in ((top["steps"] as? [[String: Any]]) ?? []).enumerated() {
            if let unknown = step.keys.sorted().first(where: { !allowed.contains($0) }) {
                throw CommandError(
                    .badData,
                    "agent script \(path): step \(index + 1): unknown key '\(unknown)' (allowed: "
                        + allowed.joined(separator: ", ") + ")")
            }
        }
    }
}

/// Applies a chosen answer with the owner's rights, as the picker's
/// commands do, and names what the app got as paths in its own view.
struct PickApplier {
    let state: StateOptions
    let app: AppID
    let readOnly: Bool
    /// export, move: how long apps' claims may hold the transfer back.
    var coordinationWait = TransferCoordination.defaultWait

    /// A script step's answer to `pending` (after the step's wait), as
    /// `scopefs agent --script` and `scopefs test`'s `answer-pick` give it.
    static func answer(
        _ pending: PendingPick, with choice: AgentScript.Step, state: StateOptions,
        coordinationWait: Double = TransferCoordination.defaultWait
    ) -> PickAnswer {
        if let wait = choice.waitMs, wait > 0 { usleep(UInt32(min(wait, 60_000)) * 1000) }
        if choice.cancel == true || (choice.choose ?? []).isEmpty { return PickAnswer(cancelled: true) }
        do {
            let applier = PickApplier(
                state: state, app: pending.app, readOnly: choice.readOnly ?? false, coordinationWait: coordinationWait)
            return try applier.apply(pending.request, choices: choice.choose ?? [])
        } catch {
            return PickAnswer(error: error.message)
        }
    }

    func apply(_ request: PickRequest, choices: [String]) throws(CommandError) -> PickAnswer {
        let picker = PickerActions(
            state: state.directory, repository: try state.storeForChange("answer pick requests"))
        let items = try choices.map { text throws(CommandError) in
            guard let item = ItemReference(argument: text) else {
                throw CommandError(.usage, "\(text): name an item as PROVIDER:RELPATH")
            }
            return item
        }
        guard request.allowsMultipleSelection || items.count <= 1 || request.mode == .export || request.mode == .move
        else {
            throw CommandError(.usage, "the app asked for one item, not \(items.count)")
        }
        if request.mode == .open || request.mode == .import {
            try requireTypes(request.contentTypes, of: items, providers: try picker.repository.providers())
        }
        var paths: [String] = []
        var changed: [String] = []
        switch request.mode {
        case .open:
            for item in items {
                let opened = try picker.open(
                    app: app, provider: item.provider, path: item.path, access: readOnly ? .read : .readWrite)
                changed += opened.reference.map { [$0] } ?? []
                paths.append(Self.providerPath(item.provider, item.path))
            }
        case .import:
            for item in items {
                let copy = try picker.importItem(
                    app: app, provider: item.provider, path: item.path, copy: AtomicCopy(replace: false))
                changed.append(copy)
                paths.append(MountLayout.containerPath(copy))
            }
        case .export, .move:
            guard let folder = items.first, items.count == 1 else {
                throw CommandError(.usage, "\(request.mode.rawValue): choose one destination folder")
            }
            return transfer(request, to: folder, picker: picker)
        }
        try ControlClient.notifyChange(state: state.directory, app: app, containerPaths: changed)
        return PickAnswer(paths: paths)
    }

    /// Export, move: every container item the app named into `folder`, in
    /// order. If one fails, the app hears which, and gets the paths of
    /// those placed before it (ContainerTransfers says what happens).
    private func transfer(_ request: PickRequest, to folder: ItemReference, picker: PickerActions) -> PickAnswer {
        let transfers = ContainerTransfers(
            picker: picker, app: app, provider: folder.provider, folder: folder.path, replace: false,
            coordination: TransferCoordination(state: state.directory, wait: coordinationWait))
        var paths: [String] = []
        var changed: [String] = []
        var failure: String?
        do {
            try transfers.run(request.mode == .export ? .export : .move, request.items) { placed throws(CommandError) in
                paths.append(Self.providerPath(folder.provider, placed.path))
                if let opened = placed.opened {
                    changed += [placed.containerPath] + (opened.reference.map { [$0] } ?? [])
                }
            }
        } catch {
            failure = error.message
        }
        // What was placed is announced even when a later item failed.
        do {
            try ControlClient.notifyChange(state: state.directory, app: app, containerPaths: changed)
        } catch {
            failure = failure ?? error.message
        }
        return PickAnswer(paths: paths, error: failure)
    }

    /// Each chosen item is of a type the app asked for (shared-mime-info).
    private func requireTypes(_ types: [String], of items: [ItemReference], providers: [Provider]) throws(CommandError)
    {
        let database = ContentTypes()
        for item in items {
            guard let provider = providers.first(where: { $0.id == item.provider }) else {
                throw CommandError.unknownProvider(item.provider)
            }
            var info = stat()
            let found = (provider.directory + "/" + item.path).withHostCString { stat($0, &info) } == 0
            let isDirectory = found && info.st_mode & S_IFMT == S_IFDIR
            let name = RelativePath.lastComponent(of: item.path)
            guard database.matches(name: name, isDirectory: isDirectory, types: types) else {
                let kind = isDirectory ? ContentTypes.folder : database.mimeType(ofName: name)
                throw CommandError(
                    .refused,
                    "\(item.provider):\(item.path) is \(kind), not one of the types the app asked for (\(types.joined(separator: ", ")))"
                )
            }
        }
    }

    private static func providerPath(_ provider: ProviderID, _ path: String) -> String {
        let normalized = RelativePath.normalize(path) ?? path
        return MountLayout.providerPath(provider: provider, path: normalized)
    }
}
