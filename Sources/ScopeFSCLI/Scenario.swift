import CommandErrors
import Foundation
import Policy
import PolicyStore
import Yams

/// A test scenario for `scopefs test` (issue 18): what to do to an app
/// while it runs, and what must hold afterwards. Read from YAML or JSON
/// (JSON is YAML too, so one parser gives both their line numbers).
struct Scenario {
    struct Step {
        enum Trigger: Equatable {
            /// Seconds after the app started.
            case at(Double)
            /// Once the app's standard output contains the text.
            case prints(String)
            /// Once the daemon served `count` requests of `operation` on
            /// paths matching `glob` (in the app's view) to the app.
            case after(count: Int, operation: String, glob: String)
            /// Once the app started a security scope on the grant (an item,
            /// `PROVIDER:RELPATH`) `count` times, as the daemon's start
            /// events record it (SPEC S29).
            case starts(count: Int, grant: String)
        }

        enum Action: Equatable {
            /// Grants by item, `PROVIDER:RELPATH` as `scopefs grant` takes it.
            case revoke(String)
            case restore(String)
            /// Removes the grant for good, as `scopefs forget` does.
            case forget(String)
            /// Answers the app's next pick request as `scopefs agent
            /// --script` would: the items chosen, or a cancel.
            case answerPick(AgentScript.Step)
            /// On the host, behind the mount's back.
            case rename(from: String, to: String)
            case delete(String)
            /// Deletes the item and makes a new file of the same content
            /// under its name: a new file identity (bookmarks go stale).
            case recreate(String)
            case write(path: String, content: String)
            /// `OP:ERRNO[:P%]` or, for latency, `OP:MSms[:P%]`.
            case fault(FaultRule)
            case signal(Int32, String)
            /// Revokes as other systems do (issue 48, `ScenarioRemote.swift`):
            /// ending every process of the app, as Android's `pm revoke`
            /// does, and relaunching it; losing what was not fsynced.
            case revokeAs(String, RevokeMode)
            /// Cloud storage misbehaving on cue (`ScenarioRemote.swift`).
            case remote(RemoteAction)
            /// What the app wrote and did not fsync is lost, as at a crash.
            case loseUnsynced
        }

        var trigger: Trigger
        var action: Action
        var line: Int
    }

    struct Denials: Equatable {
        var atLeast: Int?
        var atMost: Int?
        var operation: String?
    }

    /// A `prints` or `not_prints` text and the streams it is looked for
    /// in: both by default (a traceback is on standard error), or one
    /// (`{stdout: TEXT}`, `{stderr: TEXT}`).
    struct OutputCheck: Equatable, ExpressibleByStringLiteral {
        enum Stream: String, Equatable { case both, stdout, stderr }
        var text: String
        var stream: Stream = .both

        init(text: String, stream: Stream = .both) {
            self.text = text
            self.stream = stream
        }

        init(stringLiteral text: String) { self.init(text: text) }
    }

    struct Expectations {
        var exit: Int32?
        var noLeakedScope = false
        var noUnbalancedStop = false
        var denials: Denials?
        var prints: [OutputCheck] = []
        var notPrints: [OutputCheck] = []
        var files: [(path: String, content: String)] = []
        var within: Double?
        /// The app resolved a bookmark whose item had moved or been
        /// replaced (SPEC S26: `isStale`).
        var staleBookmarkResolved: Bool?
        /// No bookmark resolved stale twice: the app made a new one when it
        /// saw `isStale`, as Apple's documentation says to (SPEC S26).
        var renewsStaleBookmarks = false
    }

    var name: String
    var app: String?
    var timeout: Double = 60
    var steps: [Step] = []
    var expect = Expectations()

    /// Those `scopefs run` passes on to the app (`SignalForwarder.signals`).
    static let signals: [String: Int32] = [
        "TERM": SIGTERM, "HUP": SIGHUP, "INT": SIGINT, "QUIT": SIGQUIT, "USR1": SIGUSR1, "USR2": SIGUSR2,
    ]
}

/// A scenario file's mistake, with its line (exit 65).
struct ScenarioError: Error {
    var line: Int?
    var message: String
}

extension Scenario {
    static func load(path: String) throws(CommandError) -> Scenario {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CommandError(.noInput, "cannot read scenario \(path)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw CommandError(.badData, "\(path): not UTF-8 text")
        }
        do {
            let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
            return try parse(text, name: name)
        } catch let error as ScenarioError {
            throw CommandError(.badData, "\(path)\(error.line.map { ":\($0)" } ?? ""): \(error.message)")
        } catch let error as YamlError {
            throw CommandError(.badData, "\(path): not YAML or JSON: \(error)")
        } catch {
            throw CommandError(.badData, "\(path): \(error)")
        }
    }

