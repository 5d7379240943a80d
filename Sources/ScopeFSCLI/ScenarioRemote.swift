import CommandErrors
import Control
import Foundation
import Policy
import Yams

/// The scenario steps of issue 48 that act like other systems' tests do:
/// a revoke that ends the app (Android's `pm revoke`), and cloud storage
/// that misbehaves on cue for extension providers, through the daemon's
/// remote rules and edits (docs/SCENARIOS.md).
extension Scenario.Step {
    /// `revoke: {item: ..., kill: true, relaunch: false, lose_unsynced: true}`.
    struct RevokeMode: Equatable {
        /// End every process of the app after the revoke.
        var kill = false
        /// Start the command again after the kill.
        var relaunch = true
        /// Then lose what the app wrote and did not fsync (a crash).
        var loseUnsynced = false
    }

    enum RemoteAction: Equatable {
        /// `remote-fault: drive:fetch:unreachable[:P%|:#N]`,
        /// `remote-latency: drive:fetch:500ms`.
        case rule(FaultRule)
        /// Every call to the provider fails `unreachable`, until `online`.
        case offline(String)
        case online(String)
        /// The remote changes (a new version) or deletes an item,
        /// `PROVIDER:RELPATH`.
        case change(String)
        case delete(String)
    }
}

extension Scenario.Step {
    /// The step loses unsynced writes: the runner keeps them losable (an
    /// `unsynced` rule for the app) from before the app starts.
    var losesUnsynced: Bool {
        switch action {
        case .loseUnsynced: true
        case .revokeAs(_, let mode): mode.loseUnsynced
        default: false
        }
    }

    /// A rule added `at: 0`: the runner adds it before the app starts.
    var addsRuleAtStart: Bool {
        guard case .at(let offset) = trigger, offset == 0 else { return false }
        switch action {
        case .fault, .remote(.rule), .remote(.offline): return true
        default: return false
        }
    }
}

extension Scenario {
    static let remoteActionKeys = [
        "remote-fault", "remote-latency", "offline", "online", "remote-change", "remote-delete",
    ]

    static func remoteAction(_ key: String, _ value: Node) throws -> Step.RemoteAction {
        switch key {
        case "remote-fault", "remote-latency":
            do {
                return .rule(try FaultCommand.parseRemote(try string(value, key), latency: key == "remote-latency"))
            } catch let error as CommandError {
                throw ScenarioError(line: line(value), message: "\(key): \(error.message)")
            }
        case "offline", "online":
            let provider = try string(value, key)
            guard !provider.isEmpty, !provider.contains(":") else {
                throw ScenarioError(line: line(value), message: "\(key): expected a provider id, got '\(provider)'")
            }
            return key == "offline" ? .offline(provider) : .online(provider)
        case "remote-change": return .change(try item(value, key))
        default: return .delete(try item(value, key))
        }
    }

    /// `revoke: local:docs`, or `revoke: {item: local:docs, kill: true,
    /// relaunch: false, lose_unsynced: true}`: the app ended with it, and
    /// (by default) started again, as after Android's `pm revoke`; what it
    /// wrote and did not fsync lost, as at a crash.
    static func revoke(_ node: Node) throws -> Step.Action {
        guard case .mapping = node else { return .revoke(try item(node, "revoke")) }
        let fields = try mapping(node, "revoke", allowed: ["item", "kill", "relaunch", "lose_unsynced"])
        guard let target = fields["item"] else {
            throw ScenarioError(line: line(node), message: "revoke: needs item")
        }
        var mode = Step.RevokeMode()
        mode.kill = try fields["kill"].map { try bool($0, "kill") } ?? false
        mode.relaunch = try fields["relaunch"].map { try bool($0, "relaunch") } ?? true
        mode.loseUnsynced = try fields["lose_unsynced"].map { try bool($0, "lose_unsynced") } ?? false
        if !mode.kill && fields["relaunch"] != nil {
            throw ScenarioError(line: line(node), message: "revoke: relaunch is for kill: true")
        }
        let grant = try item(target, "item")
        return mode == Step.RevokeMode() ? .revoke(grant) : .revokeAs(grant, mode)
    }

    /// `lose-unsynced: true`.
    static func loseUnsynced(_ node: Node) throws -> Step.Action {
        guard try bool(node, "lose-unsynced") else {
            throw ScenarioError(line: line(node), message: "lose-unsynced: true, or no such step")
        }
        return .loseUnsynced
    }
}

