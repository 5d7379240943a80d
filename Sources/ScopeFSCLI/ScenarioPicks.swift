import Control
import Daemon
import Foundation
import Policy
import Synchronization

/// The owner's agent for a scenario's `answer-pick` steps: while a step is
/// left, it takes the app's pick requests (only the scenario's app's: other
/// apps' stay for the owner's `scopefs agent`) and keeps them until a step
/// answers one. An app asks only while an agent polls, so polling starts
/// before the app does.
final class ScenarioPicks: Sendable {
    private let state: StateOptions
    private let app: AppID
    private let waiting = Mutex<[PendingPick]>([])
    private let stepsLeft: Atomic<Int>
    private let stopping = Atomic<Bool>(false)
    private let stopped = DispatchSemaphore(value: 0)

    init(state: StateOptions, app: AppID, steps: Int) {
        self.state = state
        self.app = app
        self.stepsLeft = Atomic(steps)
    }

    func start() {
        guard stepsLeft.load(ordering: .relaxed) > 0 else {
            stopped.signal()
            return
        }
        Thread.detachNewThread { [self] in
            // Polls of 0.3 s keep the agent present (PickBroker.agentGrace)
            // and let `stop` end the thread soon.
            while !stopping.load(ordering: .relaxed) && stepsLeft.load(ordering: .relaxed) > 0 {
                do {
                    if let pending = try PickAgentClient.next(
                        state: state.directory, wait: 0.3, app: app, timeoutSeconds: 5)
                    {
                        waiting.withLock { $0.append(pending) }
                    }
                } catch {
                    usleep(100_000)
                }
            }
            stopped.signal()
        }
    }

    /// The oldest request not answered yet, taken from the queue.
    func take() -> PendingPick? {
        waiting.withLock { $0.isEmpty ? nil : $0.removeFirst() }
    }

    /// Answers a request taken with `take`; returns what the app got.
    func answer(_ pending: PendingPick, with choice: AgentScript.Step) -> String {
        stepsLeft.subtract(1, ordering: .relaxed)
        let answer = PickApplier.answer(pending, with: choice, state: state)
        let delivered = (try? PickAgentClient.answer(pending, with: answer, state: state.directory)) ?? false
        return "answer pick \(pending.id) (\(pending.request.mode.rawValue)): \(answer.summary)"
            + (delivered ? "" : " (the app had stopped waiting)")
    }

    /// Ends polling; requests taken but never answered are cancelled, so
    /// no app process waits for an answer that will not come.
    func stop() {
        stopping.store(true, ordering: .relaxed)
        _ = stopped.wait(timeout: .now() + 6)
        while let pending = take() {
            _ = try? PickAgentClient.answer(pending, with: PickAnswer(cancelled: true), state: state.directory)
        }
    }
}
