import Logging

/// One request in flight, from the moment its line is queued until its
/// answer arrives or the process ends. Every field is guarded by the
/// connection's monitor.
final class PendingCall: @unchecked Sendable {
    let id: Int64
    let method: String
    let control: RequestControl?
    /// Counts toward `maxInFlight` (everything but `initialize` and
    /// `shutdown`).
    let usesSlot: Bool
    /// For the answer to a call its caller no longer waits for: a fetch's
    /// staged file must still be removed.
    let lateAnswer: (@Sendable (JSONValue) -> Void)?

    var outcome: Result<JSONValue, ExtensionFailure>?
    /// The request was sent, or its last `$/progress`: the stall limit
    /// counts from here.
    var lastSignOfLife: UInt64
    /// When `$/cancel` was sent (by the caller's cancel or by a stall).
    var cancelSentAt: UInt64?
    var cancelledByCaller = false
    /// The caller has left; an answer is only cleaned up after.
    var abandoned = false

    init(
        id: Int64, method: String, control: RequestControl?, usesSlot: Bool,
        lateAnswer: (@Sendable (JSONValue) -> Void)?
    ) {
        self.id = id
        self.method = method
        self.control = control
        self.usesSlot = usesSlot
        self.lateAnswer = lateAnswer
        lastSignOfLife = MonotonicClock.now
    }
}

/// How long a call may wait for its answer.
enum CallLimit {
    /// The stall limit, counted from the last sign of life.
    case stall
    /// A fixed time (`initialize`, `shutdown`).
    case seconds(Double)
}

/// What the connection needs of its host: who it serves and where events,
/// `changed` signals and wake-ups go.
struct HostContext: Sendable {
    var providerID: String
    var tunables: ExtensionTunables
    var logger: Logger
    var emit: @Sendable (ExtensionEvent) -> Void
    var changed: @Sendable () -> Void
    /// Wakes the host's supervisor: a call was cancelled (the kill-after-
    /// cancel clock runs) or the connection ended.
    var kick: @Sendable () -> Void
    /// Opens a staged file a `$/progress` names, if it passes the checks
    /// of a fetch's answer (`StagedFiles.openPrefix`).
    var openStaged: @Sendable (String) -> Int32? = { _ in nil }
}
