import CSystemShims
import Foundation
import Glibc
import Logging

/// One run of the extension's process: its pipes, the requests in flight
/// and four threads (stdout reader, stderr reader, stdin writer, reaper).
/// It ends once (the process exits, breaks the protocol or is killed);
/// every call still waiting then fails `unreachable`. A restart is a new
/// connection.
///
/// Lock order: a thread holding `monitor` calls nothing outside this type
/// (no event, no callback, no host lock); those run after it unlocks.
final class ExtensionConnection: @unchecked Sendable {
    let process: ExtensionProcess
    let context: HostContext
    private var tunables: ExtensionTunables { context.tunables }
    private let monitor = Monitor()
    /// Written once to make the reader threads leave.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let threads = DispatchGroup()

    // Guarded by `monitor`.
    private var calls: [Int64: PendingCall] = [:]
    private var lastID: Int64 = 0
    private var inFlight = 0
    private var endReason: String?
    /// `shutdown` has begun: no new call is accepted.
    private var closing = false
    private var outbox: [Outgoing] = []
    /// The writer thread is writing a line it took from `outbox`.
    private var writerBusy = false
    /// `exit` is queued (stdin closes after it), or stdin is broken:
    /// nothing more is written.
    private var inputDone = false
    private var finished = false
    private var answeredInitialize: ExtensionInfo?

    /// `initialize`'s answer, once given.
    var info: ExtensionInfo? {
        get { monitor.withLock { answeredInitialize } }
        set { monitor.withLock { answeredInitialize = newValue } }
    }

    /// Why it ended, once it has.
    var ended: String? { monitor.withLock { endReason } }

    private enum Outgoing {
        case line([UInt8])
        case endOfInput
    }

    init(process: ExtensionProcess, context: HostContext) throws(SpawnError) {
        self.process = process
        self.context = context
        var wake: [Int32] = [-1, -1]
        guard pipe2(&wake, O_CLOEXEC | O_NONBLOCK) == 0 else {
            let reason = String(cString: strerror(errno))
            process.signal(SIGKILL)
            Thread {
                _ = process.reap()
                process.closeDescriptors()
            }.start()
            throw SpawnError("pipe: \(reason)")
        }
        wakeRead = wake[0]
        wakeWrite = wake[1]
    }

    /// Starts the threads. Called once, right after `init`.
    func run() {
        let stdout = WakeablePipe(descriptor: process.output, wake: wakeRead)
        let stderr = WakeablePipe(descriptor: process.errors, wake: wakeRead)
        let stdin = WakeablePipe(descriptor: process.input, wake: wakeRead)
        startThread("out") { self.readMessages(stdout) }
        startThread("err") { ExtensionLog(context: self.context).follow(stderr) }
        startThread("in") { self.writeMessages(stdin) }
        let reaper = Thread { self.reap() }
        reaper.name = "ext-\(context.providerID)-reap"
        reaper.start()
    }

    private func startThread(_ role: String, _ body: @escaping @Sendable () -> Void) {
        threads.enter()
        let thread = Thread {
            body()
            self.threads.leave()
        }
        thread.name = "ext-\(context.providerID)-\(role)"
        thread.start()
    }

    private func reap() {
        let status = process.reap()
        end("the process ended (\(status))")
        threads.wait()
        process.closeDescriptors()
        close(wakeRead)
        close(wakeWrite)
        monitor.withLock {
            finished = true
            monitor.broadcast()
        }
        context.kick()
    }

    // MARK: - The end

    /// Whether the process has been reaped and every thread has left.
    var isFinished: Bool { monitor.withLock { finished } }

    var hasEnded: Bool { monitor.withLock { endReason != nil } }

    /// Waits until `isFinished`, at most until `deadline`.
    @discardableResult
    func waitUntilFinished(until deadline: UInt64) -> Bool {
        monitor.withLock {
            while !finished && MonotonicClock.now < deadline { monitor.wait(until: deadline) }
            return finished
        }
    }

    /// Fails every call still waiting and wakes the threads. The process
    /// itself is the caller's business (`kill`, or it has exited).
    func end(_ reason: String) {
        let ended: Bool = monitor.withLock {
            guard endReason == nil else { return false }
            endReason = reason
            for call in calls.values where call.outcome == nil {
                call.outcome = .failure(ExtensionFailure(.unreachable, "the extension is gone: \(reason)"))
            }
            calls = [:]
            inFlight = 0
            outbox = []
            monitor.broadcast()
            return true
        }
        guard ended else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        context.kick()
    }

