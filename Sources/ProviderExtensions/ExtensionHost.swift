import Foundation
import Glibc
import Logging

/// The daemon's side of one provider extension (docs/PROVIDERS.md, SPEC
/// S41): a supervised child process, in its own sandbox, spoken to in
/// JSON-RPC on its stdin and stdout.
///
/// Calls block the caller's thread (a FUSE worker waiting for a download,
/// the sync thread) until the answer, a cancel, the stall limit or the
/// process's end; none can hang. Up to `maxInFlight` are in flight at
/// once; more wait for a place. A supervisor thread starts the process,
/// restarts it with back-off when it ends, gives up after `maxExits`
/// exits in `exitWindow`, and kills it when a cancelled request is still
/// unanswered `killAfterCancel` later.
///
/// The closures it is given run on its own threads and must return
/// quickly: `events` (from any of them), `onChanged` and each call's
/// `onProgress` (on the stdout reader, which reads every answer: a slow
/// closure delays them all). Call `stop` before dropping a host: its
/// supervisor thread keeps it alive.
///
/// Lock order: the host's monitor may be held while a connection's is
/// taken, never the reverse (a connection calls back only after unlocking).
public final class ExtensionHost: ExtensionCalls, Sendable {
    public let providerID: String
    public let command: [String]
    public let options: [String: String]
    public let stagingDirectory: String
    /// Where checked `fetch` files are moved to before they are handed
    /// over: out of the extension's reach (see `StagedFiles`). Emptied
    /// when the host starts (`start`, `restart`): take files promptly.
    public let receivedDirectory: String
    public let sandbox: ExtensionSandbox
    public let tunables: ExtensionTunables
    let environment: [String: String]
    let logger: Logger
    let events: @Sendable (ExtensionEvent) -> Void

    /// What the host's threads share, behind one monitor.
    struct State {
        var current: ExtensionState = .stopped
        var live: ExtensionConnection?
        var supervising = false
        var stopRequested = false
        /// Bumped by every `kick`: the supervisor sleeps only while it is
        /// unchanged.
        var kicks: UInt64 = 0
        /// When the process ended, within the exit window.
        var exits: [UInt64] = []
        var changedHandler: (@Sendable () -> Void)?
        var staged: StagedFiles?
    }

    let guarded = Monitored(State())

    /// - Parameters:
    ///   - command: the extension's argv (the first a path or a name on PATH).
    ///   - options: `initialize`'s options (docs/PROVIDERS.md).
    ///   - stagingDirectory: an absolute path, made if missing; its parent
    ///     must be writable (the received folder goes beside it).
    ///   - sandbox: its own bubblewrap sandbox (`ExtensionSandbox`); false
    ///     runs it directly, which is no boundary.
    ///   - events: each `ExtensionEvent`, on the host's threads.
    public convenience init(
        providerID: String, command: [String], options: [String: String], stagingDirectory: String, sandbox: Bool,
        tunables: ExtensionTunables = ExtensionTunables(), logger: Logger,
        events: @escaping @Sendable (ExtensionEvent) -> Void
    ) {
        self.init(
            providerID: providerID, command: command, options: options, stagingDirectory: stagingDirectory,
            sandbox: ExtensionSandbox(enabled: sandbox), tunables: tunables, logger: logger, events: events)
    }

    public init(
        providerID: String, command: [String], options: [String: String], stagingDirectory: String,
        receivedDirectory: String? = nil, sandbox: ExtensionSandbox,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        tunables: ExtensionTunables = ExtensionTunables(), logger: Logger,
        events: @escaping @Sendable (ExtensionEvent) -> Void
    ) {
        self.providerID = providerID
        self.command = command
        self.options = options
        let staging =
            stagingDirectory.count > 1 && stagingDirectory.hasSuffix("/")
            ? String(stagingDirectory.dropLast()) : stagingDirectory
        self.stagingDirectory = staging
        self.receivedDirectory = receivedDirectory ?? staging + ".received"
        self.sandbox = sandbox
        self.environment = environment
        self.tunables = tunables
        self.logger = logger
        self.events = events
    }

    public var state: ExtensionState { guarded.withLock { $0.current } }

    public var onChanged: (@Sendable () -> Void)? {
        get { guarded.withLock { $0.changedHandler } }
        set { guarded.withLock { $0.changedHandler = newValue } }
    }

    /// The running process's pid (for `status`), or nil.
    public var pid: Int32? {
        guarded.withLock { $0.current.isRunning ? $0.live?.process.pid : nil }
    }

    /// Starts the extension and returns at once; calls wait for it to run
    /// (`waitForRunning`). Does nothing if it is already supervised.
    public func start() {
        let begin: Bool = guarded.withLock { state in
            guard !state.supervising else { return false }
            state.supervising = true
            state.stopRequested = false
            state.current = .starting
            guarded.broadcast()
            return true
        }
        guard begin else { return }
        // A write to the stdin of an extension that closed it must fail
        // with EPIPE, not end the daemon with SIGPIPE's default action.
        // Process-wide, as daemons do; children get the default back
        // (`ExtensionProcess` spawns with POSIX_SPAWN_SETSIGDEF).
        signal(SIGPIPE, SIG_IGN)
        let thread = Thread { self.supervise() }
        thread.name = "ext-\(providerID)-supervisor"
        thread.start()
    }

