import CommandErrors
import Control
import Policy
import PolicyStore

/// The control requests of app-initiated picking (issue 17): an app's
/// `pick` waits for the owner's agent; the agent takes requests with
/// `agentNext` and answers with `agentAnswer`. The router (SPEC S5) keeps
/// the agent's operations away from app processes, and `pick` from the owner.
enum PickHandling {
    /// How long an app may wait for the user (seconds), and an agent's poll.
    static let longestPickWait: Double = 600
    static let defaultPickWait: Double = 300
    static let longestAgentPoll: Double = 30

    static func handle(_ command: ControlCommand, from sender: AdmittedSender, picks: PickBroker) -> ControlResponse {
        let peer = sender
        switch command {
        case .pick(let pick, let waitSeconds):
            return sender.asApp(for: command) { caller in
                submit(pick, app: caller.app, pid: caller.pid, waitSeconds: waitSeconds, picks: picks)
            }
        case .pickForApp(let app, let pick, let waitSeconds):
            // The owner's FileChooser portal backend, for the app the portal
            // frontend attributed the request to (the router admits the owner only).
            return submit(pick, app: app, pid: peer.pid, waitSeconds: waitSeconds, picks: picks)
        case .agentNext(let app, let waitSeconds):
            let wait = min(max(waitSeconds ?? longestAgentPoll, 0), longestAgentPoll)
            var response = ControlResponse(ok: true)
            response.pending = picks.next(agent: UInt64(peer.pid), wait: wait, app: app)
            return response
        case .agentAnswer(let id, let answer):
            guard picks.answer(id, by: UInt64(peer.pid), answer) else {
                return .failure(
                    CommandError.Kind.unknown.rawValue, "no pick request \(id) waits for this agent (the app gave up?)")
            }
            return ControlResponse(ok: true)
        default:
            return .failure(CommandError.Kind.internalError.rawValue, "not a pick request")
        }
    }

    /// Queues the request for the owner's agent and waits for its answer.
    private static func submit(
        _ pick: PickRequest, app: AppID, pid: Int32, waitSeconds: Double?, picks: PickBroker
    ) -> ControlResponse {
        if let problem = pick.validated() {
            return .failure(CommandError.Kind.usage.rawValue, "bad pick request: \(problem)")
        }
        let wait = min(max(waitSeconds ?? defaultPickWait, 0), longestPickWait)
        switch picks.submit(pick, app: app, pid: pid, timeout: wait) {
        case .answered(let answer):
            var response = ControlResponse(ok: answer.error == nil)
            if let error = answer.error {
                response.code = CommandError.Kind.refused.rawValue
                response.message = "the picker could not do what was chosen: \(error)"
            }
            response.picked = answer
            return response
        case .noAgent:
            return .failure(
                CommandError.Kind.noDaemon.rawValue,
                "no picker agent is running for this mount; its owner starts one with `scopefs agent`")
        case .timedOut:
            return .failure(
                CommandError.Kind.timedOut.rawValue, "nobody answered the pick request in \(Int(wait)) s")
        case .tooMany:
            return .failure(
                CommandError.Kind.timedOut.rawValue,
                "this app already has \(PickBroker.maximumPendingPerApp) pick requests waiting; try again later")
        }
    }
}