    static func parse(_ text: String, name: String) throws -> Scenario {
        // Before Yams: its parse recurses once per level (issue 46, 5a).
        try ScenarioDepth.check(text)
        guard let root = try Yams.compose(yaml: text) else {
            throw ScenarioError(line: nil, message: "the scenario is empty")
        }
        let top = try mapping(root, "the scenario", allowed: ["name", "app", "timeout", "steps", "expect"])
        var scenario = Scenario(name: name)
        if let node = top["name"] { scenario.name = try string(node, "name") }
        if let node = top["app"] { scenario.app = try string(node, "app") }
        if let node = top["timeout"] { scenario.timeout = try duration(node, "timeout") }
        if let node = top["steps"] {
            guard case .sequence(let steps) = node else {
                throw ScenarioError(line: line(node), message: "steps: expected a list")
            }
            scenario.steps = try steps.map(step)
        }
        if let node = top["expect"] { scenario.expect = try expectations(node) }
        return scenario
    }

    private static let actionKeys =
        [
            "revoke", "restore", "forget", "answer-pick", "rename", "delete", "recreate", "write", "fault", "latency",
            "signal", "lose-unsynced",
        ] + remoteActionKeys

    private static func step(_ node: Node) throws -> Step {
        let map = try mapping(node, "a step", allowed: ["at", "when", "after"] + actionKeys)
        let at = line(node)
        let triggers = ["at", "when", "after"].filter { map[$0] != nil }
        guard triggers.count <= 1 else {
            throw ScenarioError(
                line: at,
                message: "a step has one trigger (at, when, after); this one has \(triggers.joined(separator: " and "))"
            )
        }
        var trigger = Step.Trigger.at(0)
        if let value = map["at"] {
            trigger = .at(try duration(value, "at"))
        } else if let value = map["when"] {
            let text = try string(value, "when")
            let prefix = "app prints "
            guard text.hasPrefix(prefix), text.count > prefix.count else {
                throw ScenarioError(line: line(value), message: "when: expected 'app prints TEXT', got '\(text)'")
            }
            var printed = String(text.dropFirst(prefix.count))
            // `when: app prints "a: b"`: the quotes are YAML's, not the text's.
            if printed.count >= 2, let first = printed.first, first == printed.last, first == "\"" || first == "'" {
                printed = String(printed.dropFirst().dropLast())
            }
            trigger = .prints(printed)
        } else if let value = map["after"] {
            trigger = try after(try string(value, "after"), line: line(value))
        }
        let actions = actionKeys.filter { map[$0] != nil }
        guard actions.count == 1, let key = actions.first, let value = map[key] else {
            throw ScenarioError(
                line: at,
                message:
                    "a step does one thing (\(actionKeys.joined(separator: ", "))); this one has \(actions.isEmpty ? "none" : actions.joined(separator: " and "))"
            )
        }
        let action: Step.Action
        switch key {
        case "revoke": action = try revoke(value)
        case "lose-unsynced": action = try loseUnsynced(value)
        case _ where remoteActionKeys.contains(key): action = .remote(try remoteAction(key, value))
        case "restore": action = .restore(try item(value, key))
        case "forget": action = .forget(try item(value, key))
        case "delete": action = .delete(try item(value, key))
        case "recreate": action = .recreate(try item(value, key))
        case "answer-pick": action = .answerPick(try pickAnswer(value))
        case "rename":
            let fields = try mapping(value, "rename", allowed: ["from", "to"])
            guard let from = fields["from"], let to = fields["to"] else {
                throw ScenarioError(line: line(value), message: "rename: needs from and to")
            }
            action = .rename(from: try item(from, "from"), to: try item(to, "to"))
        case "write":
            let fields = try mapping(value, "write", allowed: ["path", "content"])
            guard let path = fields["path"], let content = fields["content"] else {
                throw ScenarioError(line: line(value), message: "write: needs path and content")
            }
            action = .write(path: try item(path, "path"), content: try string(content, "content"))
        case "fault", "latency":
            do {
                action = .fault(try FaultCommand.parse(try string(value, key), latency: key == "latency"))
            } catch let error as CommandError {
                throw ScenarioError(line: line(value), message: "\(key): \(error.message)")
            }
        default:
            let name = try string(value, key).uppercased().replacingOccurrences(of: "SIG", with: "")
            guard let number = signals[name] else {
                throw ScenarioError(
                    line: line(value), message: "signal: one of \(signals.keys.sorted().joined(separator: ", "))")
            }
            action = .signal(number, name)
        }
        return Step(trigger: trigger, action: action, line: at ?? 0)
    }

