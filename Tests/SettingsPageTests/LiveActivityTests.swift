import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Policy
import Testing

@testable import SettingsPage

/// The Activity page's live stream (`GET /activity/events`, server-sent
/// events) through Hummingbird's router test client, and its bounds
/// (SPEC S46: the same guard as every route; S40's rule: what a client
/// can grow is bounded; S29: the rows `scopefs events` shows).
@Suite struct LiveActivityTests {
    typealias Client = any TestClientProtocol
    static let editor = "com.example.editor"
    static let stream = "/activity/events?app=com.example.editor"

    func withPage(
        _ backend: FakeBackend, _ live: LiveActivity, _ test: @Sendable (Client) async throws -> Void
    ) async throws {
        let router = SettingsRoutes.router(backend: backend, secrets: SettingsRouteTests.secrets, live: live)
        try await Application(router: router).test(.router, test)
    }

    /// Waits until `count` streams are open (the request runs beside the test).
    static func waitForStreams(_ live: LiveActivity, _ count: Int) async throws {
        for _ in 0..<500 where live.openStreams != count { try await Task.sleep(for: .milliseconds(10)) }
        #expect(live.openStreams == count)
    }

    @Test func testTheStreamIsRefusedWithoutTheTokenWithAnOldOneAndFromAnotherSite() async throws {
        let backend = SettingsRouteTests.backend()
        let live = LiveActivity(backend: backend)
        try await withPage(backend, live) { client in
            let none = try await client.execute(uri: Self.stream, method: .get)
            #expect(none.status == .unauthorized)
            let old = try await client.execute(
                uri: Self.stream, method: .get, headers: [.cookie: "scopefs_settings=tokenOfAnEarlierStart"])
            #expect(old.status == .unauthorized)
            var crossSite = SettingsRouteTests.cookie
            crossSite[HTTPField.Name("Sec-Fetch-Site")!] = "cross-site"
            let other = try await client.execute(uri: Self.stream, method: .get, headers: crossSite)
            #expect(other.status == .forbidden)
            for response in [none, old, other] {
                #expect(response.headers[.contentType]?.hasPrefix("text/html") == true)
                #expect(!String(buffer: response.body).contains("event: activity"))
            }
            #expect(live.openStreams == 0)
        }
    }

    @Test func testAnAppProcessGetsNoStreamEvenWithTheCookie() async throws {
        let backend = SettingsRouteTests.backend()
        let router = SettingsRoutes.router(backend: backend, secrets: SettingsRouteTests.secrets) { _ in
            "an app process"
        }
        try await Application(router: router).test(.router) { client in
            let response = try await client.execute(uri: Self.stream, method: .get, headers: SettingsRouteTests.cookie)
            #expect(response.status == .forbidden)
        }
    }

    @Test func testTheStreamYieldsARecordedEventOfItsFilterOnly() async throws {
        let backend = SettingsRouteTests.backend()
        let live = LiveActivity(backend: backend)
        try await withPage(backend, live) { client in
            async let response = client.execute(uri: Self.stream, method: .get, headers: SettingsRouteTests.cookie)
            try await Self.waitForStreams(live, 1)
            backend.record(Event(time: 1_700_000_300, kind: .start, app: "org.other", pid: 7, path: "drive/x"))
            backend.record(
                Event(
                    time: 1_700_000_400, kind: .denial, app: Self.editor, pid: 42, path: SettingsRouteTests.ansi,
                    operation: "open", errno: 1))
            live.tick()
            live.close()
            let stream = try await response
            #expect(stream.status == .ok)
            #expect(stream.headers[.contentType] == "text/event-stream; charset=utf-8")
            #expect(stream.headers[.contentSecurityPolicy]?.contains("default-src 'none'") == true)
            let body = String(buffer: stream.body)
            #expect(body.hasPrefix("retry: 1000\n"))
            // The editor's denial, as the page's row shows it (ls -b, errno name).
            #expect(body.contains("id: 4\nevent: activity\ndata: {"), "\(body)")
            #expect(body.contains(#""kind":"denial""#), "\(body)")
            #expect(body.contains(#""path":"\\x1b[31mred""#), "\(body)")
            #expect(body.contains(#""details":"op=open errno=EPERM""#), "\(body)")
            #expect(body.contains(#""time":"2023-11-14T22:20:00.000Z""#), "\(body)")
            #expect(!body.contains("\u{1b}"))
            // Not the other app's, and nothing from before the stream opened.
            #expect(!body.contains("id: 3\n") && !body.contains("id: 2\n"), "\(body)")
        }
        #expect(live.openStreams == 0)
    }

    @Test func testLastEventIDResumesAfterThatEvent() async throws {
        let backend = SettingsRouteTests.backend()
        let live = LiveActivity(backend: backend)
        try await withPage(backend, live) { client in
            var headers = SettingsRouteTests.cookie
            headers[SettingsRoutes.lastEventID] = "1"
            async let response = client.execute(uri: "/activity/events?after=0", method: .get, headers: headers)
            try await Self.waitForStreams(live, 1)
            live.close()
            let body = String(buffer: try await response.body)
            #expect(body.contains("id: 2\n") && !body.contains("id: 1\n"), "\(body)")
        }
    }

