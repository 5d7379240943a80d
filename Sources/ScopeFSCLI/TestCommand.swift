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
import Synchronization

/// `scopefs test SCENARIO -- CMD`: runs CMD as the scenario's app against
/// the running mount, drives the scenario's timeline, then checks its
/// expectations (issue 18). Exit 0 when all hold, 1 otherwise.
struct TestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract:
            "Run a command as an app through a scenario of revocations, host changes and faults; check expectations.",
        discussion:
            "The scenario format is in docs/SCENARIOS.md. Exit 0: every expectation held; 1: one failed; 65: a bad scenario."
    )
    @OptionGroup var options: StateOptions
    @Argument(help: "The scenario file (YAML or JSON).", completion: .file(extensions: ["yaml", "yml", "json"]))
    var scenario: String
    @Option(help: "The app to run as (default: the scenario's `app`).", completion: Completions.apps) var app: String?
    @Option(help: "Write a JUnit XML report to this file.", completion: .file()) var junit: String?
    @Flag(help: "Print the report as JSON.") var json = false
    @Flag(help: "Run the command without the sandbox (as `scopefs run --no-sandbox`).") var noSandbox = false
    @OptionGroup(title: "Sandbox") var sandboxOptions: SandboxOptions
    @Argument(parsing: .postTerminator, help: "The command and its arguments (after --).") var command: [String] = []

    func validate() throws {
        if command.isEmpty { throw ValidationError("name a command to run after --") }
        if noSandbox && sandboxOptions.shapesSandbox {
            throw ValidationError("--share-net, --expose, --env and --cwd shape the sandbox: not with --no-sandbox")
        }
    }

    struct Outcome: Encodable {
        var name: String
        var passed: Bool
        var detail: String
    }

    /// One thing the runner did, when, and how long it took to hold.
    struct Action: Encodable {
        /// Seconds since the app started.
        var at: Double
        var action: String
        /// From the step's time to its effect (a revoke: acknowledged).
        var inForceMilliseconds: Double?

        var text: String {
            String(format: "+%.3fs ", at) + action
                + (inForceMilliseconds.map { String(format: ", in force %.1f ms after its time", $0) } ?? "")
        }
    }

    /// In `--json`: events and actions as objects (issue 31); the text and
    /// JUnit forms use `eventLines` and `Action.text`.
    struct Report: Encodable {
        var scenario: String
        var passed: Bool
        var seconds: Double
        var exitStatus: Int32?
        var expectations: [Outcome]
        var actions: [Action]
        var events: [EventJSON]
        /// What the app wrote on its standard output and error (the last
        /// 256 KiB of each).
        var output: String
        var errorOutput: String
        var eventLines: [String]

        private enum CodingKeys: String, CodingKey {
            case scenario, passed, seconds, exitStatus, expectations, actions, events, output, errorOutput
        }
    }

    func run() throws {
        var passed = false
        try report { () throws(CommandError) in
            let scenario = try Scenario.load(path: self.scenario)
            guard let app = app ?? scenario.app else {
                throw CommandError(.usage, "name the app with --app or in the scenario (app: ...)")
            }
            // A report that cannot be written fails now, not after the run.
            if let junit { try Self.checkWritable(junit) }
            let repository = try options.repositoryForChange("run test scenarios")
            let runner = try ScenarioRunner(
                scenario: scenario, app: app, repository: repository, options: options,
                runOptions: noSandbox ? ["--no-sandbox"] : sandboxOptions.runArguments)
            let result = try runner.run(command)
            passed = result.passed
            if json {
                printJSON(result)
            } else {
                Self.printText(result)
            }
            if let junit {
                do {
                    try JUnitReport.xml(result).write(toFile: junit, atomically: true, encoding: .utf8)
                } catch {
                    throw CommandError(.ioError, "cannot write \(junit): \(error.localizedDescription)")
                }
            }
        }
        if !passed { throw ExitCode(1) }
    }

    private static func checkWritable(_ path: String) throws(CommandError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw CommandError(.ioError, "cannot write --junit \(path): \(String(cString: strerror(errno)))")
        }
        close(descriptor)
    }

    static func printText(_ result: Report) {
        print(
            "scenario \(result.scenario.escapedForTerminal): \(result.passed ? "PASSED" : "FAILED") in \(String(format: "%.2f", result.seconds)) s"
        )
        for outcome in result.expectations {
            print(
                "  \(outcome.passed ? "ok  " : "FAIL") \(outcome.name.escapedForTerminal)\(outcome.passed ? "" : ": " + outcome.detail.escapedForTerminal)"
            )
        }
        if !result.passed {
            print("events of the run:")
            // Fields apart by two spaces: a tab inside one would print as `\t`.
            for line in result.eventLines.suffix(30) {
                print(
                    "  "
                        + line.split(separator: "\t", omittingEmptySubsequences: false).map {
                            String($0).escapedForTerminal
                        }.joined(separator: "  "))
            }
        }
    }
}