    /// `answer-pick: cancel`, or `{choose: ITEM or [ITEMS], read_only: true}`
    /// (for export and move, `choose` is the destination folder).
    private static func pickAnswer(_ node: Node) throws -> AgentScript.Step {
        if case .scalar = node {
            guard try string(node, "answer-pick") == "cancel" else {
                throw ScenarioError(
                    line: line(node), message: "answer-pick: 'cancel' or a mapping with choose (and read_only)")
            }
            return AgentScript.Step(cancel: true)
        }
        let fields = try mapping(node, "answer-pick", allowed: ["choose", "read_only", "cancel", "wait"])
        var step = AgentScript.Step()
        if let value = fields["choose"] {
            step.choose = try strings(value, "choose")
            for chosen in (step.choose ?? []) where ItemReference(argument: chosen) == nil {
                throw ScenarioError(line: line(value), message: "choose: expected PROVIDER:RELPATH, got '\(chosen)'")
            }
        }
        if let value = fields["read_only"] { step.readOnly = try bool(value, "read_only") }
        if let value = fields["cancel"] { step.cancel = try bool(value, "cancel") }
        if let value = fields["wait"] { step.waitMs = Int(try duration(value, "wait") * 1000) }
        guard (step.cancel == true) != !(step.choose ?? []).isEmpty else {
            throw ScenarioError(line: line(node), message: "answer-pick: either choose items or cancel")
        }
        return step
    }

    /// `100 reads of Providers/local/docs/*`: N, an operation (plural or
    /// not), `of`, a glob. `first start of grant local:docs`, `3 starts of
    /// grant local:docs`: the app's starts of a security scope on the grant.
    private static func after(_ text: String, line: Int?) throws -> Step.Trigger {
        let words = text.split(separator: " ", maxSplits: 3).map(String.init)
        if words.count == 4, words[1] == "start" || words[1] == "starts", words[2] == "of" {
            let count = words[0] == "first" ? 1 : Int(words[0]) ?? 0
            let grant = words[3].split(separator: " ", maxSplits: 1).map(String.init)
            guard count > 0, grant.count == 2, grant[0] == "grant", let colon = grant[1].firstIndex(of: ":"),
                colon != grant[1].startIndex
            else {
                throw ScenarioError(
                    line: line,
                    message:
                        "after: expected 'first start of grant PROVIDER:RELPATH' or 'N starts of grant PROVIDER:RELPATH'"
                )
            }
            return .starts(count: count, grant: grant[1])
        }
        guard words.count == 4, let count = Int(words[0]), count > 0, words[2] == "of" else {
            throw ScenarioError(
                line: line,
                message: "after: expected 'N OPERATIONs of GLOB', e.g. '100 reads of Providers/local/docs/*'")
        }
        var operation = words[1]
        if !FaultRule.operations.contains(operation), operation.hasSuffix("s") { operation.removeLast() }
        guard operation != "*", FaultRule.operations.contains(operation) else {
            throw ScenarioError(line: line, message: "after: unknown operation '\(words[1])'")
        }
        return .after(count: count, operation: operation, glob: words[3])
    }

