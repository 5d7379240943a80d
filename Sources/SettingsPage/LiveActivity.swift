import CommandErrors
import Foundation
import Policy
import PolicyStore
import Synchronization

/// The Activity page's live view: new events as server-sent events
/// (`GET /activity/events`), the rows `scopefs events` and the page show.
///
/// One reader for every stream: `tick()` (every `period`, by
/// `LiveActivityTicker`; half a second, so a row is on the page within a
/// second of its event) reads the log once after the newest id it has seen, as
/// `scopefs events --follow` does, and hands each event to the streams whose
/// filter it matches. A browser costs a filter and a buffer, not a query.
///
/// Everything a browser (or anything that got past the guard) can grow is
/// bounded (SPEC S40's rule, applied to the page): at most `streams` open
/// at once (more get 503); a stream whose reader falls `buffered` messages
/// behind is dropped, not buffered for; a resume hands out at most
/// `backlog` events; a tick reads at most `batch`. A heartbeat comment
/// every `heartbeatTicks` ticks makes a write fail on a peer that is gone.
public final class LiveActivity: Sendable {
    public struct Limits: Sendable {
        public var period: Duration = .milliseconds(500)
        public var streams = 8
        public var buffered = 256
        /// 15 s.
        public var heartbeatTicks = 30
        public var backlog = 200
        public var batch = 1000

        public init() {}
    }

    public enum Refusal: Error, Equatable {
        /// `streams` are open already.
        case full
        /// The server is stopping.
        case closed
    }

    /// One browser's stream: the messages for it, and its end.
    public struct Subscription: Sendable {
        public let id: Int
        public let messages: AsyncStream<String>
        public let end: StreamEnd
    }

    let backend: any SettingsBackend
    public let limits: Limits
    private let state = Mutex(State())

    private struct State {
        var streams: [Int: Stream] = [:]
        var nextStream = 0
        var closed = false
        /// The newest event id read; nil while no stream is open.
        var newest: Int64?
        /// Occurrences of the newest events, which repeats may still grow
        /// (`EventStore.coalescingLookback`): a grown one is sent again.
        var occurrences: [Int64: Int] = [:]
        var ticks = 0
    }

    private struct Stream {
        let app: AppID?
        let kinds: Set<Event.Kind>?
        /// The newest id this stream has been sent (or asked to start after).
        var after: Int64
        let continuation: AsyncStream<String>.Continuation

        func wants(_ event: Event) -> Bool {
            (app == nil || event.app == app) && (kinds?.contains(event.kind) ?? true)
        }
    }

    public init(backend: any SettingsBackend, limits: Limits = Limits()) {
        self.backend = backend
        self.limits = limits
    }

    /// Opens a stream of `app`'s events of `kinds` (nil: all). `after`: the
    /// newest id the page already shows (the page's render, or the
    /// browser's `Last-Event-ID` on a reconnect); the events after it are
    /// sent first, up to `backlog`. Nil: only what happens from now on.
    public func subscribe(app: AppID?, kinds: Set<Event.Kind>?, after: Int64?) throws -> Subscription {
        try state.withLock { state throws -> Subscription in
            guard !state.closed else { throw Refusal.closed }
            guard state.streams.count < limits.streams else { throw Refusal.full }
            if state.streams.isEmpty {
                // Nobody was listening: start reading from now.
                state.newest = (try? backend.events(.init(limit: 1)).last?.id) ?? 0
                state.occurrences = [:]
            }
            let (messages, continuation) = AsyncStream.makeStream(
                of: String.self, bufferingPolicy: .bufferingOldest(limits.buffered))
            let end = StreamEnd()
            continuation.onTermination = { _ in end.finish() }
            continuation.yield("retry: 1000\n: live\n\n")
            var start = state.newest ?? 0
            if let after {
                let missed = (try? backend.events(.init(app: app, kinds: kinds, afterID: after, limit: limits.backlog)))
                for event in missed ?? [] { continuation.yield(Self.message(event)) }
                start = max(start, after, missed?.last?.id ?? 0)
            }
            let id = state.nextStream
            state.nextStream += 1
            state.streams[id] = Stream(app: app, kinds: kinds, after: start, continuation: continuation)
            return Subscription(id: id, messages: messages, end: end)
        }
    }

    /// Forgets a stream whose response ended.
    public func unsubscribe(_ id: Int) {
        let gone = state.withLock { $0.streams.removeValue(forKey: id) }
        gone?.continuation.finish()
    }

    public var openStreams: Int { state.withLock { $0.streams.count } }

    /// Ends every stream and refuses new ones: the server is stopping.
    public func close() {
        let streams = state.withLock { state -> [Stream] in
            state.closed = true
            defer { state.streams = [:] }
            return Array(state.streams.values)
        }
        for stream in streams { stream.continuation.finish() }
    }

    /// Reads the events recorded since the last tick and sends each to the
    /// streams that want it; every `heartbeatTicks` ticks, a comment to all.
    public func tick() {
        state.withLock { state in
            guard !state.closed, !state.streams.isEmpty, let newest = state.newest else { return }
            state.ticks += 1
            let lookback = Int64(EventStore.coalescingLookback)
            let read = (try? backend.events(.init(afterID: max(0, newest - lookback), limit: limits.batch))) ?? []
            for event in read {
                guard let id = event.id else { continue }
                let isNew = id > newest
                guard isNew || state.occurrences[id].map({ $0 != event.occurrences }) ?? false else { continue }
                state.occurrences[id] = event.occurrences
                let message = Self.message(event)
                for (key, stream) in state.streams where stream.wants(event) && (!isNew || id > stream.after) {
                    send(message, to: key, in: &state)
                    state.streams[key]?.after = max(stream.after, id)
                }
            }
            let latest = max(newest, read.last?.id ?? newest)
            state.newest = latest
            state.occurrences = state.occurrences.filter { $0.key > latest - lookback }
            if state.ticks % max(1, limits.heartbeatTicks) == 0 {
                for key in Array(state.streams.keys) { send(": heartbeat\n\n", to: key, in: &state) }
            }
        }
    }

    /// Queues `message` for a stream; a stream whose reader has fallen
    /// `buffered` messages behind (or gone) is dropped.
    private func send(_ message: String, to key: Int, in state: inout State) {
        guard let stream = state.streams[key] else { return }
        switch stream.continuation.yield(message) {
        case .enqueued: return
        case .dropped, .terminated: fallthrough
        @unknown default:
            state.streams[key] = nil
            stream.continuation.finish()
        }
    }

    /// One event as a server-sent event: `id` is the log's id (a
    /// reconnect's `Last-Event-ID`), `data` the row's texts as JSON.
    static func message(_ event: Event) -> String {
        let row = EventRow(event)
        let data = (try? JSONEncoder().encode(row)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return "id: \(row.id)\nevent: activity\ndata: \(data)\n\n"
    }
}

/// When a stream ended (its messages finished or its reader went away),
/// for the route that must not leave a write hanging after it.
public final class StreamEnd: Sendable {
    private let state = Mutex<(ended: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func finish() {
        let waiters = state.withLock { state in
            state.ended = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    public func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = state.withLock { state in
                if !state.ended { state.waiters.append(continuation) }
                return state.ended
            }
            if ended { continuation.resume() }
        }
    }
}
