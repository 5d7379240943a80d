import Foundation
import Glibc

/// The supervisor thread: start, `initialize`, watch, restart with
/// back-off, give up (docs/PROVIDERS.md, "Life cycle").
extension ExtensionHost {
    /// 1.1 added `streamsFetch` and `$/progress`'s `staged`; 1.2 the
    /// `thumbnail` method, its capability, the item's `thumbnail` field
    /// and `thumbnailPath` of `create` and `modify` (SPEC S50).
    static let protocolVersion = "1.2"

    /// Whether an extension's answer is one this daemon speaks: the same
    /// major, a minor no higher than offered (docs/PROVIDERS.md, "Versions").
    static func speaks(_ answered: String) -> Bool {
        func parts(_ version: String) -> (Int, Int)? {
            let numbers = version.split(separator: ".", omittingEmptySubsequences: false)
            guard numbers.count == 2, let major = Int(numbers[0]), let minor = Int(numbers[1]) else { return nil }
            return (major, minor)
        }
        guard let own = parts(protocolVersion), let theirs = parts(answered) else { return false }
        return theirs.0 == own.0 && theirs.1 <= own.1
    }

    enum RunOutcome {
        /// The process ended; it may be started again.
        case ended(String)
        /// It must not be started again until its owner restarts it.
        case failed(String)
        case stopped
    }

    func supervise() {
        var failure: String?
        do throws(SpawnError) {
            let files = try StagedFiles(staging: stagingDirectory, received: receivedDirectory)
            StagedFiles.empty(receivedDirectory)
            guarded.withLock { $0.staged = files }
        } catch {
            failure = "cannot prepare its staging folder: \(error.reason)"
        }
        while failure == nil && !guarded.withLock({ $0.stopRequested }) {
            switch runOnce() {
            case .stopped: break
            case .failed(let reason): failure = reason
            case .ended(let reason):
                let count = recordExit()
                if count >= tunables.maxExits {
                    failure = "\(count) exits within \(tunables.exitWindow) s; the last: \(reason)"
                    break
                }
                let delay = tunables.restartDelay(afterExits: count)
                setState(.restarting(reason: reason, attempt: count))
                emit(.restarting(attempt: count, delay: delay, reason: reason))
                logger.warning(
                    "extension ended (\(reason)); restart \(count) in \(delay) s",
                    metadata: ["provider": "\(providerID)"])
                sleepUnlessStopped(delay)
            }
        }
        if let failure {
            logger.error("extension failed: \(failure)", metadata: ["provider": "\(providerID)"])
            setState(.failed(reason: failure))
            emit(.failed(reason: failure))
        } else {
            setState(.stopped)
            emit(.stopped)
        }
        guarded.withLock { state in
            state.live = nil
            state.supervising = false
            guarded.broadcast()
        }
    }

    private func setState(_ state: ExtensionState) {
        guarded.withLock {
            $0.current = state
            guarded.broadcast()
        }
    }

    /// Records an exit now; the number within the window.
    private func recordExit() -> Int {
        let now = MonotonicClock.now
        let window = MonotonicClock.nanoseconds(tunables.exitWindow)
        return guarded.withLock { state in
            state.exits.append(now)
            state.exits.removeAll { now &- $0 > window }
            return state.exits.count
        }
    }

    private func sleepUnlessStopped(_ seconds: Double) {
        let deadline = MonotonicClock.deadline(after: seconds)
        guarded.withLock(waitingUntil: deadline, for: { $0.stopRequested }) { _ in }
    }

    /// One life of the process.
    private func runOnce() -> RunOutcome {
        StagedFiles.empty(stagingDirectory)
        let connection: ExtensionConnection
        do throws(SpawnError) {
            let launch = try sandbox.launch(
                command, staging: stagingDirectory, received: receivedDirectory, environment: self.environment)
            // The supervisor thread outlives the process: bubblewrap's
            // --die-with-parent (PR_SET_PDEATHSIG) fires when the *thread*
            // that started it ends.
            defer { launch.filter?.close() }
            let process = try ExtensionProcess.spawn(
                launch.arguments, environment: launch.environment, inherited: launch.filter?.descriptor)
            connection = try ExtensionConnection(process: process, context: context)
        } catch {
            return .ended("cannot start: \(error.reason)")
        }
        let stopping: Bool = guarded.withLock { state in
            state.live = connection
            return state.stopRequested
        }
        connection.run()
        if stopping { connection.kill("stopped while starting") }
        if let outcome = initialize(connection) {
            return finish(connection, outcome)
        }
        return finish(connection, watch(connection))
    }

