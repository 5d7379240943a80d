import Foundation
import HTTPTypes
import Hummingbird

/// Who gets in (SPEC S46), checked before any route runs:
///
/// 1. The Host header names this machine's loopback (`127.0.0.1`,
///    `localhost`, `[::1]`): a DNS-rebound name is refused.
/// 2. A request from another site (`Sec-Fetch-Site: cross-site` or
///    `same-site`, as a page on another local port is) is refused.
/// 3. `GET /?token=T` with this start's token sets the session cookie and
///    redirects to the page without the token in its address; any other
///    request needs the cookie. A wrong or old token is refused.
/// 4. The request does not come from an app process (`peerCheck`), even
///    with the token or the cookie.
/// 5. A change (POST) needs an Origin equal to the page's own and the
///    form's CSRF token (checked by the route, `FormRequest`).
///
/// The checks run cheapest first: the peer check maps the socket to its
/// process through /proc and asks the daemon which app that is, so it runs
/// only for a request that holds this start's token or cookie. Before, it
/// ran first, and a flood of requests without either by another local user
/// made every one cost that walk and slowed the owner's page tenfold
/// (issue 46, 5d). The stylesheet and the script, the same for everyone
/// and saying nothing, need neither.
///
/// Every answer carries headers that keep the page out of frames, caches
/// and other sites' scripts; the page's own script is one same-origin
/// file (`/activity.js`): nothing inline, nothing evaluated.
struct AccessGuard: RouterMiddleware {
    typealias Context = SettingsContext

    let secrets: SettingsSecrets
    /// Why the connecting process may not see the page (an app process),
    /// or nil; the live server maps the socket to its process.
    let peerCheck: @Sendable (SettingsContext) -> String?

    static let loopbackHosts: Set<String> = ["127.0.0.1", "localhost", "[::1]"]

    func handle(
        _ request: Request, context: SettingsContext,
        next: (Request, SettingsContext) async throws -> Response
    ) async throws -> Response {
        var response = try await admit(request, context: context, next: next)
        Self.secure(&response.headers)
        return response
    }

    private func admit(
        _ request: Request, context: SettingsContext,
        next: (Request, SettingsContext) async throws -> Response
    ) async throws -> Response {
        guard let authority = request.head.authority, Self.isLoopback(authority) else {
            return ErrorPage.response(.misdirectedRequest, "This page answers only at 127.0.0.1 or localhost.")
        }
        if let site = request.headers[Self.fetchSite], site == "cross-site" || site == "same-site" {
            return ErrorPage.response(.forbidden, "Requests from other sites are refused.")
        }
        guard request.method == .get || request.method == .head || request.method == .post else {
            return ErrorPage.response(.methodNotAllowed, "Only GET and POST are served.")
        }
        // The stylesheet and the script are the same for everyone and say nothing.
        if request.uri.path == "/style.css" || request.uri.path == "/activity.js" {
            return try await next(request, context)
        }
        if let query = request.uri.query, let fields = try? FormFields(encoded: Substring(query)),
            let token = try? fields.single("token")
        {
            guard request.method == .get, SettingsSecrets.matches(token, secrets.token) else {
                return ErrorPage.response(
                    .forbidden,
                    "This token does not open the page: it is wrong or from an earlier start. Use the address `scopefs settings` printed last."
                )
            }
            if let reason = peerCheck(context) { return ErrorPage.response(.forbidden, reason) }
            return Self.enter(path: request.uri.path, query: query, token: secrets.token)
        }
        guard SettingsSecrets.matches(Self.cookie(request.headers[values: .cookie]), secrets.token) else {
            return ErrorPage.response(
                .unauthorized,
                "Open the page with the address `scopefs settings` printed (it holds this start's token).")
        }
        if let reason = peerCheck(context) { return ErrorPage.response(.forbidden, reason) }
        if request.method == .post {
            guard let origin = request.headers[.origin], origin == "http://" + authority else {
                return ErrorPage.response(.forbidden, "A change must come from this page (its Origin did not match).")
            }
        }
        return try await next(request, context)
    }

    /// The token traded for the cookie; the redirect drops it from the
    /// address bar and the history, and keeps the rest of the query: a
    /// link to `/app?id=APP&token=T` must land on that app's page (issue
    /// 50: it lost `id` and answered 400).
    static func enter(path: String, query: String, token: String) -> Response {
        let rest = query.split(separator: "&").filter { field in
            let name = field.prefix { $0 != "=" }
            return name != "token" && !name.isEmpty
        }
        var target = path.hasPrefix("/") && !path.hasPrefix("//") ? path : "/"
        if !rest.isEmpty { target += "?" + rest.joined(separator: "&") }
        return Response(
            status: .seeOther,
            headers: [
                .location: target,
                .setCookie: "\(SettingsSecrets.cookieName)=\(token); Path=/; HttpOnly; SameSite=Strict",
            ])
    }

    static func cookie(_ headers: [String]) -> String? {
        for header in headers {
            for part in header.split(separator: ";") {
                let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if pair.count == 2, pair[0] == SettingsSecrets.cookieName { return String(pair[1]) }
            }
        }
        return nil
    }

    static func isLoopback(_ authority: String) -> Bool {
        var host = Substring(authority)
        if let colon = host.lastIndex(of: ":"), !host.hasSuffix("]") {
            guard host[host.index(after: colon)...].allSatisfy(\.isNumber) else { return false }
            host = host[..<colon]
        }
        return loopbackHosts.contains(host.lowercased())
    }

    static let fetchSite = HTTPField.Name("Sec-Fetch-Site")!

    static func secure(_ headers: inout HTTPFields) {
        headers[.contentSecurityPolicy] =
            "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        headers[.cacheControl] = "no-store"
    }
}
