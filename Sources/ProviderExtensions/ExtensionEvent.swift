/// What happened to an extension, for the policy database's event trail
/// (`scopefs events`, kind `name`). Given to the host's `events` closure on
/// the host's own threads, never while it holds a lock: the closure may
/// call the host back (its `state`), but must not block for long.
public enum ExtensionEvent: Sendable, Equatable {
    /// The process answered `initialize`.
    case started(pid: Int32, info: ExtensionInfo)
    /// The process ended: its exit status, or the signal that killed it.
    case exited(ExitStatus)
    /// It will be started again after `delay` seconds.
    case restarting(attempt: Int, delay: Double, reason: String)
    /// Given up until its owner restarts it.
    case failed(reason: String)
    /// `stop` finished.
    case stopped
    /// It broke the protocol and was killed; `line` is the first 200 bytes
    /// of what it wrote (escaped for a terminal by whoever shows it).
    case protocolViolation(reason: String, line: String)
    /// It answered a request with an error.
    case error(method: String, code: Int, message: String)
    /// A request got neither answer nor progress within the stall limit;
    /// `$/cancel` was sent and the caller got ETIMEDOUT.
    case stalled(method: String, seconds: Double)
    /// Killed by the host for the reason given (a stall not ended by
    /// `$/cancel`, no `initialize` answer, no exit after `exit`).
    case killed(reason: String)
    /// One item of an answer broke the limits and was left out (the rest of
    /// the answer was used).
    case itemRefused(method: String, id: String?, reason: String)
    /// An answer that could not be used: the call failed with EIO.
    case answerRefused(method: String, reason: String)
    /// `fetch` named a file that is not a regular file of link count 1 of
    /// the right size, directly in the staging folder: refused (EIO).
    case stagedFileRefused(path: String, reason: String)
    /// A `thumbnail` answer's preview failed the staged-file checks, the
    /// size limit or the PNG signature (SPEC S50): the item shows none.
    case thumbnailRefused(id: String, reason: String)
    /// Notifications above the rate limit, dropped since the last report.
    case notificationsDropped(count: Int)
    /// stderr lines above the rate limit, dropped since the last report.
    case logLinesDropped(count: Int)

    /// How an ended process ended.
    public enum ExitStatus: Sendable, Equatable, CustomStringConvertible {
        case code(Int32)
        case signal(Int32)

        public var description: String {
            switch self {
            case .code(let code): "exit status \(code)"
            case .signal(let signal): "killed by signal \(signal)"
            }
        }
    }

    /// The event's kind in the policy database (`extension.*`).
    public var name: String {
        switch self {
        case .started: "extension.started"
        case .exited: "extension.exited"
        case .restarting: "extension.restarting"
        case .failed: "extension.failed"
        case .stopped: "extension.stopped"
        case .protocolViolation: "extension.protocolViolation"
        case .error(_, let code, _): "extension." + (ExtensionErrorCode(rawValue: code)?.name ?? "internal")
        case .stalled: "extension.stalled"
        case .killed: "extension.killed"
        case .itemRefused: "extension.itemRefused"
        case .answerRefused: "extension.answerRefused"
        case .stagedFileRefused: "extension.stagedFileRefused"
        case .thumbnailRefused: "extension.thumbnailRefused"
        case .notificationsDropped: "extension.notificationsDropped"
        case .logLinesDropped: "extension.logLinesDropped"
        }
    }

    /// One line for people (the event's message).
    public var message: String {
        switch self {
        case .started(let pid, let info):
            "\(info.name) \(info.version) started (pid \(pid), protocol \(info.protocolVersion))"
        case .exited(let status): "the extension ended: \(status)"
        case .restarting(let attempt, let delay, let reason):
            "restart \(attempt) in \(delay) s: \(reason)"
        case .failed(let reason): "failed until its owner restarts it: \(reason)"
        case .stopped: "stopped"
        case .protocolViolation(let reason, let line): "protocol violation: \(reason); line: \(line)"
        case .error(let method, let code, let message): "\(method): error \(code): \(message)"
        case .stalled(let method, let seconds): "\(method): no answer and no progress for \(seconds) s, cancelled"
        case .killed(let reason): "killed: \(reason)"
        case .itemRefused(let method, let id, let reason):
            "\(method): item \(id.map { "'\($0)'" } ?? "without a usable id") left out: \(reason)"
        case .answerRefused(let method, let reason): "\(method): answer refused: \(reason)"
        case .stagedFileRefused(let path, let reason): "fetch: staged file \(path) refused: \(reason)"
        case .thumbnailRefused(let id, let reason): "thumbnail: the preview of '\(id)' refused: \(reason)"
        case .notificationsDropped(let count): "\(count) notifications dropped (over the rate limit)"
        case .logLinesDropped(let count): "\(count) lines of stderr dropped (over the rate limit)"
        }
    }
}