/// Drives one scenario: the app as a child `scopefs run` (so this process
/// stays the owner's and may revoke), its output watched for triggers.
struct ScenarioRunner {
    let scenario: Scenario
    let app: String
    let repository: PolicyRepository
    let options: StateOptions
    var state: StateDirectory { options.directory }
    /// Options of the `scopefs run` that starts the command.
    let runOptions: [String]
    let grants: [String: Grant]
    let providers: [String: Provider]

    init(
        scenario: Scenario, app: String, repository: PolicyRepository, options: StateOptions, runOptions: [String]
    )
        throws(CommandError)
    {
        self.scenario = scenario
        self.app = app
        self.repository = repository
        self.options = options
        self.runOptions = runOptions
        var grants: [String: Grant] = [:]
        for grant in try repository.grants(app: app) {
            grants["\(grant.provider):\(grant.relativePath)"] = grant
            if grant.relativePath.isEmpty { grants["\(grant.provider):."] = grant }
        }
        self.grants = grants
        providers = Dictionary(uniqueKeysWithValues: try repository.providers().map { ($0.id, $0) })
        // Every item a step names must exist before the app starts.
        for step in scenario.steps {
            switch step.action {
            case .revoke(let item), .restore(let item), .forget(let item), .revokeAs(let item, _):
                guard grants[item] != nil else {
                    throw CommandError(.badData, "\(scenario.name):\(step.line): \(app) has no grant of \(item)")
                }
            case .rename(let from, _): _ = try hostPath(from, line: step.line)
            case .delete(let item), .recreate(let item), .write(let item, _): _ = try hostPath(item, line: step.line)
            default: break
            }
            if case .starts(_, let item) = step.trigger, grants[item] == nil {
                throw CommandError(.badData, "\(scenario.name):\(step.line): \(app) has no grant of \(item)")
            }
        }
        for file in scenario.expect.files { _ = try hostPath(file.path, line: nil) }
    }

    func hostPath(_ item: String, line: Int?) throws(CommandError) -> String {
        let colon = item.firstIndex(of: ":")!
        let provider = String(item[..<colon])
        let relative = String(item[item.index(after: colon)...])
        guard let directory = providers[provider]?.directory, RelativePath.normalize(relative) != nil || relative == "."
        else {
            throw CommandError(.badData, "\(scenario.name)\(line.map { ":\($0)" } ?? ""): no provider item \(item)")
        }
        return relative.isEmpty || relative == "." ? directory : directory + "/" + relative
    }