    /// Ends the connection and SIGKILLs the process group.
    func kill(_ reason: String) {
        guard !hasEnded else { return }
        context.emit(.killed(reason: reason))
        context.logger.error("extension killed: \(reason)", metadata: ["provider": "\(context.providerID)"])
        end(reason)
        process.signal(SIGKILL)
    }

    func violation(_ reason: String, line: [UInt8]) {
        guard !hasEnded else { return }
        let shown = String(decoding: line.prefix(200), as: UTF8.self)
        context.emit(.protocolViolation(reason: reason, line: shown))
        context.logger.error(
            "extension broke the protocol: \(reason)", metadata: ["provider": "\(context.providerID)"])
        end("protocol violation: \(reason)")
        process.signal(SIGKILL)
    }

    // MARK: - Calls

    /// Sends a request and waits for its answer on the caller's thread.
    func call(
        _ method: String, _ params: JSONValue, control: RequestControl?, limit: CallLimit = .stall,
        usesSlot: Bool = true, lateAnswer: (@Sendable (JSONValue) -> Void)? = nil
    ) throws(ExtensionFailure) -> JSONValue {
        // Registered before any lock: `whenCancelled` runs the handler at
        // once when the control is already cancelled.
        control?.whenCancelled { [weak self] in self?.wakeWaiters() }
        let call = try enqueue(method, params, control: control, usesSlot: usesSlot, lateAnswer: lateAnswer)
        control?.whenCancelled { [weak self, weak call] in
            if let self, let call { self.cancel(call, byCaller: true) }
        }
        return try wait(for: call, limit: limit)
    }

    private func wakeWaiters() {
        monitor.withLock { monitor.broadcast() }
    }

    private func enqueue(
        _ method: String, _ params: JSONValue, control: RequestControl?, usesSlot: Bool,
        lateAnswer: (@Sendable (JSONValue) -> Void)?
    ) throws(ExtensionFailure) -> PendingCall {
        let slotDeadline = MonotonicClock.deadline(after: tunables.stallLimit)
        let (call, sent) = try monitor.withLock { () throws(ExtensionFailure) -> (PendingCall, Bool) in
            while usesSlot && inFlight >= tunables.maxInFlight && endReason == nil && !closing {
                if control?.isCancelled == true { throw ExtensionFailure(.cancelled, "cancelled") }
                if MonotonicClock.now >= slotDeadline {
                    throw ExtensionFailure(
                        .busy, "\(tunables.maxInFlight) requests in flight for \(tunables.stallLimit) s",
                        stalled: true)
                }
                monitor.wait(until: slotDeadline)
            }
            if let endReason { throw ExtensionFailure(.unreachable, "the extension is gone: \(endReason)") }
            if closing && usesSlot { throw ExtensionFailure(.unreachable, "the extension is shutting down") }
            if control?.isCancelled == true { throw ExtensionFailure(.cancelled, "cancelled") }
            lastID += 1
            let line = OutgoingMessage.request(id: lastID, method: method, params: params)
            guard line.count - 1 <= tunables.lineLimit else {
                throw ExtensionFailure(.invalidParams, "\(method): the request is longer than the line limit")
            }
            let call = PendingCall(
                id: lastID, method: method, control: control, usesSlot: usesSlot, lateAnswer: lateAnswer)
            calls[call.id] = call
            if usesSlot { inFlight += 1 }
            let sent = sendLocked(line)
            return (call, sent)
        }
        if !sent { inputClosed() }
        return call
    }

    private enum Waited {
        case answered(Result<JSONValue, ExtensionFailure>)
        case cancelled
        case stalled
        case timedOut
    }

