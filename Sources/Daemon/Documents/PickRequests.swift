import Control
import Foundation
import Glibc
import Policy
import Synchronization

/// Matches apps' pick requests with the owner's agents. Requests queue in
/// arrival order; an agent takes the oldest one not yet taken, then
/// answers it. An app process waits on its own connection until the answer
/// comes, the agent goes away, or the request times out.
public final class PickBroker: Sendable {
    public enum Outcome: Sendable, Equatable {
        case answered(PickAnswer)
        case noAgent
        case timedOut
        case tooMany
    }

    /// An agent counts as present while it waits for a request, and for
    /// this long after its last poll (it polls again at once after each).
    static let agentGrace: Double = 1.5
    /// Requests one app may have waiting at once (an app is hostile: it
    /// must not bury the owner's agent in requests).
    static let maximumPendingPerApp = 4

    private struct Waiting {
        var pending: PendingPick
        var takenBy: UInt64?
        var answer: PickAnswer?
    }

    private struct State {
        var nextID: UInt64 = 1
        var queue: [UInt64: Waiting] = [:]
        var agentsWaiting = 0
        var lastAgentPoll: Double = -.infinity
    }

    private let state = Mutex(State())
    private let changed = NSCondition()

    public init() {}

    /// An agent is present while it polls, and while it deliberates on a
    /// request it took (its process alive): the user may take minutes to
    /// choose, and requests queued behind that one wait for the agent, up
    /// to their own `waitSeconds` (issue 28 finding 5).
    var agentPresent: Bool {
        state.withLock { state in
            state.agentsWaiting > 0 || Self.now() - state.lastAgentPoll < Self.agentGrace
                || state.queue.values.contains { $0.answer == nil && $0.takenBy.map(Self.isAlive) == true }
        }
    }

    /// Agents are named by their pid (the control peer's).
    private static func isAlive(_ agent: UInt64) -> Bool {
        guard let pid = pid_t(exactly: agent), pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    /// An app's request; blocks until it is answered or `timeout` passes.
    public func submit(_ request: PickRequest, app: AppID, pid: Int32, timeout: Double) -> Outcome {
        guard agentPresent else { return .noAgent }
        let id: UInt64? = state.withLock { state in
            guard state.queue.values.filter({ $0.pending.app == app }).count < Self.maximumPendingPerApp else {
                return nil
            }
            let id = state.nextID
            state.nextID += 1
            state.queue[id] = Waiting(pending: PendingPick(id: id, app: app, pid: pid, request: request))
            return id
        }
        guard let id else { return .tooMany }
        broadcast()
        let deadline = Date().addingTimeInterval(timeout)
        changed.lock()
        defer { changed.unlock() }
        while true {
            if let answer = state.withLock({ $0.queue[id]?.answer }) {
                state.withLock { _ = $0.queue.removeValue(forKey: id) }
                return .answered(answer)
            }
            // Not taken, or taken by an agent that died, and no agent left:
            // nobody will answer.
            let taker = state.withLock { $0.queue[id]?.takenBy }
            let abandoned = !(taker.map(Self.isAlive) ?? false) && !agentPresent
            if abandoned || !changed.wait(until: min(deadline, Date().addingTimeInterval(0.25))) && Date() >= deadline {
                state.withLock { _ = $0.queue.removeValue(forKey: id) }
                return abandoned ? .noAgent : .timedOut
            }
        }
    }

    /// The oldest request no agent has taken, waiting up to `wait` seconds;
    /// only `app`'s when one is named (`scopefs test` answers its app's
    /// requests and leaves other apps' to the owner's agent).
    public func next(agent: UInt64, wait: Double, app: AppID? = nil) -> PendingPick? {
        state.withLock {
            $0.agentsWaiting += 1
            $0.lastAgentPoll = Self.now()
        }
        defer {
            state.withLock {
                $0.agentsWaiting -= 1
                $0.lastAgentPoll = Self.now()
            }
        }
        let deadline = Date().addingTimeInterval(wait)
        changed.lock()
        defer { changed.unlock() }
        while true {
            let taken: PendingPick? = state.withLock { state in
                guard
                    let id = state.queue.filter({
                        $0.value.takenBy == nil && (app == nil || $0.value.pending.app == app)
                    })
                    .keys.min()
                else { return nil }
                state.queue[id]?.takenBy = agent
                return state.queue[id]?.pending
            }
            if let taken { return taken }
            if !changed.wait(until: deadline) { return nil }
        }
    }

    /// An agent's answer to a request it took. False when there is no such
    /// request any more (the app gave up) or another agent took it.
    public func answer(_ id: UInt64, by agent: UInt64, _ answer: PickAnswer) -> Bool {
        let accepted = state.withLock { state in
            guard state.queue[id]?.takenBy == agent, state.queue[id]?.answer == nil else { return false }
            state.queue[id]?.answer = answer
            // An answer is as good as a poll: the agent polls again next,
            // and requests queued meanwhile must not think it gone.
            state.lastAgentPoll = Self.now()
            return true
        }
        if accepted { broadcast() }
        return accepted
    }

    private func broadcast() {
        changed.lock()
        changed.broadcast()
        changed.unlock()
    }

    private static func now() -> Double { Date().timeIntervalSince1970 }
}