    @Test func testBadStreamParametersAreAClearError() async throws {
        let backend = SettingsRouteTests.backend()
        let live = LiveActivity(backend: backend)
        try await withPage(backend, live) { client in
            for (uri, status) in [
                ("/activity/events?app=no.such.app", HTTPResponse.Status.notFound),
                ("/activity/events?kind=nonsense", .badRequest),
                ("/activity/events?after=-1", .badRequest),
                ("/activity/events?after=x", .badRequest),
                ("/activity/events?after=1&after=2", .badRequest),
            ] {
                let response = try await client.execute(uri: uri, method: .get, headers: SettingsRouteTests.cookie)
                #expect(response.status == status, "\(uri)")
            }
            #expect(live.openStreams == 0)
        }
    }

    @Test func testStreamsBeyondTheCapGet503() async throws {
        let backend = SettingsRouteTests.backend()
        var limits = LiveActivity.Limits()
        limits.streams = 2
        let live = LiveActivity(backend: backend, limits: limits)
        let held = try (0..<2).map { _ in try live.subscribe(app: nil, kinds: nil, after: nil) }
        try await withPage(backend, live) { client in
            let response = try await client.execute(
                uri: "/activity/events", method: .get, headers: SettingsRouteTests.cookie)
            #expect(response.status == .serviceUnavailable)
            #expect(String(buffer: response.body).contains("2 live views are open already"))
        }
        live.unsubscribe(held[0].id)
        #expect(throws: Never.self) { try live.subscribe(app: nil, kinds: nil, after: nil) }
        live.close()
        #expect(throws: LiveActivity.Refusal.closed) { try live.subscribe(app: nil, kinds: nil, after: nil) }
    }

    @Test func testASlowReaderIsDroppedNotBufferedFor() async throws {
        let backend = SettingsRouteTests.backend()
        var limits = LiveActivity.Limits()
        limits.buffered = 4
        let live = LiveActivity(backend: backend, limits: limits)
        let reader = try live.subscribe(app: nil, kinds: nil, after: nil)
        for second in 0..<10 {
            backend.record(Event(time: 1_700_001_000 + Double(second), kind: .grant, app: Self.editor, grant: 1))
        }
        live.tick()
        #expect(live.openStreams == 0, "a reader 4 messages behind is dropped")
        var received = 0
        for await _ in reader.messages { received += 1 }
        #expect(received == 4, "what was buffered, then the end")
        await reader.end.wait()
    }

    @Test func testAHeartbeatGoesToEveryStream() async throws {
        let backend = SettingsRouteTests.backend()
        var limits = LiveActivity.Limits()
        limits.heartbeatTicks = 2
        let live = LiveActivity(backend: backend, limits: limits)
        let reader = try live.subscribe(app: Self.editor, kinds: [.revoke], after: nil)
        live.tick()
        live.tick()
        live.close()
        var messages: [String] = []
        for await message in reader.messages { messages.append(message) }
        #expect(messages == ["retry: 1000\n: live\n\n", ": heartbeat\n\n"])
    }

    @Test func testAnEventThatGrowsIsSentAgainWithItsID() async throws {
        let backend = SettingsRouteTests.backend()
        let live = LiveActivity(backend: backend)
        let reader = try live.subscribe(app: Self.editor, kinds: nil, after: nil)
        backend.record(Event(time: 1_700_002_000, kind: .denial, app: Self.editor, pid: 1, path: "p", errno: 1))
        live.tick()
        backend.store.withLock { $0.events[$0.events.count - 1].occurrences = 5 }
        live.tick()
        live.tick()  // unchanged: not sent again
        live.close()
        var messages: [String] = []
        for await message in reader.messages { messages.append(message) }
        #expect(messages.count == 3, "\(messages)")
        #expect(messages.dropFirst().allSatisfy { $0.hasPrefix("id: 3\n") })
        #expect(messages.last?.contains(#""occurrences":5"#) == true)
        #expect(messages.last?.contains("×5") == true)
    }

    @Test func testTheActivityPageFollowsItsStreamWithItsOwnScript() async throws {
        let backend = SettingsRouteTests.backend()
        try await withPage(backend, LiveActivity(backend: backend)) { client in
            let page = try await client.execute(
                uri: "/activity?app=com.example.editor&kind=denial&live=1", method: .get,
                headers: SettingsRouteTests.cookie)
            let body = String(buffer: page.body)
            #expect(body.contains("<script src=\"/activity.js\" defer></script>"))
            #expect(
                body.contains("data-stream=\"/activity/events?app=com.example.editor&amp;kind=denial&amp;after=2\""))
            #expect(body.contains("<noscript><meta http-equiv=\"refresh\" content=\"1\"></noscript>"))
            #expect(body.components(separatedBy: "<script").count == 2, "one script, by address, nothing inline")
            let csp = try #require(page.headers[.contentSecurityPolicy])
            #expect(csp.contains("script-src 'self'") && csp.contains("connect-src 'self'"))
            #expect(!csp.contains("unsafe"))
            // The script is static, like the stylesheet.
            let script = try await client.execute(uri: "/activity.js", method: .get)
            #expect(script.status == .ok)
            #expect(script.headers[.contentType] == "text/javascript; charset=utf-8")
            #expect(String(buffer: script.body).contains("new EventSource(live.dataset.stream)"))
            #expect(!String(buffer: script.body).contains("innerHTML"))
        }
    }
}