    func run(_ command: [String]) throws(CommandError) -> TestCommand.Report {
        // `after:` triggers count through 0 ms latency rules: set before the app starts.
        var counters: [Int: Int] = [:]  // step index -> rule id
        var faults: [Int] = []
        for (index, step) in scenario.steps.enumerated() {
            guard case .after(_, let operation, let glob) = step.trigger else { continue }
            let response = try ControlClient.send(
                .faultAdd(FaultRule(app: app, path: glob, operation: operation, latencyMilliseconds: 0), seed: nil),
                state: state)
            guard response.ok, let id = response.faults?.first?.id else {
                throw CommandError(
                    CommandError.Kind(rawValue: response.code ?? 70) ?? .internalError,
                    response.message ?? "cannot count requests")
            }
            counters[index] = id
            faults.append(id)
        }
        var hits: [Int: Int] = [:]
        var lastCount = Date.distantPast
        // `after: N starts of grant`: the daemon's start events, per grant.
        var starts: [GrantID: Int] = [:]
        var lastStarts = Date.distantPast
        let picks = ScenarioPicks(
            state: options, app: app,
            steps: scenario.steps.count(where: { if case .answerPick = $0.action { true } else { false } }))
        picks.start()
        let started = Date()
        let output = OutputWatcher()
        let errors = OutputWatcher()
        // Processes a `revoke: {kill: true}` ended: their scopes are the
        // kill's leaks, not the app's.
        var killed = Set<Int32>()

        var actions: [TestCommand.Action] = []
        var done = Array(repeating: false, count: scenario.steps.count)
        var revoked = Set<GrantID>()
        var timedOut = false
        func say(_ action: TestCommand.Action) {
            actions.append(action)
            FileHandle.standardError.write(Data(("test " + action.text).escapedForTerminal.utf8 + [10]))
        }
        if scenario.steps.contains(where: \.losesUnsynced) {
            faults.append(try addUnsyncedRule())
        }
        // Rules `at: 0` are in force before the app starts: its first
        // request meets them (`fault: read:EIO:#1` fails its first read).
        var noPick: PendingPick?
        for (index, step) in scenario.steps.enumerated() where step.addsRuleAtStart {
            done[index] = true
            let done = perform(
                step, process: Process(), revoked: &revoked, faults: &faults, picks: picks, pick: &noPick,
                killed: &killed)
            say(.init(at: 0, action: done))
        }
        var process = try launch(command, output: output, errors: errors)
        while process.isRunning {
            let now = Date().timeIntervalSince(started)
            if counters.keys.contains(where: { !done[$0] }), Date().timeIntervalSince(lastCount) > 0.02 {
                lastCount = Date()
                let rules = (try? ControlClient.send(.faultList, state: state).faults) ?? []
                for rule in rules { hits[rule.id] = rule.hits ?? 0 }
            }
            if scenario.steps.indices.contains(where: { !done[$0] && scenario.steps[$0].countsStarts }),
                Date().timeIntervalSince(lastStarts) > 0.02
            {
                lastStarts = Date()
                starts = countStarts(since: started)
            }
            var pick: PendingPick?
            for (index, step) in scenario.steps.enumerated() where !done[index] {
                switch step.trigger {
                case .at(let offset): if now < offset { continue }
                case .prints(let text): if !output.contains(text) { continue }
                case .after(let count, _, _): if (hits[counters[index] ?? -1] ?? 0) < count { continue }
                case .starts(let count, let item): if (starts[grants[item]!.id] ?? 0) < count { continue }
                }
                if case .answerPick = step.action {
                    // Armed: answers the app's next request once one came.
                    pick = pick ?? picks.take()
                    if pick == nil { continue }
                }
                done[index] = true
                var done = perform(
                    step, process: process, revoked: &revoked, faults: &faults, picks: picks, pick: &pick,
                    killed: &killed)
                if case .revokeAs(_, let mode) = step.action, mode.kill {
                    done += relaunched(&process, mode, command, output: output, errors: errors)
                }
                // From the step's time (or its trigger's sighting) to its
                // effect: a revocation is in force once the daemon acknowledged it (SPEC S13).
                let scheduled: Double = if case .at(let offset) = step.trigger { offset } else { now }
                let effect = (Date().timeIntervalSince(started) - scheduled) * 1000
                say(.init(at: now, action: done, inForceMilliseconds: effect))
            }
            if now >= scenario.timeout {
                timedOut = true
                say(.init(at: now, action: "timeout: SIGTERM, then SIGKILL after 2 s"))
                process.terminate()
                let deadline = Date().addingTimeInterval(2)
                while process.isRunning && Date() < deadline { usleep(CLITunables.exitPollPeriod) }
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                break
            }
            usleep(CLITunables.scheduleTick)
        }
        process.waitUntilExit()
        picks.stop()
        output.finish()
        errors.finish()
        let seconds = Date().timeIntervalSince(started)
        let status =
            process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        usleep(CLITunables.eventSettleDelay)
        let events = Self.inTimeOrder(
            (try? EventStore(database: repository.database).events(
                .init(app: app, since: started.timeIntervalSince1970))) ?? [])
        for grant in revoked.sorted() { setState(.active, grant: grant) }
        for id in faults {
            _ = try? ControlClient.send(.faultClear(id: id), state: state)
        }
        var outcomes = check(
            status: status, seconds: seconds, timedOut: timedOut, output: output.text, errors: errors.text,
            events: events.filter { !($0.kind == .leak && killed.contains($0.pid ?? -1)) })
        for (index, step) in scenario.steps.enumerated() where !done[index] {
            outcomes.append(
                .init(
                    name: "step at line \(step.line) ran", passed: false,
                    detail: timedOut
                        ? "its trigger did not come before the scenario's timeout"
                        : "the app exited before its trigger, " + String(format: "%.1f s in", seconds)))
        }
        let names = (try? AppNames(repository)) ?? .none
        return TestCommand.Report(
            scenario: scenario.name, passed: outcomes.allSatisfy(\.passed), seconds: seconds,
            exitStatus: timedOut ? nil : status,
            expectations: outcomes, actions: actions,
            events: events.map { EventJSON($0, appName: $0.app.flatMap(names.name)) },
            output: String(output.text.suffix(Self.keptOutput)),
            errorOutput: String(errors.text.suffix(Self.keptOutput)),
            eventLines: events.map { EventsCommand.line($0, names: names, milliseconds: true) })
    }