extension ScenarioRunner {
    /// Starts the command as the app (a child `scopefs run`, so that this
    /// process stays the owner's and may revoke), its output watched.
    func launch(_ command: [String], output: OutputWatcher, errors: OutputWatcher) throws(CommandError) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["--state", state.path, "run", "--app", app] + runOptions + ["--"] + command
        let pipe = Pipe()
        process.standardOutput = pipe
        let errorPipe = Pipe()
        process.standardError = errorPipe
        do { try process.run() } catch { throw CommandError(.internalError, "cannot start scopefs run: \(error)") }
        output.follow(pipe.fileHandleForReading)
        errors.follow(errorPipe.fileHandleForReading)
        return process
    }

    /// After a `revoke: {kill: true}`: waits for the killed run to end,
    /// then starts the command again (as a user reopens the app) unless
    /// the step says `relaunch: false`. What happened, for the log.
    func relaunched(
        _ process: inout Process, _ mode: Scenario.Step.RevokeMode, _ command: [String], output: OutputWatcher,
        errors: OutputWatcher
    ) -> String {
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(CLITunables.exitPollPeriod) }
        if process.isRunning { return "; the app still runs 5 s after the kill" }
        let status =
            process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        guard mode.relaunch else { return "; it ended (\(status))" }
        do {
            process = try launch(command, output: output, errors: errors)
            return "; it ended (\(status)) and was started again"
        } catch {
            return "; it ended (\(status)) and could not be started again: \(error.message)"
        }
    }

    /// After a step's revoke: the kill (its processes are the kill's, not
    /// leaks), then the loss of what was not fsynced, as at a crash.
    func revokedAs(_ mode: Scenario.Step.RevokeMode, killed: inout Set<Int32>) throws -> String {
        var said = ""
        if mode.kill {
            let ended = try AppEnding.end(app, state: state, quiet: true)
            killed.formUnion(ended)
            said += " and kill the app (\(ended.count) processes)"
        }
        if mode.loseUnsynced {
            said += ", lose unsynced writes (\(try FaultCommand.loseUnsynced(app: app, state: state)) files)"
        }
        return said
    }

    /// The `unsynced` rule a scenario that loses unsynced writes needs,
    /// added before the app starts (removed at the end with the others).
    func addUnsyncedRule() throws(CommandError) -> Int {
        let rule = FaultRule(app: app, operation: "write", unsynced: true)
        let response = try ControlClient.send(.faultAdd(rule, seed: nil), state: state)
        guard response.ok, let id = response.faults?.first?.id else {
            throw CommandError(
                CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                response.message ?? "cannot keep unsynced writes losable")
        }
        return id
    }

    /// A step of cloud storage misbehaving on cue (docs/SCENARIOS.md):
    /// remote rules go through the daemon's fault rules (removed at the
    /// end with the others), edits through the provider's replica.
    func performRemote(_ action: Scenario.Step.RemoteAction, faults: inout [Int]) throws -> String {
        switch action {
        case .rule(let rule):
            return try addRemote(rule, faults: &faults, saying: "remote fault")
        case .offline(let provider):
            let rule = FaultRule(operation: "*", provider: provider, remoteError: "unreachable")
            return try addRemote(rule, faults: &faults, saying: "offline: \(provider)")
        case .online(let provider):
            let rules = try ControlClient.send(.faultList, state: state).faults ?? []
            let offline = rules.filter {
                $0.provider == provider && $0.operation == "*" && $0.remoteError == "unreachable"
            }
            for rule in offline { _ = try ControlClient.send(.faultClear(id: rule.id), state: state) }
            faults.removeAll { id in offline.contains { $0.id == id } }
            return "online: \(provider)" + (offline.isEmpty ? " (it was not offline)" : "")
        case .change(let item), .delete(let item):
            let colon = item.firstIndex(of: ":")!
            let isChange = if case .change = action { true } else { false }
            let response = try ControlClient.send(
                .providerContent(
                    provider: String(item[..<colon]), action: isChange ? .remoteChange : .remoteDelete,
                    path: String(item[item.index(after: colon)...])), state: state)
            guard response.ok else {
                return "remote \(isChange ? "change" : "delete") refused: \(response.message ?? "?")"
            }
            return "remote \(isChange ? "change" : "delete") \(item)"
        }
    }

    private func addRemote(_ rule: FaultRule, faults: inout [Int], saying what: String) throws -> String {
        let response = try ControlClient.send(.faultAdd(rule, seed: nil), state: state)
        guard response.ok, let added = response.faults?.first else {
            return "\(what) refused: \(response.message ?? "?")"
        }
        faults.append(added.id)
        return "\(what) \(added.summary)"
    }
}
