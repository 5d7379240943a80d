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
    /// relaunch: false}`: the app ended with it, and (by default) started
    /// again, as after Android's `pm revoke`.
    static func revoke(_ node: Node) throws -> Step.Action {
        guard case .mapping = node else { return .revoke(try item(node, "revoke")) }
        let fields = try mapping(node, "revoke", allowed: ["item", "kill", "relaunch"])
        guard let target = fields["item"] else {
            throw ScenarioError(line: line(node), message: "revoke: needs item")
        }
        let grant = try item(target, "item")
        let kill = try fields["kill"].map { try bool($0, "kill") } ?? false
        let relaunch = try fields["relaunch"].map { try bool($0, "relaunch") } ?? true
        if !kill {
            guard fields["relaunch"] == nil else {
                throw ScenarioError(line: line(node), message: "revoke: relaunch is for kill: true")
            }
            return .revoke(grant)
        }
        return .revokeAndKill(grant, relaunch: relaunch)
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
        _ process: inout Process, _ relaunch: Bool, _ command: [String], output: OutputWatcher, errors: OutputWatcher
    ) -> String {
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(CLITunables.exitPollPeriod) }
        if process.isRunning { return "; the app still runs 5 s after the kill" }
        let status =
            process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        guard relaunch else { return "; it ended (\(status))" }
        do {
            process = try launch(command, output: output, errors: errors)
            return "; it ended (\(status)) and was started again"
        } catch {
            return "; it ended (\(status)) and could not be started again: \(error.message)"
        }
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
