import CommandErrors
import Control
import Policy
import PolicyStore

/// The owner's agent side of app-initiated picking on the control socket
/// (issue 17): taking the next request and answering one. `scopefs agent`
/// and `scopefs test`'s `answer-pick` steps both speak through it.
enum PickAgentClient {
    /// The oldest request no agent has taken, waiting up to `wait` seconds
    /// (nil when none came); only `app`'s when one is named.
    static func next(state: StateDirectory, wait: Double, app: AppID? = nil, timeoutSeconds: Int)
        throws(CommandError) -> PendingPick?
    {
        let response = try ControlClient.send(
            .agentNext(app: app, wait: wait), state: state, timeoutSeconds: timeoutSeconds)
        guard response.ok else {
            throw CommandError(.internalError, response.message ?? "the daemon refused the agent")
        }
        return response.pending
    }

    /// Sends `answer` to the app that asked; false when the app had
    /// stopped waiting (it gave up, or another agent took the request).
    static func answer(_ pending: PendingPick, with answer: PickAnswer, state: StateDirectory) throws(CommandError)
        -> Bool
    {
        try ControlClient.send(.agentAnswer(pick: pending.id, answer: answer), state: state).ok
    }
}

extension PickAnswer {
    /// What the app got, in a word or a list: "cancelled", "failed: WHY"
    /// (with what was placed before a failure), or the paths.
    var summary: String {
        if cancelled { return "cancelled" }
        guard let error else { return paths.joined(separator: " ") }
        return "failed: \(error)" + (paths.isEmpty ? "" : " (placed: \(paths.joined(separator: " ")))")
    }
}