    /// Events by the time they happened, not by their arrival in the log:
    /// the daemon writes its events (denials, starts) in batches, after a
    /// revoke the runner's own request recorded at once. Ties keep the
    /// log's order.
    static func inTimeOrder(_ events: [Event]) -> [Event] {
        events.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
    }

    /// How much of the app's output a report keeps (the end of it: what
    /// explains a failure, a traceback, is last).
    static let keptOutput = 256 << 10

    /// The app's starts of a scope per grant since `since`, from the event
    /// log (written by the daemon every 100 ms; repeats coalesced).
    private func countStarts(since: Date) -> [GrantID: Int] {
        let filter = EventStore.Filter(app: app, kinds: [.start], since: since.timeIntervalSince1970)
        var counts: [GrantID: Int] = [:]
        for event in (try? EventStore(database: repository.database).events(filter)) ?? [] {
            if let grant = event.grant { counts[grant, default: 0] += event.occurrences }
        }
        return counts
    }

    /// The owner's revoke or restore, by the same path as the commands'.
    private func setState(_ target: GrantState, grant: GrantID) {
        let command: ControlCommand =
            target == .active ? .restore(app: app, grant: grant) : .revoke(app: app, grant: grant)
        _ = try? ControlClient.policy(command, state: state) { () throws(CommandError) in repository }
    }

