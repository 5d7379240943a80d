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
        subcommands: [
            FaultAddCommand.self, FaultListCommand.self, FaultClearCommand.self, RemoteChangeCommand.self,
            RemoteDeleteCommand.self, LoseUnsyncedCommand.self,
        ])

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

    /// `read:EIO:5%`, `open:20ms`, `write:ENOSPC` (100%), `read:EIO:#3`
    /// (the third matching read only): the short form of `scopefs chaos
    /// --fault/--latency` and of scenarios.
    static func parse(_ text: String, latency: Bool) throws(CommandError) -> FaultRule {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 || parts.count == 3 else {
            throw CommandError(.usage, "'\(text)': expected OP:\(latency ? "MSms" : "ERRNO")[:PERCENT% or :#N]")
        }
        var rule = FaultRule(operation: parts[0])
        if latency {
            rule.latencyMilliseconds = try milliseconds(parts[1], in: text)
        } else {
            guard let errno = FaultRule.errno(named: parts[1]) else {
                throw CommandError(
                    .usage,
                    "'\(text)': unknown errno \(parts[1]); known: \(FaultRule.errnoNames.map(\.name).joined(separator: ", "))"
                )
            }
            rule.errno = errno
        }
        if parts.count == 3 { try share(parts[2], of: &rule, in: text) }
        if let problem = rule.problem { throw CommandError(.usage, "'\(text)': \(problem)") }
        return rule
    }

    /// `drive:fetch:unreachable[:P% or :#N]`, `drive:*:unreachable` (the
    /// store offline), `drive:fetch:stall`, `drive:modify:conflict`, or
    /// with `latency` `drive:fetch:500ms`: a remote rule on the calls the
    /// daemon makes to the provider's extension (issue 48).
    static func parseRemote(_ text: String, latency: Bool) throws(CommandError) -> FaultRule {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3 || parts.count == 4, !parts[0].isEmpty else {
            throw CommandError(
                .usage, "'\(text)': expected PROVIDER:CALL:\(latency ? "MSms" : "ERROR")[:PERCENT% or :#N]")
        }
        var rule = FaultRule(operation: parts[1], provider: parts[0])
        if latency {
            rule.latencyMilliseconds = try milliseconds(parts[2], in: text)
        } else {
            rule.remoteError = parts[2]
        }
        if parts.count == 4 { try share(parts[3], of: &rule, in: text) }
        if let problem = rule.problem { throw CommandError(.usage, "'\(text)': \(problem)") }
        return rule
    }

    private static func milliseconds(_ value: String, in text: String) throws(CommandError) -> Int {
        guard let milliseconds = Int(value.hasSuffix("ms") ? String(value.dropLast(2)) : value) else {
            throw CommandError(.usage, "'\(text)': '\(value)' is no latency like 20ms")
        }
        return milliseconds
    }

    /// `5%`: a percentage of the matching requests; `#3`: the third only.
    private static func share(_ value: String, of rule: inout FaultRule, in text: String) throws(CommandError) {
        if value.hasPrefix("#") {
            guard let nth = Int(value.dropFirst()) else {
                throw CommandError(.usage, "'\(text)': '\(value)' is no request number like #3")
            }
            rule.nth = nth
            return
        }
        guard let percent = Double(value.hasSuffix("%") ? String(value.dropLast()) : value) else {
            throw CommandError(.usage, "'\(text)': '\(value)' is no percentage")
        }
        rule.percent = percent
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
    @Option(help: "Only the Nth matching request (counted from 1), once, instead of a percentage.") var nth: Int?
    @Option(
        help:
            "A remote rule: act on the daemon's calls to this provider's extension (--op fetch, modify, create, delete, list, item, changes, currentAnchor or '*')."
    )
    var provider: String?
    @Option(
        name: .customLong("remote-error"),
        help:
            "With --provider: the protocol error the call fails with (unreachable, conflict, noSuchItem, quota, ...) or stall."
    )
    var remoteError: String?
    @Flag(
        help:
            "With --op write: fail nothing, but keep what the writes change and no fsync made durable losable (`fault lose-unsynced`)."
    )
    var unsynced = false
    @Option(help: "Restart the daemon's draws for percentages from this seed.") var seed: UInt64?
    @Flag(help: "Print the rule as JSON.") var json = false

    func validate() throws {
        let effects = [errno != nil, latency != nil, remoteError != nil, unsynced].filter { $0 }.count
        if effects != 1 { throw ValidationError("give --errno or --latency (or --remote-error with --provider)") }
        if (remoteError != nil) && provider == nil { throw ValidationError("--remote-error needs --provider") }
        if errno != nil && provider != nil { throw ValidationError("a remote rule takes --remote-error, not --errno") }
    }

    func run() throws {
        try report { () throws(CommandError) in
            var rule = FaultRule(
                app: app, path: path, operation: op, latencyMilliseconds: latency, percent: percent, nth: nth,
                provider: provider, remoteError: remoteError, unsynced: unsynced ? true : nil)
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

/// `scopefs fault remote-change PROVIDER:RELPATH`: the remote gets a new
/// version of an extension provider's item (the same bytes), as a store
/// edited on another device would (issue 48).
struct RemoteChangeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remote-change",
        abstract: "Testing: the remote changes an extension provider's item (a new version), behind the mount.")
    @OptionGroup var options: StateOptions
    @Argument(
        help: ArgumentHelp("The item, as PROVIDER:RELPATH.", valueName: "provider:relpath"),
        completion: Completions.items)
    var item: ItemReference

    func run() throws {
        try report { () throws(CommandError) in
            try OwnerCheck.require(options.directory, to: "edit the remote")
            try ContentCommands.send(.remoteChange, provider: item.provider, path: item.path, state: options.directory)
        }
    }
}

/// `scopefs fault remote-delete PROVIDER:RELPATH`: the remote deletes it.
struct RemoteDeleteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remote-delete",
        abstract: "Testing: the remote deletes an extension provider's item, behind the mount.")
    @OptionGroup var options: StateOptions
    @Argument(
        help: ArgumentHelp("The item, as PROVIDER:RELPATH.", valueName: "provider:relpath"),
        completion: Completions.items)
    var item: ItemReference

    func run() throws {
        try report { () throws(CommandError) in
            try OwnerCheck.require(options.directory, to: "edit the remote")
            try ContentCommands.send(.remoteDelete, provider: item.provider, path: item.path, state: options.directory)
        }
    }
}

/// `scopefs fault lose-unsynced [--app APP]`: what apps wrote and did not
/// fsync while an `unsynced` rule was in force is lost, as at a crash
/// (LazyFS's fault): the files go back to their last fsync (issue 48).
struct LoseUnsyncedCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lose-unsynced",
        abstract: "Testing: put the files apps changed back as their last fsync left them, as a crash would.")
    @OptionGroup var options: StateOptions
    @Option(help: "Only this app's writes (default: every app's).", completion: Completions.apps) var app: String?

    func run() throws {
        try report { () throws(CommandError) in
            let lost = try FaultCommand.loseUnsynced(app: app, state: options.directory)
            print("\(lost) file\(lost == 1 ? "" : "s") back to their last fsync")
        }
    }
}

extension FaultCommand {
    static func loseUnsynced(app: String?, state: StateDirectory) throws(CommandError) -> Int {
        try OwnerCheck.require(state, to: "lose unsynced writes")
        let response = try ControlClient.send(.loseUnsynced(app: app), state: state)
        guard response.ok else {
            throw CommandError(
                CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                response.message ?? "cannot lose unsynced writes")
        }
        return response.lost ?? 0
    }
}
