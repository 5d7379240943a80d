import Control
import Foundation
import HTTPTypes
import HostText
import Hummingbird
import HummingbirdTesting
import NIOCore
import Policy
import Synchronization
import Testing

@testable import SettingsPage

/// The page's routes through Hummingbird's router test client (no
/// sockets), on a backend in memory (SPEC S46, S16, S29, S33a).
@Suite struct SettingsRouteTests {
    static let secrets = SettingsSecrets(token: "t0ken", csrf: "csrf0")
    static let hostile = "<script>alert(1)</script>"
    static let ansi = "\u{1b}[31mred"
    static let notUTF8 = HostName.string([0x63, 0x61, 0x66, 0xE9, 0x2E, 0x74, 0x78, 0x74])  // "caf\xe9.txt"

    static func backend() -> FakeBackend {
        FakeBackend(
            .init(
                apps: [App(id: "com.example.editor", name: "Editor"), App(id: "org.other", name: "org.other")],
                providers: [Provider(id: "drive", name: "Drive", directory: "/srv/drive")],
                grants: [
                    Grant(
                        id: 1, app: "com.example.editor", provider: "drive", item: "i1", relativePath: "notes.txt",
                        isDirectory: false, access: .readWrite, state: .active, grantedAt: 1_700_000_000),
                    Grant(
                        id: 2, app: "com.example.editor", provider: "drive", item: "i2", relativePath: hostile,
                        isDirectory: false, access: .read, state: .active, grantedAt: 1_700_000_000),
                    Grant(
                        id: 3, app: "com.example.editor", provider: "drive", item: "i3", relativePath: ansi,
                        isDirectory: true, access: .read, state: .revoked, grantedAt: 1_700_000_000),
                    Grant(
                        id: 4, app: "org.other", provider: "drive", item: "i4", relativePath: notUTF8,
                        isDirectory: false, access: .read, state: .active, grantedAt: 1_700_000_000),
                ],
                events: [
                    Event(
                        time: 1_700_000_100, kind: .start, app: "com.example.editor", pid: 42, path: "drive/notes.txt"),
                    Event(
                        time: 1_700_000_200, kind: .denial, app: "com.example.editor", pid: 42, path: hostile,
                        operation: "open", errno: 1),
                ]))
    }

    typealias Client = any TestClientProtocol

    func withPage(_ backend: FakeBackend, _ test: @Sendable (Client) async throws -> Void) async throws {
        let app = Application(router: SettingsRoutes.router(backend: backend, secrets: Self.secrets))
        try await app.test(.router, test)
    }

    static let cookie: HTTPFields = [.cookie: "\(SettingsSecrets.cookieName)=t0ken"]

    static func post(_ body: String, origin: String? = "http://localhost", cookie: Bool = true) -> HTTPFields {
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        if cookie { headers[.cookie] = "\(SettingsSecrets.cookieName)=t0ken" }
        if let origin { headers[.origin] = origin }
        return headers
    }

    // MARK: who gets in

    @Test func testWithoutTheTokenNothingIsShown() async throws {
        try await withPage(Self.backend()) { client in
            for path in ["/", "/app?id=com.example.editor", "/items", "/providers", "/activity"] {
                let response = try await client.execute(uri: path, method: .get)
                #expect(response.status == .unauthorized, "\(path)")
                #expect(!String(buffer: response.body).contains("com.example.editor"), "\(path)")
            }
        }
    }

    @Test func testTheTokenSetsAStrictHttpOnlyCookieAndLeavesTheAddress() async throws {
        try await withPage(Self.backend()) { client in
            let response = try await client.execute(uri: "/activity?token=t0ken", method: .get)
            #expect(response.status == .seeOther)
            #expect(response.headers[.location] == "/activity")
            let cookie = try #require(response.headers[.setCookie])
            #expect(cookie.hasPrefix("scopefs_settings=t0ken;"), "\(cookie)")
            #expect(cookie.contains("HttpOnly"), "\(cookie)")
            #expect(cookie.contains("SameSite=Strict"), "\(cookie)")
            let page = try await client.execute(uri: "/", method: .get, headers: Self.cookie)
            #expect(page.status == .ok)
            #expect(page.headers[.contentSecurityPolicy]?.contains("frame-ancestors 'none'") == true)
        }
    }