    /// Does one step; returns what it did, for the log.
    private func perform(
        _ step: Scenario.Step, process: Process, revoked: inout Set<GrantID>, faults: inout [Int], picks: ScenarioPicks,
        pick: inout PendingPick?, killed: inout Set<Int32>
    ) -> String {
        do {
            switch step.action {
            case .revoke(let item):
                let grant = grants[item]!.id
                setState(.revoked, grant: grant)
                revoked.insert(grant)
                return "revoke grant \(grant) (\(item))"
            case .restore(let item):
                let grant = grants[item]!.id
                setState(.active, grant: grant)
                revoked.remove(grant)
                return "restore grant \(grant) (\(item))"
            case .forget(let item):
                let grant = grants[item]!.id
                let forgotten =
                    try ControlClient.policy(.forget(app: app, grant: grant), state: state) {
                        () throws(CommandError) in repository
                    }.forgotten ?? []
                revoked.remove(grant)
                return forgotten.isEmpty
                    ? "forget grant \(grant) (\(item)): it was gone" : "forget grant \(grant) (\(item))"
            case .answerPick(let choice):
                guard let pending = pick else { return "answer-pick: no request" }
                pick = nil
                return picks.answer(pending, with: choice)
            case .rename(let from, let to):
                try FileManager.default.moveItem(
                    atPath: try hostPath(from, line: step.line), toPath: try hostPath(to, line: step.line))
                return "rename on the host \(from) -> \(to)"
            case .delete(let item):
                try FileManager.default.removeItem(atPath: try hostPath(item, line: step.line))
                return "delete on the host \(item)"
            case .recreate(let item):
                // A new file under the old name with the old one's content:
                // made beside it and renamed over it, so it cannot get the
                // old inode back (the item a bookmark named is gone).
                let path = try hostPath(item, line: step.line)
                let content = try Data(contentsOf: URL(fileURLWithPath: path))
                let directory = (path as NSString).deletingLastPathComponent
                let fresh = directory + "/.scopefs-recreate-\(getpid())-" + (path as NSString).lastPathComponent
                try content.write(to: URL(fileURLWithPath: fresh))
                guard rename(fresh, path) == 0 else {
                    let reason = String(cString: strerror(errno))
                    unlink(fresh)
                    return "step at line \(step.line) failed: cannot replace \(item): \(reason)"
                }
                return "recreate on the host \(item)"
            case .write(let item, let content):
                try content.write(toFile: try hostPath(item, line: step.line), atomically: false, encoding: .utf8)
                return "write on the host \(item)"
            case .fault(var rule):
                rule.app = app
                let response = try ControlClient.send(.faultAdd(rule, seed: nil), state: state)
                guard response.ok, let added = response.faults?.first else {
                    return "fault refused: \(response.message ?? "?")"
                }
                faults.append(added.id)
                return "fault \(added.summary)"
            case .signal(let number, let name):
                kill(process.processIdentifier, number)
                return "signal SIG\(name)"
            case .revokeAs(let item, let mode):
                let grant = grants[item]!.id
                setState(.revoked, grant: grant)
                revoked.insert(grant)
                return "revoke grant \(grant) (\(item))" + (try revokedAs(mode, killed: &killed))
            case .loseUnsynced:
                return "lose unsynced writes: \(try FaultCommand.loseUnsynced(app: app, state: state)) files"
            case .remote(let action):
                return try performRemote(action, faults: &faults)
            }
        } catch {
            return "step at line \(step.line) failed: \(error)"
        }
    }