    /// Sends `initialize`; nil once the extension runs, else why not.
    private func initialize(_ connection: ExtensionConnection) -> RunOutcome? {
        let params: JSONValue = .object([
            "protocolVersion": .string(Self.protocolVersion), "providerId": .string(providerID),
            "stagingDirectory": .string(stagingDirectory),
            "options": .object(options.mapValues { .string($0) }),
        ])
        let answer: JSONValue
        do throws(ExtensionFailure) {
            answer = try connection.call(
                "initialize", params, control: nil, limit: .seconds(tunables.initializeTimeout), usesSlot: false)
        } catch {
            if connection.hasEnded {
                return guarded.withLock({ $0.stopRequested }) ? .stopped : .ended(connection.ended ?? error.message)
            }
            if error.stalled {
                connection.kill("no answer to initialize within \(tunables.initializeTimeout) s")
                return .ended("no answer to initialize within \(tunables.initializeTimeout) s")
            }
            connection.shutdown()
            if error.code == .unsupportedVersion {
                return .failed("it does not speak protocol \(Self.protocolVersion): \(error.message)")
            }
            return .ended("initialize failed: \(error.code.name): \(error.message)")
        }
        let info: ExtensionInfo
        do throws(AnswerRefusal) {
            info = try ExtensionInfo(initializeAnswer: answer)
        } catch {
            connection.violation("an initialize answer that is not usable: \(error.reason)", line: answer.encoded)
            return .ended("an initialize answer that is not usable: \(error.reason)")
        }
        guard Self.speaks(info.protocolVersion) else {
            connection.shutdown()
            return .failed("asked for protocol \(Self.protocolVersion), it answered \(info.protocolVersion)")
        }
        connection.info = info
        // The event first: whoever sees the state running finds it recorded.
        emit(.started(pid: connection.process.pid, info: info))
        let started: Bool = guarded.withLock { state in
            guard !state.stopRequested else { return false }
            state.current = .running(info)
            guarded.broadcast()
            return true
        }
        guard started else {
            connection.shutdown()
            return .stopped
        }
        logger.info(
            "extension \(info.name) \(info.version) running (pid \(connection.process.pid))",
            metadata: ["provider": "\(providerID)"])
        return nil
    }

    /// Until the process ends or a stop: kills it when a cancelled request
    /// stays unanswered `killAfterCancel` after its `$/cancel`.
    private func watch(_ connection: ExtensionConnection) -> RunOutcome {
        while !connection.hasEnded {
            let seen: (kicks: UInt64, stop: Bool) = guarded.withLock { ($0.kicks, $0.stopRequested) }
            if seen.stop {
                connection.shutdown()
                return .stopped
            }
            let (deadline, overdue) = connection.cancelledCallDeadline(now: MonotonicClock.now)
            if let overdue {
                connection.kill(
                    "\(overdue.method) not answered \(tunables.killAfterCancel) s after its $/cancel")
                break
            }
            // Until a kick (a cancel, the connection's end, a stop) or the
            // next cancelled call's deadline.
            guarded.withLock(
                waitingUntil: deadline ?? MonotonicClock.deadline(after: 3600),
                for: { $0.kicks != seen.kicks || $0.stopRequested }
            ) { _ in }
        }
        return .ended(connection.ended ?? "it ended")
    }

    /// Waits for the process and its threads, and reports its exit.
    private func finish(_ connection: ExtensionConnection, _ outcome: RunOutcome) -> RunOutcome {
        guarded.withLock { state in
            if state.current.isRunning && !state.stopRequested {
                state.current = .restarting(reason: connection.ended ?? "", attempt: 0)
            }
            guarded.broadcast()
        }
        if !connection.waitUntilFinished(until: MonotonicClock.deadline(after: 10)) {
            connection.process.signal(SIGKILL)
            connection.waitUntilFinished(until: MonotonicClock.deadline(after: 10))
        }
        if let status = connection.process.exitStatus { emit(.exited(status)) }
        guarded.withLock { $0.live = nil }
        return outcome
    }
}

extension ExtensionInfo {
    /// `initialize`'s result (docs/PROVIDERS.md, "initialize").
    init(initializeAnswer answer: JSONValue) throws(AnswerRefusal) {
        guard answer.isObject else { throw AnswerRefusal("not an object") }
        guard let version = answer["protocolVersion"]?.string else {
            throw AnswerRefusal("protocolVersion is not a string")
        }
        let name = answer["name"]?.string ?? "unnamed"
        let own = answer["version"]?.string ?? ""
        let capabilities = try ExtensionCapabilities(answer["capabilities"] ?? .object([:]))
        self.init(
            name: String(name.prefix(200)), version: String(own.prefix(200)), protocolVersion: version,
            capabilities: capabilities)
    }
}

extension ExtensionCapabilities {
    init(_ value: JSONValue) throws(AnswerRefusal) {
        self.init()
        guard value.isObject else { throw AnswerRefusal("capabilities is not an object") }
        if let text = value["changes"]?.string {
            guard let kind = Changes(rawValue: text) else { throw AnswerRefusal("changes is \(text)") }
            changes = kind
        }
        func flag(_ key: String, _ fallback: Bool) throws(AnswerRefusal) -> Bool {
            guard let field = value[key], !field.isNull else { return fallback }
            guard let bool = field.bool else { throw AnswerRefusal("\(key) is not a boolean") }
            return bool
        }
        ranges = try flag("ranges", false)
        create = try flag("create", false)
        modify = try flag("modify", false)
        delete = try flag("delete", false)
        rename = try flag("rename", false)
        conditionalWrites = try flag("conditionalWrites", false)
        symlinks = try flag("symlinks", false)
        renameKeepsId = try flag("renameKeepsId", true)
        streamsFetch = try flag("streamsFetch", false)
        thumbnails = try flag("thumbnails", false)
        if let field = value["maxPageSize"], !field.isNull {
            guard let size = field.int, (1...1000).contains(size) else {
                throw AnswerRefusal("maxPageSize is not an integer from 1 to 1000")
            }
            maxPageSize = Int(size)
        }
        if let field = value["settableFields"], !field.isNull {
            guard let names = field.array?.compactMap(\.string), names.count == field.array?.count else {
                throw AnswerRefusal("settableFields is not a list of strings")
            }
            settableFields = Set(names.filter { ["name", "parent", "mtime", "mode"].contains($0) })
        } else {
            settableFields = Set((modify ? ["mtime", "mode"] : []) + (rename ? ["name", "parent"] : []))
        }
    }
}