    /// Issue 50: a link that carries the token keeps the rest of its query
    /// through the redirect (`/app?id=...` lost its id and answered 400).
    @Test func testTheTokensRedirectKeepsTheRestOfTheQuery() async throws {
        try await withPage(Self.backend()) { client in
            let response = try await client.execute(
                uri: "/app?id=com.example.editor&token=t0ken&done=revoked", method: .get)
            #expect(response.status == .seeOther)
            #expect(response.headers[.location] == "/app?id=com.example.editor&done=revoked")
            let page = try await client.execute(
                uri: try #require(response.headers[.location]), method: .get, headers: Self.cookie)
            #expect(page.status == .ok)
        }
    }

    @Test func testAnOldOrWrongTokenIsRefused() async throws {
        try await withPage(Self.backend()) { client in
            let old = try await client.execute(uri: "/?token=tokenOfAnEarlierStart", method: .get)
            #expect(old.status == .forbidden)
            #expect(old.headers[.setCookie] == nil)
            let stale = try await client.execute(
                uri: "/", method: .get, headers: [.cookie: "scopefs_settings=tokenOfAnEarlierStart"])
            #expect(stale.status == .unauthorized)
        }
    }

    @Test func testARequestFromAnotherSiteIsRefused() async throws {
        try await withPage(Self.backend()) { client in
            var headers = Self.cookie
            headers[HTTPField.Name("Sec-Fetch-Site")!] = "cross-site"
            let response = try await client.execute(uri: "/", method: .get, headers: headers)
            #expect(response.status == .forbidden)
        }
    }

    @Test func testAnAppProcessIsRefusedEvenWithTheCookie() async throws {
        let app = Application(
            router: SettingsRoutes.router(backend: Self.backend(), secrets: Self.secrets) { _ in "an app process" })
        try await app.test(.router) { client in
            let response = try await client.execute(uri: "/", method: .get, headers: Self.cookie)
            #expect(response.status == .forbidden)
            #expect(String(buffer: response.body).contains("an app process"))
        }
    }

    /// Issue 46, 5d: the peer check walks /proc and asks the daemon (130-350
    /// ms a request on a busy machine), so a request without this start's
    /// token or cookie is refused before it; one with either still gets it.
    @Test func testARequestWithoutTheTokenOrCookieIsRefusedBeforeThePeerCheck() async throws {
        let checks = Mutex(0)
        let router = SettingsRoutes.router(backend: Self.backend(), secrets: Self.secrets) { _ in
            checks.withLock { $0 += 1 }
            return nil
        }
        try await Application(router: router).test(.router) { client in
            let refused: [(String, HTTPFields)] = [
                ("/", [:]),
                ("/app?app=com.example.editor", [.cookie: "\(SettingsSecrets.cookieName)=tokenOfAnEarlierStart"]),
                ("/?token=guess", [:]),
                ("/activity/events?app=com.example.editor", [:]),
            ]
            for (uri, headers) in refused {
                let response = try await client.execute(uri: uri, method: .get, headers: headers)
                #expect(response.status == .unauthorized || response.status == .forbidden, "\(uri)")
            }
            #expect(checks.withLock { $0 } == 0)
            let entered = try await client.execute(uri: "/?token=t0ken", method: .get)
            #expect(entered.status == .seeOther)
            let page = try await client.execute(uri: "/", method: .get, headers: Self.cookie)
            #expect(page.status == .ok)
            #expect(checks.withLock { $0 } == 2)
        }
    }

    // MARK: changes

    @Test func testRevokeAndRestoreOneGrantThroughTheOwnersCommands() async throws {
        let backend = Self.backend()
        try await withPage(backend) { client in
            let revoke = try await client.execute(
                uri: "/revoke", method: .post, headers: Self.post(""),
                body: ByteBuffer(string: "csrf=csrf0&app=com.example.editor&grant=1"))
            #expect(revoke.status == .seeOther)
            #expect(revoke.headers[.location] == "/app?id=com.example.editor&done=revoked")
            #expect(backend.changes == [.revoke(app: "com.example.editor", grant: 1)])
            let page = try await client.execute(
                uri: "/app?id=com.example.editor&done=revoked", method: .get, headers: Self.cookie)
            let body = String(buffer: page.body)
            #expect(body.contains("next access fails with EPERM"))
            let restore = try await client.execute(
                uri: "/restore", method: .post, headers: Self.post(""),
                body: ByteBuffer(string: "csrf=csrf0&app=com.example.editor"))
            #expect(restore.headers[.location] == "/app?id=com.example.editor&done=restored")
            #expect(backend.changes.last == .restore(app: "com.example.editor", grant: nil))
            #expect(backend.grantStates == [.active, .active, .active, .active])
        }
    }

    @Test func testForgetNeedsItsConfirmationStep() async throws {
        let backend = Self.backend()
        try await withPage(backend) { client in
            let confirm = try await client.execute(
                uri: "/forget?app=com.example.editor&grant=1", method: .get, headers: Self.cookie)
            #expect(confirm.status == .ok)
            #expect(String(buffer: confirm.body).contains("name=\"confirm\" value=\"yes\""))
            let unconfirmed = try await client.execute(
                uri: "/forget", method: .post, headers: Self.post(""),
                body: ByteBuffer(string: "csrf=csrf0&app=com.example.editor&grant=1"))
            #expect(unconfirmed.status == .badRequest)
            #expect(backend.changes == [])
            let confirmed = try await client.execute(
                uri: "/forget", method: .post, headers: Self.post(""),
                body: ByteBuffer(string: "csrf=csrf0&app=com.example.editor&grant=1&confirm=yes"))
            #expect(confirmed.headers[.location] == "/app?id=com.example.editor&done=forgotten")
            #expect(backend.changes == [.forget(app: "com.example.editor", grant: 1)])
        }
    }

    @Test func testAChangeWithoutTheCSRFTokenOrFromAnotherOriginChangesNothing() async throws {
        let backend = Self.backend()
        try await withPage(backend) { client in
            let cases: [(HTTPFields, String, HTTPResponse.Status)] = [
                (Self.post(""), "app=com.example.editor&grant=1", .forbidden),
                (Self.post(""), "csrf=csrf-of-an-earlier-start&app=com.example.editor&grant=1", .forbidden),
                (Self.post("", origin: "http://evil.example"), "csrf=csrf0&app=com.example.editor&grant=1", .forbidden),
                (Self.post("", origin: "http://127.0.0.1:9999"), "csrf=csrf0&app=com.example.editor", .forbidden),
                (Self.post("", origin: nil), "csrf=csrf0&app=com.example.editor&grant=1", .forbidden),
                (Self.post("", cookie: false), "csrf=csrf0&app=com.example.editor&grant=1", .unauthorized),
            ]
            for (headers, body, status) in cases {
                let response = try await client.execute(
                    uri: "/revoke", method: .post, headers: headers, body: ByteBuffer(string: body))
                #expect(response.status == status, "\(body)")
            }
        }
        #expect(backend.changes == [])
        #expect(backend.grantStates == [.active, .active, .revoked, .active])
    }

    @Test func testBadInputGetsAClearErrorAndChangesNothing() async throws {
        let backend = Self.backend()
        try await withPage(backend) { client in
            let posts: [(String, String, HTTPResponse.Status)] = [
                ("/revoke", "csrf=csrf0&app=com.example.editor&grant=abc", .badRequest),
                ("/revoke", "csrf=csrf0&app=com.example.editor&grant=-1", .badRequest),
                ("/revoke", "csrf=csrf0&app=..%2Fetc&grant=1", .badRequest),
                ("/revoke", "csrf=csrf0&grant=1", .badRequest),
                ("/revoke", "csrf=csrf0&app=com.example.editor&app=org.other", .badRequest),
                ("/restore", "csrf=csrf0&app=com.example.editor&grant=%zz", .badRequest),
                ("/restore", "csrf=csrf0&app=com.example.editor%00&grant=1", .badRequest),
                ("/forget", "csrf=csrf0&app=com.example.editor&confirm=maybe", .badRequest),
                ("/revoke", "csrf=csrf0&" + String(repeating: "x=1&", count: 40), .badRequest),
                ("/revoke", String(repeating: "x=1&", count: 5000), .contentTooLarge),
            ]
            for (path, body, status) in posts {
                let response = try await client.execute(
                    uri: path, method: .post, headers: Self.post(""), body: ByteBuffer(string: body))
                #expect(response.status == status, "\(path) \(body.prefix(60))")
                #expect(String(buffer: response.body).contains("Nothing was changed."), "\(String(body.prefix(60)))")
            }
            let gets: [(String, HTTPResponse.Status)] = [
                ("/app", .badRequest), ("/app?id=com.unknown", .notFound), ("/activity?kind=nope", .badRequest),
                ("/activity?app=com.unknown", .notFound), ("/activity?live=2", .badRequest),
                ("/items?provider=nope", .notFound), ("/forget?app=com.example.editor&grant=99", .notFound),
                ("/app?id=com.example.editor&done=%3Cb%3E", .badRequest), ("/nowhere", .notFound),
            ]
            for (path, status) in gets {
                let response = try await client.execute(uri: path, method: .get, headers: Self.cookie)
                #expect(response.status == status, "\(path)")
            }
            let put = try await client.execute(uri: "/revoke", method: .put, headers: Self.cookie)
            #expect(put.status == .methodNotAllowed)
        }
        #expect(backend.changes == [])
    }

    // MARK: what is shown

    @Test func testHostileNamesAreTextShownAsLsB() async throws {
        try await withPage(Self.backend()) { client in
            for path in ["/app?id=com.example.editor", "/app?id=org.other", "/items", "/activity"] {
                let body = String(buffer: try await client.execute(uri: path, method: .get, headers: Self.cookie).body)
                #expect(!body.contains("<script>"), "\(path)")
                #expect(!body.contains("\u{1b}"), "\(path)")
                #expect(!body.unicodeScalars.contains(HostName.string([0xE9]).unicodeScalars.first!), "\(path)")
            }
            let editor = String(
                buffer: try await client.execute(uri: "/app?id=com.example.editor", method: .get, headers: Self.cookie)
                    .body)
            #expect(editor.contains("drive:&lt;script&gt;alert(1)&lt;/script&gt;"))
            #expect(editor.contains("drive:\\x1b[31mred"))
            let other = String(
                buffer: try await client.execute(uri: "/app?id=org.other", method: .get, headers: Self.cookie).body)
            #expect(other.contains("drive:caf\\xe9.txt"))
        }
    }

    @Test func testItemsPageFindsAnItemByItsBytes() async throws {
        try await withPage(Self.backend()) { client in
            let response = try await client.execute(
                uri: "/items?provider=drive&path=caf%E9.txt", method: .get, headers: Self.cookie)
            let body = String(buffer: response.body)
            #expect(response.status == .ok)
            #expect(body.contains("org.other"), "\(body)")
            #expect(!body.contains(">com.example.editor<"))
        }
    }

    @Test func testItemsShowTheirPreviewsServedAsPNG() async throws {
        // SPEC S50, issue 53: a granted item with a preview shows it in the
        // Items view, served by the page as image/png; bad requests are
        // refused, and an item without one shows none.
        let backend = Self.backend()
        let png: [UInt8] = ThumbnailLimits.pngSignature + [1, 2, 3]
        backend.store.withLock { $0.previews["drive:notes.txt"] = png }
        try await withPage(backend) { client in
            let list = String(buffer: try await client.execute(uri: "/items", method: .get, headers: Self.cookie).body)
            let address = "/items/preview?app=com.example.editor&amp;provider=drive&amp;path=notes.txt"
            #expect(list.contains("<img class=\"preview\" src=\"\(address)\""), "\(list)")
            #expect(list.components(separatedBy: "<img").count == 2, "one item has a preview")
            let one = String(
                buffer: try await client.execute(
                    uri: "/items?provider=drive&path=notes.txt", method: .get, headers: Self.cookie
                ).body)
            #expect(one.contains("alt=\"preview of notes.txt\""))
            let served = try await client.execute(
                uri: "/items/preview?app=com.example.editor&provider=drive&path=notes.txt", method: .get,
                headers: Self.cookie)
            #expect(served.status == .ok)
            #expect(served.headers[.contentType] == "image/png")
            #expect(Array(buffer: served.body) == png)
            for (uri, status) in [
                (
                    "/items/preview?app=com.example.editor&provider=drive&path=../notes.txt",
                    HTTPResponse.Status.badRequest
                ),
                ("/items/preview?app=org.other&provider=drive&path=notes.txt", .notFound),
                (
                    "/items/preview?app=com.example.editor&provider=drive&path=%3Cscript%3Ealert(1)%3C/script%3E",
                    .notFound
                ),
                ("/items/preview?provider=drive&path=notes.txt", .badRequest),
            ] {
                let refused = try await client.execute(uri: uri, method: .get, headers: Self.cookie)
                #expect(refused.status == status, "\(uri)")
            }
            let anonymous = try await client.execute(
                uri: "/items/preview?app=com.example.editor&provider=drive&path=notes.txt", method: .get)
            #expect(anonymous.status != .ok, "no preview without the token or cookie")
        }
    }

    @Test func testAppsPageAndActivityFilters() async throws {
        try await withPage(Self.backend()) { client in
            let apps = String(buffer: try await client.execute(uri: "/", method: .get, headers: Self.cookie).body)
            #expect(apps.contains("com.example.editor"))
            #expect(apps.contains("2 active, 1 revoked"))
            #expect(apps.contains("2023-11-14T22:16:40.000Z"), "\(apps)")  // the last access: the denial
            let denials = String(
                buffer: try await client.execute(
                    uri: "/activity?app=com.example.editor&kind=denial", method: .get, headers: Self.cookie
                ).body)
            #expect(denials.contains("class=\"event-denial\""))
            #expect(!denials.contains("class=\"event-start\""))
            #expect(denials.contains("errno=EPERM"))
            let live = String(
                buffer: try await client.execute(uri: "/activity?live=1", method: .get, headers: Self.cookie).body)
            #expect(live.contains("http-equiv=\"refresh\""))
        }
    }

    @Test func testAnAppsActivityHasItsAccessesAndDenialsPerHour() async throws {
        let backend = Self.backend()
        let now = Date().timeIntervalSince1970
        backend.store.withLock {
            $0.events += [
                Event(time: now - 5, kind: .start, app: "com.example.editor", pid: 42, path: "a", occurrences: 3),
                Event(time: now - 4, kind: .denial, app: "com.example.editor", pid: 42, path: "b", errno: 1),
                Event(time: now - 3, kind: .start, app: "org.other", pid: 43, path: "c"),
            ]
        }
        try await withPage(backend) { client in
            let page = String(
                buffer: try await client.execute(
                    uri: "/activity?app=com.example.editor", method: .get, headers: Self.cookie
                ).body)
            #expect(page.contains("The last 24 hours"))
            #expect(page.contains("value=\"3\"></meter> <span class=\"count\">3</span>"), "\(page)")
            #expect(page.contains("value=\"1\" high=\"0\"></meter> <span class=\"count\">1</span>"), "\(page)")
            // The 2023 events are outside the day; the other app's are not its.
            #expect(page.components(separatedBy: "<meter").count == 3)
            let all = String(
                buffer: try await client.execute(uri: "/activity", method: .get, headers: Self.cookie).body)
            #expect(!all.contains("The last 24 hours"))
        }
    }

    @Test func testOnlyLoopbackHostsAreServed() {
        for host in ["127.0.0.1:8080", "localhost", "LOCALHOST:1", "[::1]:80", "127.0.0.1"] {
            #expect(AccessGuard.isLoopback(host), "\(host)")
        }
        for host in ["evil.example", "127.0.0.1.evil.example:80", "localhost:x", "10.0.0.1:80", "[::2]:80", ""] {
            #expect(!AccessGuard.isLoopback(host), "\(host)")
        }
    }
}