    private func check(
        status: Int32, seconds: Double, timedOut: Bool, output: String, errors: String, events: [Event]
    )
        -> [TestCommand.Outcome]
    {
        let expect = scenario.expect
        var outcomes: [TestCommand.Outcome] = []
        // Each detail says what happened, whether the check passed or not.
        outcomes.append(
            .init(
                name: "finished within \(Int(scenario.timeout)) s (timeout)", passed: !timedOut,
                detail: timedOut
                    ? "the app still ran after \(scenario.timeout) s and was killed"
                    : String(format: "the app ended after %.2f s", seconds)))
        if let code = expect.exit {
            outcomes.append(
                .init(
                    name: "exit status is \(code)", passed: !timedOut && status == code,
                    detail: timedOut ? "it was killed at the timeout (\(status))" : "it was \(status)"))
        }
        if expect.noLeakedScope {
            let leaks = events.filter { $0.kind == .leak }
            outcomes.append(
                .init(
                    name: "no leaked scope", passed: leaks.isEmpty,
                    detail: leaks.isEmpty
                        ? "no leak event"
                        : "leaked: " + leaks.map { "\($0.path ?? "?") x\($0.count ?? 0)" }.joined(separator: ", ")))
        }
        if expect.noUnbalancedStop {
            let stops = events.filter { $0.kind == .unbalancedStop }.reduce(0) { $0 + $1.occurrences }
            outcomes.append(.init(name: "no unbalanced stop", passed: stops == 0, detail: "\(stops) unbalanced stops"))
        }
        if let denials = expect.denials {
            let count = events.filter {
                $0.kind == .denial && (denials.operation == nil || $0.operation == denials.operation)
            }
            .reduce(0) { $0 + $1.occurrences }
            let what = "denials\(denials.operation.map { " of \($0)" } ?? "")"
            if let least = denials.atLeast {
                outcomes.append(
                    .init(name: "at least \(least) \(what)", passed: count >= least, detail: "there were \(count)"))
            }
            if let most = denials.atMost {
                outcomes.append(
                    .init(name: "at most \(most) \(what)", passed: count <= most, detail: "there were \(count)"))
            }
        }
        for check in expect.prints {
            let found = Self.find(check, output: output, errors: errors)
            outcomes.append(
                .init(
                    name: "the app printed '\(check.text)'\(Self.streamName(check.stream))", passed: found != nil,
                    detail: found.map { "it did, on \($0)" }
                        ?? "it did not, on \(check.stream == .both ? "standard output or error" : Self.streams(check.stream))"
                ))
        }
        for check in expect.notPrints {
            let found = Self.find(check, output: output, errors: errors)
            outcomes.append(
                .init(
                    name: "the app did not print '\(check.text)'\(Self.streamName(check.stream))", passed: found == nil,
                    detail: found.map { "it did, on \($0)" }
                        ?? "it did not, on \(check.stream == .both ? "standard output or error" : Self.streams(check.stream))"
                ))
        }
        for file in expect.files {
            let path = (try? hostPath(file.path, line: nil)) ?? file.path
            let content = FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
            outcomes.append(
                .init(
                    name: "host file \(file.path) holds the expected content", passed: content == file.content,
                    detail: content.map { "it holds \($0.prefix(200).debugDescription)" } ?? "it does not exist"))
        }
        if let wanted = expect.staleBookmarkResolved {
            let stale = events.filter { $0.kind == .staleBookmark }.reduce(0) { $0 + $1.occurrences }
            outcomes.append(
                .init(
                    name: wanted ? "a stale bookmark was resolved" : "no stale bookmark was resolved",
                    passed: (stale > 0) == wanted, detail: "\(stale) stale resolutions"))
        }
        if expect.renewsStaleBookmarks { outcomes.append(Self.renewedStaleBookmarks(events)) }
        if let within = expect.within {
            outcomes.append(
                .init(
                    name: "finished within \(within) s", passed: !timedOut && seconds <= within,
                    detail: String(format: "it took %.2f s", seconds)))
        }
        return outcomes
    }
}

extension ScenarioRunner {
    /// `renews_stale_bookmarks`: the stale resolutions of each item (the
    /// event's path: where the item is now). Two of one item mean the app
    /// kept a bookmark after it resolved stale; `stale_bookmark_resolved`
    /// alone cannot tell that app from one that renewed it.
    static func renewedStaleBookmarks(_ events: [Event]) -> TestCommand.Outcome {
        var resolutions: [String: Int] = [:]
        for event in events where event.kind == .staleBookmark {
            resolutions[event.path ?? "?", default: 0] += event.occurrences
        }
        let kept = resolutions.filter { $0.value > 1 }.sorted { $0.key < $1.key }
        let detail =
            kept.isEmpty
            ? "\(resolutions.values.reduce(0, +)) stale resolutions, none twice of one item"
            : kept.map { "\($0.key) resolved stale \($0.value) times: the bookmark was not renewed" }
                .joined(separator: "; ")
        return .init(name: "stale bookmarks were renewed", passed: kept.isEmpty, detail: detail)
    }

    static func streams(_ stream: Scenario.OutputCheck.Stream) -> String {
        switch stream {
        case .both: "standard output and error"
        case .stdout: "standard output"
        case .stderr: "standard error"
        }
    }

    /// " on standard error" in a check's name when it reads one stream.
    static func streamName(_ stream: Scenario.OutputCheck.Stream) -> String {
        stream == .both ? "" : " on \(streams(stream))"
    }