    private func wait(for call: PendingCall, limit: CallLimit) throws(ExtensionFailure) -> JSONValue {
        let fixedDeadline: UInt64? =
            if case .seconds(let seconds) = limit { MonotonicClock.deadline(after: seconds) } else { nil }
        let stall = MonotonicClock.nanoseconds(tunables.stallLimit)
        let grace = MonotonicClock.nanoseconds(tunables.cancelGrace)
        let waited: Waited = monitor.withLock {
            while true {
                if let outcome = call.outcome { return .answered(outcome) }
                let now = MonotonicClock.now
                if call.cancelledByCaller, let sent = call.cancelSentAt {
                    if now >= sent &+ grace {
                        call.abandoned = true
                        return .cancelled
                    }
                    monitor.wait(until: sent &+ grace)
                    continue
                }
                let due = fixedDeadline ?? call.lastSignOfLife &+ stall
                if now >= due {
                    call.abandoned = true
                    return fixedDeadline == nil ? .stalled : .timedOut
                }
                monitor.wait(until: due)
            }
        }
        switch waited {
        case .answered(let outcome): return try outcome.get()
        case .cancelled: throw ExtensionFailure(.cancelled, "\(call.method): cancelled")
        case .timedOut:
            throw ExtensionFailure(.unreachable, "\(call.method): no answer within the time limit", stalled: true)
        case .stalled:
            cancel(call, byCaller: false)
            context.emit(.stalled(method: call.method, seconds: tunables.stallLimit))
            throw ExtensionFailure(
                .busy, "\(call.method): no answer and no progress for \(tunables.stallLimit) s", stalled: true)
        }
    }

    /// Sends `$/cancel` for `call` (once).
    private func cancel(_ call: PendingCall, byCaller: Bool) {
        // 0: not sent; 1: sent; 2: its stdin is closed.
        let sent: Int = monitor.withLock {
            guard call.outcome == nil, call.cancelSentAt == nil, endReason == nil else { return 0 }
            call.cancelSentAt = MonotonicClock.now
            call.cancelledByCaller = byCaller
            return sendLocked(OutgoingMessage.notification("$/cancel", .object(["id": .int(call.id)]))) ? 1 : 2
        }
        if sent == 2 { inputClosed() }
        if sent > 0 { context.kick() }
    }

    /// The earliest time a cancelled call still unanswered makes the host
    /// kill the process, and whether it has come.
    func cancelledCallDeadline(now: UInt64) -> (deadline: UInt64?, overdue: PendingCall?) {
        let limit = MonotonicClock.nanoseconds(tunables.killAfterCancel)
        return monitor.withLock {
            var earliest: UInt64?
            for call in calls.values {
                guard call.outcome == nil, let sent = call.cancelSentAt else { continue }
                let due = sent &+ limit
                if now >= due { return (due, call) }
                earliest = min(earliest ?? due, due)
            }
            return (earliest, nil)
        }
    }

    // MARK: - Shutdown

    /// docs/PROVIDERS.md's life cycle: `shutdown` (its answer comes after
    /// every request in flight is answered), `exit`, then SIGTERM and
    /// SIGKILL for a process that does not go.
    func shutdown() {
        monitor.withLock {
            closing = true
            monitor.broadcast()
        }
        _ = try? call(
            "shutdown", .object([:]), control: nil, limit: .seconds(tunables.shutdownTimeout), usesSlot: false)
        let queued: Bool = monitor.withLock {
            guard endReason == nil else { return false }
            sendLocked(OutgoingMessage.notification("exit", .object([:])))
            outbox.append(.endOfInput)
            inputDone = true
            monitor.broadcast()
            return true
        }
        if queued, process.waitForExit(until: MonotonicClock.deadline(after: tunables.exitTimeout)) == nil {
            context.emit(.killed(reason: "no exit \(tunables.exitTimeout) s after `exit`: SIGTERM"))
            process.signal(SIGTERM)
            if process.waitForExit(until: MonotonicClock.deadline(after: tunables.terminateTimeout)) == nil {
                context.emit(.killed(reason: "no exit \(tunables.terminateTimeout) s after SIGTERM: SIGKILL"))
                process.signal(SIGKILL)
            }
        }
        if !queued { process.signal(SIGKILL) }
        end("stopped")
    }

    // MARK: - Writing

