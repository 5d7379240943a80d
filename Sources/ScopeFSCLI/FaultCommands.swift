import ArgumentParser
import CommandErrors
import Control
import Foundation
import HostText
import Launcher
import Policy
import PolicyStore

/// `scopefs fault add/list/clear`: fault and latency rules on the running
/// daemon (issue 18). The owner's only: refused (77) in app processes.
struct FaultCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fault", abstract: "Inject errnos and latency into the running mount's requests (testing).",
        subcommands: [FaultAddCommand.self, FaultListCommand.self, FaultClearCommand.self])

    /// Sends a fault request; a refusal or a bad rule becomes its exit code.
    static func send(_ command: ControlCommand, state: StateDirectory, action: String) throws(CommandError)
        -> [FaultRule]
    {
        try OwnerCheck.require(state, to: action)
        let response = try ControlClient.send(command, state: state)
        guard response.ok else {
            throw CommandError(
                CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                response.message ?? "\(action) failed")
        }
        return response.faults ?? []
    }

    /// `read:EIO:5%`, `open:20ms`, `write:ENOSPC` (100%): the short form of
    /// `scopefs chaos --fault/--latency` and of scenarios.
    static func parse(_ text: String, latency: Bool) throws(CommandError) -> FaultRule {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 || parts.count == 3 else {
            throw CommandError(.usage, "'\(text)': expected OP:\(latency ? "MSms" : "ERRNO")[:PERCENT%]")
        }
        var rule = FaultRule(operation: parts[0])
        if latency {
            let value = parts[1].hasSuffix("ms") ? String(parts[1].dropLast(2)) : parts[1]
            guard let milliseconds = Int(value) else {
                throw CommandError(.usage, "'\(text)': '\(parts[1])' is no latency like 20ms")
            }
            rule.latencyMilliseconds = milliseconds
        } else {
            guard let errno = FaultRule.errno(named: parts[1]) else {
                throw CommandError(
                    .usage,
                    "'\(text)': unknown errno \(parts[1]); known: \(FaultRule.errnoNames.map(\.name).joined(separator: ", "))"
                )
            }
            rule.errno = errno
        }
        if parts.count == 3 {
            let value = parts[2].hasSuffix("%") ? String(parts[2].dropLast()) : parts[2]
            guard let percent = Double(value) else {
                throw CommandError(.usage, "'\(text)': '\(parts[2])' is no percentage")
            }
            rule.percent = percent
        }
        if let problem = rule.problem { throw CommandError(.usage, "'\(text)': \(problem)") }
        return rule
    }
}

struct FaultAddCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Add a rule: OP requests fail with ERRNO, or wait MS, in P% of the cases.")
    @OptionGroup var options: StateOptions
    @Option(help: "Only this app's requests (default: every app).", completion: Completions.apps) var app: String?
    @Option(help: "An fnmatch glob on the path in the app's view, e.g. 'Providers/local/docs/*'.") var path: String?
    @Option(
        help:
            "The operation: open, read, write, fsync, create, rename, unlink, mkdir, getattr, readdir, lookup, ... or '*'.",
        completion: Completions.faultOperations)
    var op: String
    @Option(
        help: "The errno to inject: EIO, ENOSPC, EDQUOT, EROFS, EPERM, ETIMEDOUT, EACCES, ...",
        completion: Completions.faultErrnos)
    var errno: String?
    @Option(help: "A delay in milliseconds instead of an errno.") var latency: Int?
    @Option(help: "How many of the matching requests, in percent (default 100).") var percent: Double = 100
    @Option(help: "Restart the daemon's draws for percentages from this seed.") var seed: UInt64?
    @Flag(help: "Print the rule as JSON.") var json = false

    func validate() throws {
        if (errno == nil) == (latency == nil) { throw ValidationError("give either --errno or --latency") }
    }

    func run() throws {
        try report { () throws(CommandError) in
            var rule = FaultRule(app: app, path: path, operation: op, latencyMilliseconds: latency, percent: percent)
            if let errno {
                guard let value = FaultRule.errno(named: errno) else {
                    throw CommandError(
                        .usage,
                        "unknown errno \(errno); known: \(FaultRule.errnoNames.map(\.name).joined(separator: ", "))")
                }
                rule.errno = value
            }
            if let problem = rule.problem { throw CommandError(.usage, problem) }
            let added = try FaultCommand.send(
                .faultAdd(rule, seed: seed), state: options.directory, action: "inject faults")
            if json {
                printJSON(added.first)
            } else if let rule = added.first {
                print("added \(rule.summary.escapedForTerminal)")
            }
        }
    }
}

struct FaultListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "The rules in force.")
    @OptionGroup var options: StateOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        try report { () throws(CommandError) in
            let rules = try FaultCommand.send(
                .faultList, state: options.directory, action: "list faults")
            if json {
                printJSON(rules)
            } else {
                if rules.isEmpty { print("no fault rules") }
                for rule in rules { print(rule.summary.escapedForTerminal) }
            }
        }
    }
}

struct FaultClearCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clear", abstract: "Remove one rule, or all with --all.")
    @OptionGroup var options: StateOptions
    @Argument(help: "The rule's id (from `fault list`).") var id: Int?
    @Flag(help: "Remove every rule.") var all = false
    @Flag(help: "Print the rules left as JSON.") var json = false

    func validate() throws {
        if (id == nil) == !all { throw ValidationError("name a rule id, or --all") }
    }

    func run() throws {
        try report { () throws(CommandError) in
            let left = try FaultCommand.send(.faultClear(id: id), state: options.directory, action: "clear faults")
            if json { return printJSON(left) }
            print("\(left.count) fault rule\(left.count == 1 ? "" : "s") left")
        }
    }
}