    /// Where the check's text is, as "standard error: LINE" (the first
    /// line holding it, shortened), or nil when it is not in its streams.
    static func find(_ check: Scenario.OutputCheck, output: String, errors: String) -> String? {
        var places: [(String, String)] = []
        if check.stream != .stderr { places.append(("standard output", output)) }
        if check.stream != .stdout { places.append(("standard error", errors)) }
        for (name, text) in places where text.contains(check.text) {
            let line = text.split(separator: "\n", omittingEmptySubsequences: false).first { $0.contains(check.text) }
            return "\(name): " + String((line ?? "").prefix(200)).debugDescription
        }
        return nil
    }
}

/// The app's standard output: passed on to ours, kept for `when` and `prints`.
final class OutputWatcher: Sendable {
    private struct State {
        var buffer = Data()
        /// One per launch of the app (a relaunch after a kill adds one).
        var followers = 0
    }

    private let state = Mutex(State())
    private let finished = DispatchSemaphore(value: 0)

    func follow(_ handle: FileHandle) {
        state.withLock { $0.followers += 1 }
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                FileHandle.standardError.write(chunk)
                state.withLock { $0.buffer.append(chunk) }
            }
            finished.signal()
        }
    }

    /// Waits until the app's output ended (its last writer exited).
    func finish() {
        let deadline = DispatchTime.now() + 5
        for _ in 0..<state.withLock({ $0.followers }) { _ = finished.wait(timeout: deadline) }
    }

    var text: String {
        let buffer = state.withLock { $0.buffer }
        return String(decoding: buffer, as: UTF8.self)
    }

    func contains(_ needle: String) -> Bool { text.contains(needle) }
}

/// JUnit XML as GitLab, GitHub and Jenkins read it: one test case per
/// expectation, the run's actions and events as the suite's output.
enum JUnitReport {
    static func xml(_ report: TestCommand.Report) -> String {
        let failures = report.expectations.filter { !$0.passed }.count
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        xml +=
            "<testsuites name=\"scopefs test\" tests=\"\(report.expectations.count)\" failures=\"\(failures)\" errors=\"0\" time=\"\(String(format: "%.3f", report.seconds))\">\n"
        xml +=
            "  <testsuite name=\"\(escape(report.scenario))\" tests=\"\(report.expectations.count)\" failures=\"\(failures)\" errors=\"0\" skipped=\"0\" time=\"\(String(format: "%.3f", report.seconds))\">\n"
        // The expectations are checks of one run: they share its time, so
        // that their sum is the run's.
        let share = String(format: "%.3f", report.seconds / Double(max(1, report.expectations.count)))
        for outcome in report.expectations {
            xml +=
                "    <testcase classname=\"scopefs.\(escape(report.scenario))\" name=\"\(escape(outcome.name))\" time=\"\(share)\""
            if outcome.passed {
                xml += "/>\n"
            } else {
                xml +=
                    ">\n      <failure message=\"\(escape(outcome.detail))\" type=\"expectation\">\(escape(outcome.name + ": " + outcome.detail))</failure>\n    </testcase>\n"
            }
        }
        let log = (report.actions.map { "action " + $0.text } + report.eventLines.map { "event " + $0 })
            .joined(separator: "\n")
        xml += "    <system-out>\(escape(log + "\n--- the app's output\n" + report.output))</system-out>\n"
        xml += "    <system-err>\(escape(report.errorOutput))</system-err>\n"
        xml += "  </testsuite>\n</testsuites>\n"
        return xml
    }

    /// Text and attribute escaping; control characters XML 1.0 cannot hold become U+FFFD.
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\n", "\t", "\r": out.unicodeScalars.append(scalar)
            default:
                out.unicodeScalars.append(
                    scalar.value < 0x20 || (0xFFFE...0xFFFF).contains(scalar.value) ? "\u{FFFD}" : scalar)
            }
        }
        return out
    }
}

extension Scenario.Step {
    var countsStarts: Bool {
        if case .starts = trigger { true } else { false }
    }
}