    /// Sends a line (the monitor held): written at once from the calling
    /// thread when nothing is queued and the writer is idle, which saves
    /// a thread hop per call; the pipe is non-blocking, so this never
    /// waits with the lock held. What does not fit goes to the writer.
    /// False when the extension's stdin has no reader any more (EPIPE):
    /// the caller then kills it (`inputClosed`), after unlocking.
    @discardableResult
    private func sendLocked(_ line: [UInt8]) -> Bool {
        guard !inputDone else { return true }
        guard outbox.isEmpty && !writerBusy else {
            outbox.append(.line(line))
            monitor.broadcast()
            return true
        }
        let written = line.withUnsafeBytes { Glibc.write(process.input, $0.baseAddress, $0.count) }
        if written == line.count { return true }
        if written < 0 && errno != EAGAIN && errno != EINTR {
            inputDone = true
            return false
        }
        outbox.append(.line(written > 0 ? Array(line[written...]) : line))
        monitor.broadcast()
        return true
    }

    /// Its stdin was closed while it lives on: it can be told nothing.
    private func inputClosed() {
        kill("it closed its standard input")
    }

    private func writeMessages(_ stdin: WakeablePipe) {
        while true {
            let next: Outgoing? = monitor.withLock {
                writerBusy = false
                while outbox.isEmpty && endReason == nil { monitor.wait(until: MonotonicClock.deadline(after: 3600)) }
                guard endReason == nil else { return nil }
                writerBusy = true
                return outbox.removeFirst()
            }
            switch next {
            case .line(let bytes)?:
                // A reader that is gone or stuck: the reaper or a stall ends it.
                if !stdin.write(bytes) {
                    monitor.withLock { inputDone = true }
                    if !hasEnded { inputClosed() }
                    return
                }
            case .endOfInput?:
                process.closeInput()
                return
            case nil: return
            }
        }
    }

    // MARK: - Reading

    private func readMessages(_ stdout: WakeablePipe) {
        var splitter = LineSplitter(limit: tunables.lineLimit)
        var notifications = NotificationGate(context: context)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 8)
        defer { buffer.deallocate() }
        while !hasEnded {
            let read = stdout.read(into: buffer, idle: 1000)
            if case .idle = read {
                notifications.reportDropped()
                continue
            }
            guard case .bytes(let count) = read else { break }
            let pieces = splitter.feed(
                UnsafeBufferPointer(start: buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count: count))
            for piece in pieces {
                switch piece {
                case .tooLong(let start):
                    violation("a line longer than \(tunables.lineLimit) bytes", line: start)
                    return
                case .line(let line):
                    if line.allSatisfy({ $0 == 0x20 || $0 == 0x0D || $0 == 0x09 }) { continue }
                    handle(line, &notifications)
                    if hasEnded { return }
                }
            }
        }
        notifications.reportDropped(force: true)
    }

    private func handle(_ line: [UInt8], _ notifications: inout NotificationGate) {
        switch IncomingMessage(line: line) {
        case .violation(let reason): violation(reason, line: line)
        case .response(let id, let answer): answered(id, answer, line)
        case .unattributedError(let failure):
            context.emit(
                .error(
                    method: "(a line the extension could not read)", code: failure.code.rawValue,
                    message: failure.message))
        case .notification(let method, let params):
            notifications.handle(method, params, signOfLife: { self.progress($0) })
        }
    }

    private func answered(_ id: Int64, _ answer: Result<JSONValue, ExtensionFailure>, _ line: [UInt8]) {
        let found: PendingCall?? = monitor.withLock {
            guard let call = calls.removeValue(forKey: id) else { return id <= lastID && id > 0 ? .some(nil) : nil }
            if call.usesSlot { inFlight -= 1 }
            call.outcome = answer
            monitor.broadcast()
            return call
        }
        guard let found else {
            violation("a response to no request (id \(id))", line: line)
            return
        }
        guard let call = found else {
            violation("a second response to request \(id)", line: line)
            return
        }
        if case .failure(let failure) = answer {
            context.emit(.error(method: call.method, code: failure.code.rawValue, message: failure.message))
        }
        let late = monitor.withLock { call.abandoned }
        if late, case .success(let result) = answer { call.lateAnswer?(result) }
    }

    /// A `$/progress` for request `id`: a sign of life; its control's
    /// `onProgress` to call, if any.
    private func progress(_ id: Int64) -> RequestControl? {
        monitor.withLock {
            guard let call = calls[id] else { return nil }
            call.lastSignOfLife = MonotonicClock.now
            return call.control
        }
    }
}