    private static func expectations(_ node: Node) throws -> Expectations {
        let map = try mapping(
            node, "expect",
            allowed: [
                "exit", "no_leaked_scope", "no_unbalanced_stop", "denials", "prints", "not_prints", "files", "within",
                "stale_bookmark_resolved", "renews_stale_bookmarks",
            ])
        var expect = Expectations()
        if let value = map["exit"] {
            guard let code = value.int else {
                throw ScenarioError(line: line(value), message: "exit: expected a number")
            }
            expect.exit = Int32(code)
        }
        if let value = map["no_leaked_scope"] { expect.noLeakedScope = try bool(value, "no_leaked_scope") }
        if let value = map["no_unbalanced_stop"] { expect.noUnbalancedStop = try bool(value, "no_unbalanced_stop") }
        if let value = map["denials"] {
            let fields = try mapping(value, "denials", allowed: ["at_least", "at_most", "op"])
            var denials = Denials()
            if let n = fields["at_least"] { denials.atLeast = try count(n, "at_least") }
            if let n = fields["at_most"] { denials.atMost = try count(n, "at_most") }
            if let op = fields["op"] { denials.operation = try string(op, "op") }
            expect.denials = denials
        }
        if let value = map["prints"] { expect.prints = try outputChecks(value, "prints") }
        if let value = map["not_prints"] { expect.notPrints = try outputChecks(value, "not_prints") }
        if let value = map["files"] {
            guard case .sequence(let files) = value else {
                throw ScenarioError(line: line(value), message: "files: expected a list")
            }
            for file in files {
                let fields = try mapping(file, "a file", allowed: ["path", "content"])
                guard let path = fields["path"], let content = fields["content"] else {
                    throw ScenarioError(line: line(file), message: "a file expectation needs path and content")
                }
                expect.files.append((try item(path, "path"), try string(content, "content")))
            }
        }
        if let value = map["renews_stale_bookmarks"] {
            expect.renewsStaleBookmarks = try bool(value, "renews_stale_bookmarks")
        }
        if let value = map["within"] { expect.within = try duration(value, "within") }
        if let value = map["stale_bookmark_resolved"] {
            expect.staleBookmarkResolved = try bool(value, "stale_bookmark_resolved")
        }
        return expect
    }

    // MARK: Nodes

    static func line(_ node: Node) -> Int? { node.mark?.line }

    static func mapping(_ node: Node, _ what: String, allowed: [String]) throws -> [String: Node] {
        guard case .mapping(let map) = node else {
            throw ScenarioError(line: line(node), message: "\(what): expected a mapping")
        }
        var fields: [String: Node] = [:]
        for (key, value) in map {
            guard let name = key.string else {
                throw ScenarioError(line: line(key), message: "\(what): keys are names")
            }
            guard allowed.contains(name) else {
                throw ScenarioError(
                    line: line(key),
                    message: "unknown key '\(name)' in \(what); known: \(allowed.joined(separator: ", "))")
            }
            fields[name] = value
        }
        return fields
    }

    static func string(_ node: Node, _ what: String) throws -> String {
        guard case .scalar(let scalar) = node else {
            throw ScenarioError(line: line(node), message: "\(what): expected text")
        }
        return scalar.string
    }

    private static func strings(_ node: Node, _ what: String) throws -> [String] {
        if case .sequence(let items) = node { return try items.map { try string($0, what) } }
        return [try string(node, what)]
    }

    /// `TEXT`, `{stdout: TEXT}`, `{stderr: TEXT}`, or a list of them (a
    /// stream's text may be a list too).
    private static func outputChecks(_ node: Node, _ what: String) throws -> [OutputCheck] {
        switch node {
        case .sequence(let items): return try items.flatMap { try outputChecks($0, what) }
        case .mapping:
            let fields = try mapping(node, what, allowed: ["stdout", "stderr"])
            guard fields.count == 1, let (name, value) = fields.first,
                let stream = OutputCheck.Stream(rawValue: name)
            else {
                throw ScenarioError(line: line(node), message: "\(what): one of stdout: or stderr: per text")
            }
            return try strings(value, what).map { OutputCheck(text: $0, stream: stream) }
        default: return [OutputCheck(text: try string(node, what))]
        }
    }

    static func bool(_ node: Node, _ what: String) throws -> Bool {
        guard let value = node.bool else {
            throw ScenarioError(line: line(node), message: "\(what): expected true or false")
        }
        return value
    }

    private static func count(_ node: Node, _ what: String) throws -> Int {
        guard let value = node.int, value >= 0 else {
            throw ScenarioError(line: line(node), message: "\(what): expected a count")
        }
        return value
    }

    /// `PROVIDER:RELPATH`.
    static func item(_ node: Node, _ what: String) throws -> String {
        let text = try string(node, what)
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else {
            throw ScenarioError(line: line(node), message: "\(what): expected PROVIDER:RELPATH, got '\(text)'")
        }
        return text
    }

    private static func duration(_ node: Node, _ what: String) throws -> Double {
        if let number = node.float, case .scalar(let scalar) = node, Double(scalar.string) != nil {
            return max(number, 0)
        }
        do {
            return try ChaosCommand.seconds(try string(node, what))
        } catch let error as CommandError {
            throw ScenarioError(line: line(node), message: "\(what): \(error.message)")
        }
    }
}