    /// Shuts the extension down (`shutdown`, `exit`, SIGTERM, SIGKILL: at
    /// most shutdownTimeout + exitTimeout + terminateTimeout) and waits
    /// for it. Calls in flight end with their answer, `cancelled` or
    /// `unreachable`. Not from an `events` closure.
    public func stop() {
        let starting: ExtensionConnection? = guarded.withLock { state in
            state.stopRequested = true
            state.kicks &+= 1
            guarded.broadcast()
            return state.current.isRunning ? nil : state.live
        }
        // An extension still in `initialize` is killed: nothing it does
        // matters any more.
        starting?.kill("stopped while starting")
        while guarded.withLock(
            waitingUntil: MonotonicClock.deadline(after: 1), for: { !$0.supervising }, { $0.supervising })
        {}
    }

    /// The owner's restart: stops the extension if it runs, forgets its
    /// past exits (a failed provider runs again) and starts it.
    public func restart() {
        stop()
        guarded.withLock { $0.exits = [] }
        start()
    }

    /// Waits until the extension runs (true), has failed or stopped, or
    /// `timeout` seconds passed (false).
    @discardableResult
    public func waitUntilRunning(timeout: Double) -> Bool {
        let deadline = MonotonicClock.deadline(after: timeout)
        return guarded.withLock(waitingUntil: deadline, for: { $0.current.hasSettled }) { state in
            if case .running = state.current { return true }
            return false
        }
    }

    func kick() {
        guarded.withLock { state in
            state.kicks &+= 1
            guarded.broadcast()
        }
    }

    func emit(_ event: ExtensionEvent) {
        events(event)
    }

    var context: HostContext {
        HostContext(
            providerID: providerID, tunables: tunables, logger: logger, emit: { [weak self] in self?.emit($0) },
            changed: { [weak self] in self?.onChanged?() }, kick: { [weak self] in self?.kick() },
            openStaged: { [weak self] path in self?.stagedFiles?.openPrefix(path) })
    }

    private var stagedFiles: StagedFiles? {
        guarded.withLock { $0.staged }
    }

    // MARK: - Calls

    /// The connection to send a call on: the running one, or the next
    /// one within `waitForRunning` while the extension starts or restarts.
    func connectionForCall(_ control: RequestControl) throws(ExtensionFailure) -> ExtensionConnection {
        control.whenCancelled { [weak self] in self?.kick() }
        let deadline = MonotonicClock.deadline(after: tunables.waitForRunning)
        // Waits while the extension starts or restarts (or runs on a
        // connection that just ended, until the next one).
        let mayCall = { (state: State) -> Bool in
            switch state.current {
            case .running: state.live.map { !$0.hasEnded } ?? false
            case .failed, .stopped: true
            case .starting, .restarting: false
            }
        }
        return try guarded.withLock(waitingUntil: deadline, for: { control.isCancelled || mayCall($0) }) {
            state throws(ExtensionFailure) -> ExtensionConnection in
            if control.isCancelled { throw ExtensionFailure(.cancelled, "cancelled") }
            switch state.current {
            case .running:
                if let live = state.live, !live.hasEnded { return live }
            case .failed(let reason):
                throw ExtensionFailure(.unreachable, "the extension of \(providerID) failed: \(reason)")
            case .stopped:
                throw ExtensionFailure(.unreachable, "the extension of \(providerID) is not running")
            case .starting, .restarting: break
            }
            throw ExtensionFailure(
                .unreachable, "the extension of \(providerID) did not run within \(tunables.waitForRunning) s")
        }
    }

    /// One request on the running extension; errors that are the
    /// extension's fault (`notInitialized` after `initialize`; an unknown
    /// method its capabilities announce) end it as protocol violations.
    func call(
        _ method: String, _ params: [String: JSONValue], _ control: RequestControl,
        lateAnswer: (@Sendable (JSONValue) -> Void)? = nil
    ) throws(ExtensionFailure) -> (JSONValue, ExtensionConnection) {
        let connection = try connectionForCall(control)
        do {
            let value = try connection.call(method, .object(params), control: control, lateAnswer: lateAnswer)
            return (value, connection)
        } catch {
            if error.code == .notInitialized {
                connection.violation("notInitialized after initialize succeeded", line: Array(method.utf8))
            } else if error.code == .methodNotFound, connection.info?.capabilities.announces(method) ?? false {
                connection.violation(
                    "method not found: \(method), which its capabilities announce", line: Array(method.utf8))
            }
            throw error
        }
    }

    /// An answer that cannot be used: an event, and EIO for the caller.
    func refuse(_ method: String, _ refusal: AnswerRefusal) -> ExtensionFailure {
        emit(.answerRefused(method: method, reason: refusal.reason))
        return ExtensionFailure(.internalError, "\(method): the extension's answer was refused: \(refusal.reason)")
    }

    func report(_ method: String, _ refused: [ItemRefusal]) {
        for refusal in refused { emit(.itemRefused(method: method, id: refusal.id, reason: refusal.reason)) }
    }
}

extension ExtensionCapabilities {
    /// Whether an extension with these capabilities must know `method`.
    func announces(_ method: String) -> Bool {
        switch method {
        case "item", "list", "fetch", "shutdown": true
        case "currentAnchor", "changes": changes != .none
        case "create": create
        case "modify": modify
        case "delete": delete
        case "thumbnail": thumbnails
        default: false
        }
    }
}

extension ExtensionState {
    /// Running, failed or stopped: what a wait for the start ends on.
    var hasSettled: Bool {
        switch self {
        case .running, .failed, .stopped: true
        case .starting, .restarting: false
        }
    }
}
