import ArgumentParser
import CommandErrors
import Control
import Foundation
import Glibc
import HostText
import Launcher
import Policy
import PolicyStore

/// `scopefs chaos`: runs a command as an app while its grants are revoked
/// and restored at random and faults are injected, every random choice
/// drawn from `--seed` and printed, so a run that broke the app replays
/// with the same seed (issue 18).
struct ChaosCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chaos",
        abstract: "Run a command as an app under random revocations and injected faults, replayable from a seed.",
        discussion: """
            Each action is printed on stderr as `chaos +SECONDS revoke|restore grant ID (ITEM)`. At the end the \
            grants chaos revoked are restored and the fault rules it added are removed. Exits with the command's status.
            """)
    @OptionGroup var options: StateOptions
    @Option(help: "The app to run as.", completion: Completions.apps) var app: String
    @Option(help: "The seed every random choice is drawn from.") var seed: UInt64
    @Option(
        name: .customLong("revoke-rate"),
        help: "Revocations and restorations per second on average, e.g. 2/s (default 1/s).")
    var revokeRate: String = "1/s"
    @Option(
        name: .customLong("fault"), help: "OP:ERRNO[:PERCENT%], e.g. read:EIO:5% (repeatable).",
        completion: Completions.faultShorthand)
    var faults: [String] = []
    @Option(
        name: .customLong("latency"), help: "OP:MSms[:PERCENT%], e.g. open:20ms (repeatable).",
        completion: Completions.latencyShorthand)
    var latencies: [String] = []
    @Option(
        name: .customLong("remote-fault"),
        help:
            "PROVIDER:CALL:ERROR[:PERCENT%|:#N] on an extension provider's calls, e.g. drive:fetch:unreachable:20% (repeatable)."
    )
    var remoteFaults: [String] = []
    @Option(
        name: .customLong("remote-latency"),
        help: "PROVIDER:CALL:MSms[:PERCENT%], e.g. drive:fetch:800ms: a slow store (repeatable).")
    var remoteLatencies: [String] = []
    @Option(help: "Stop the chaos (and the command, with SIGTERM) after this long: 30s, 500ms, 2m.") var duration:
        String?
    @Flag(help: "Run the command without the sandbox (as `scopefs run --no-sandbox`).") var noSandbox = false
    @Flag(help: "With --no-sandbox: the shared view of the mount (as `scopefs run --shared-view`).") var sharedView =
        false
    @OptionGroup(title: "Sandbox") var sandboxOptions: SandboxOptions
    @Argument(parsing: .captureForPassthrough, help: "The command and its arguments (after --).") var command: [String]

    func validate() throws {
        if command.drop(while: { $0 == "--" }).isEmpty { throw ValidationError("name a command to run after --") }
        if sharedView && !noSandbox { throw ValidationError("--shared-view needs --no-sandbox") }
        if noSandbox && sandboxOptions.shapesSandbox {
            throw ValidationError("--share-net, --expose, --env and --cwd shape the sandbox: not with --no-sandbox")
        }
    }

    func run() throws {
        var command = self.command
        if command.first == "--" { command.removeFirst() }
        var status: Int32 = 0
        try report { () throws(CommandError) in
            let rate = try Self.rate(revokeRate)
            let limit = try duration.map { text throws(CommandError) in try Self.seconds(text) }
            var rules: [FaultRule] = []
            for text in faults { rules.append(try FaultCommand.parse(text, latency: false)) }
            for text in latencies { rules.append(try FaultCommand.parse(text, latency: true)) }
            for text in remoteFaults { rules.append(try FaultCommand.parseRemote(text, latency: false)) }
            for text in remoteLatencies { rules.append(try FaultCommand.parseRemote(text, latency: true)) }
            let state = options.directory
            let repository = try options.repositoryForChange("drive chaos")
            let grants = try repository.grants(app: app).filter { $0.state == .active }
            let items = Dictionary(uniqueKeysWithValues: grants.map { ($0.id, "\($0.provider):\($0.relativePath)") })
            var added: [Int] = []
            defer { Self.clearFaults(added, state: state) }
            for (index, var rule) in rules.enumerated() {
                if !rule.isRemote { rule.app = app }
                // The first rule restarts the daemon's draws: the faults replay too.
                let rule = try FaultCommand.send(
                    .faultAdd(rule, seed: index == 0 ? seed : nil), state: state, action: "inject faults")
                added += rule.map(\.id)
                rule.forEach { Self.say("chaos fault \($0.summary)") }
            }
            Self.say(
                "chaos seed \(seed), rate \(rate)/s, grants \(grants.map { String($0.id) }.joined(separator: ","))")
            var schedule = ChaosSchedule(seed: seed, rate: rate, grants: grants.map(\.id))
            let child = try Self.launch(
                app: app, command: command, noSandbox: noSandbox, sharedView: sharedView,
                sandbox: sandboxOptions.runArguments, state: state)
            let start = Date()
            var next = schedule.next()
            // What was done, not what the schedule drew next.
            var revoked = Set<GrantID>()
            var stoppedAtDeadline = false
            while child.isRunning {
                let now = Date().timeIntervalSince(start)
                if let action = next, action.offset <= now, limit.map({ action.offset < $0 }) ?? true {
                    Self.say(
                        "chaos +\(String(format: "%.3f", action.offset))s \(action.kind.rawValue) grant \(action.grant) "
                            + "(\(items[action.grant] ?? "?"))")
                    Self.perform(
                        action.kind == .revoke ? .revoked : .active, grant: action.grant, app: app,
                        repository: repository, state: state)
                    if action.kind == .revoke { revoked.insert(action.grant) } else { revoked.remove(action.grant) }
                    next = schedule.next()
                    continue
                }
                // Actions due before the limit come first, even when late:
                // a run prints what its seed and duration say, however slow.
                if let limit, now >= limit {
                    stoppedAtDeadline = true
                    child.terminate()
                    break
                }
                usleep(CLITunables.scheduleTick)
            }
            child.waitUntilExit()
            for grant in revoked.sorted() {
                Self.say("chaos end: restore grant \(grant) (\(items[grant] ?? "?"))")
                Self.perform(.active, grant: grant, app: app, repository: repository, state: state)
            }
            let exited =
                child.terminationReason == .uncaughtSignal ? 128 + child.terminationStatus : child.terminationStatus
            // Stopped at the deadline (SIGTERM, `scopefs run` exits 143) or
            // ending cleanly then: the app lasted the whole run, which is
            // the pass that --duration asks for (CLI.md).
            let lasted = stoppedAtDeadline && (exited == 0 || exited == 128 + SIGTERM)
            status = lasted ? 0 : exited
            Self.say(
                lasted
                    ? "chaos seed \(seed): PASS: the command ran until the \(duration ?? "") deadline and was stopped"
                    : "chaos seed \(seed): \(exited == 0 ? "PASS" : "FAIL"): the command exited with \(exited)")
        }
        throw ExitCode(status)
    }

    /// A failed action is reported, not fatal: the command keeps running
    /// and the grants chaos revoked are still restored at the end.
    private static func perform(
        _ target: GrantState, grant: GrantID, app: String, repository: PolicyRepository, state: StateDirectory
    ) {
        do {
            let command: ControlCommand =
                target == .active ? .restore(app: app, grant: grant) : .revoke(app: app, grant: grant)
            _ = try ControlClient.policy(command, state: state) { () throws(CommandError) in repository }
        } catch {
            say("chaos: grant \(grant): \(error.message)")
        }
    }

    private static func clearFaults(_ ids: [Int], state: StateDirectory) {
        for id in ids {
            _ = try? ControlClient.send(.faultClear(id: id), state: state)
        }
    }

    /// `scopefs run` in a child: this process stays the owner's, so it may
    /// revoke and restore (an app process may not, SPEC S5).
    private static func launch(
        app: String, command: [String], noSandbox: Bool, sharedView: Bool, sandbox: [String], state: StateDirectory
    ) throws(CommandError) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var arguments = ["--state", state.path, "run", "--app", app]
        if noSandbox { arguments.append("--no-sandbox") }
        if sharedView { arguments.append("--shared-view") }
        if !noSandbox { arguments += sandbox }
        process.arguments = arguments + ["--"] + command
        do { try process.run() } catch { throw CommandError(.internalError, "cannot start scopefs run: \(error)") }
        return process
    }

    static func say(_ line: String) {
        FileHandle.standardError.write(Data((line.escapedForTerminal + "\n").utf8))
    }

    /// `2/s`, `30/m`, `0.5`: actions per second.
    static func rate(_ text: String) throws(CommandError) -> Double {
        var number = text
        var per = 1.0
        if text.hasSuffix("/s") {
            number = String(text.dropLast(2))
        } else if text.hasSuffix("/m") {
            number = String(text.dropLast(2))
            per = 60
        }
        guard let value = Double(number), value >= 0, value <= 1000 else {
            throw CommandError(.usage, "--revoke-rate '\(text)': expected a rate like 2/s or 30/m (at most 1000/s)")
        }
        return value / per
    }

    /// `30s`, `500ms`, `2m`, `10`: seconds.
    static func seconds(_ text: String) throws(CommandError) -> Double {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            if let value = Double(text.dropLast(suffix.count)), value > 0 { return value * scale }
        }
        if let value = Double(text), value > 0 { return value }
        throw CommandError(.usage, "'\(text)' is no duration like 30s, 500ms or 2m")
    }
}
