import CommandErrors
import HTTPTypes
import Hummingbird
import NIOCore
import Policy
import ServiceLifecycle

/// `GET /activity/events`: the Activity page's stream of new events
/// (server-sent events, `LiveActivity`), behind the same guard as every
/// route (`AccessGuard`: token cookie, Host, other sites, app processes).
extension SettingsRoutes {
    /// How long a stream that ended (dropped, or the server stopping) may
    /// take to write what it holds before its connection is closed under
    /// it: a reader that stopped reading must not hold a write, and with
    /// it the server's shutdown, forever.
    static let drainGrace: Duration = .seconds(1)

    static func addLiveRoutes(to router: Router<SettingsContext>, live: LiveActivity, backend: any SettingsBackend) {
        router.get("/activity.js") { _, _ in ActivityScript.response() }
        router.get("/activity/events") { request, context in
            let filter: (app: AppID?, kinds: Set<Event.Kind>?, after: Int64?)
            do throws(CommandError) {
                filter = try streamFilter(request, backend: backend)
            } catch {
                return ErrorPage.response(error)
            }
            let subscription: LiveActivity.Subscription
            do {
                subscription = try live.subscribe(app: filter.app, kinds: filter.kinds, after: filter.after)
            } catch LiveActivity.Refusal.full {
                return ErrorPage.response(
                    .serviceUnavailable,
                    "\(live.limits.streams) live views are open already, the most the page serves: close one, or reload to see new events."
                )
            } catch {
                return ErrorPage.response(.serviceUnavailable, "The page is stopping.")
            }
            let channel = context.channel
            // A reader that went away: its place is free as soon as the
            // connection is known closed (a failed write, the heartbeat's).
            channel?.closeFuture.whenComplete { _ in live.unsubscribe(subscription.id) }
            return Response(
                status: .ok, headers: [.contentType: "text/event-stream; charset=utf-8"],
                body: ResponseBody { writer in
                    let closer = Task {
                        await subscription.end.wait()
                        try await Task.sleep(for: drainGrace)
                        channel?.close(promise: nil)
                    }
                    defer {
                        closer.cancel()
                        live.unsubscribe(subscription.id)
                    }
                    // SIGTERM: every stream ends, so the server's graceful
                    // shutdown (which waits for open responses) can finish.
                    try await withGracefulShutdownHandler {
                        for await message in subscription.messages {
                            try await writer.write(ByteBuffer(string: message))
                        }
                    } onGracefulShutdown: {
                        live.close()
                    }
                    try await writer.finish(nil)
                })
        }
    }

    /// The stream's filter, as the Activity page's (`app`, `kind`), and
    /// where it resumes: the browser's `Last-Event-ID` on a reconnect, else
    /// the page's `after` (the newest id it was rendered with).
    private static func streamFilter(
        _ request: Request, backend: any SettingsBackend
    ) throws(CommandError) -> (app: AppID?, kinds: Set<Event.Kind>?, after: Int64?) {
        let fields = try request.uri.query.map { (query: String) throws(CommandError) in
            try FormFields(encoded: Substring(query))
        }
        let app = try fields?.optional("app")
        if let app, try !backend.apps().contains(where: { $0.id == app }) { throw CommandError.unknownApp(app) }
        let kinds = try fields?.optional("kind").map { (name: String) throws(CommandError) -> Set<Event.Kind> in
            guard let kind = Event.Kind(rawValue: name) else {
                throw CommandError(.usage, "unknown event kind \(name)")
            }
            return [kind]
        }
        let page = try fields?.optional("after")
        let resume = request.headers[values: lastEventID].last ?? page
        let after = try resume.map { (text: String) throws(CommandError) -> Int64 in
            guard let id = Int64(text), id >= 0 else {
                throw CommandError(.usage, "an event id is a number, 0 or more: \(text)")
            }
            return id
        }
        return (app, kinds, after)
    }

    static let lastEventID = HTTPField.Name("Last-Event-ID")!
}
