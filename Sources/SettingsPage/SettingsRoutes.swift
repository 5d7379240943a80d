import CommandErrors
import Control
import Hummingbird
import Policy
import PolicyStore

/// The page's routes. Reads are GETs; each change is a POST that carries
/// the CSRF token and answers with a redirect to the app's page (so a
/// reload does not repeat it). Bad input is a 4xx page, and a refused or
/// failed change a page with the CLI's message; neither changes anything.
public enum SettingsRoutes {
    public static func router(
        backend: any SettingsBackend, secrets: SettingsSecrets, live: LiveActivity? = nil,
        peerCheck: @escaping @Sendable (SettingsContext) -> String? = { _ in nil }
    ) -> Router<SettingsContext> {
        let router = Router(context: SettingsContext.self)
        router.add(middleware: AccessGuard(secrets: secrets, peerCheck: peerCheck))
        router.get("/style.css") { _, _ in Stylesheet.response() }
        addLiveRoutes(to: router, live: live ?? LiveActivity(backend: backend), backend: backend)
        router.get("/") { _, _ in page { () throws(CommandError) in try AppsPage(backend: backend).render() } }
        router.get("/app") { request, _ in
            page { () throws(CommandError) in
                let fields = try query(request)
                guard let id = try fields.optional("id") else { throw CommandError(.usage, "which app? (?id=APP)") }
                let notice = try fields.optional("done").map { (word: String) throws(CommandError) -> AppPage.Notice in
                    guard let notice = AppPage.Notice(rawValue: word) else {
                        throw CommandError(.usage, "unknown notice \(word)")
                    }
                    return notice
                }
                return try AppPage(backend: backend, csrf: secrets.csrf).render(app: id, notice: notice)
            }
        }
        router.get("/forget") { request, _ in
            page { () throws(CommandError) in
                let fields = try query(request)
                let (app, grant) = try target(fields)
                return try ForgetPage(backend: backend, csrf: secrets.csrf).confirm(app: app, grant: grant)
            }
        }
        router.get("/items") { request, _ in
            page { () throws(CommandError) in
                let fields = try query(request)
                return try ItemsPage(backend: backend).render(
                    provider: try fields.optional("provider"), path: try fields.single("path"))
            }
        }
        router.get("/items/preview") { request, _ in
            do throws(CommandError) {
                let fields = try query(request)
                let (grant, path) = try ItemsPage(backend: backend).previewTarget(
                    app: try fields.optional("app"), provider: try fields.optional("provider"),
                    path: try fields.single("path"))
                guard let png = backend.previews()(grant, path) else {
                    throw CommandError(.unknown, "no preview of \(grant.provider):\(path)")
                }
                return Response(
                    status: .ok, headers: [.contentType: "image/png", .cacheControl: "no-store"],
                    body: .init(byteBuffer: ByteBuffer(bytes: png)))
            } catch {
                return ErrorPage.response(error)
            }
        }
        router.get("/providers") { _, _ in
            page { () throws(CommandError) in try ProvidersPage(backend: backend).render() }
        }
        router.get("/activity") { request, _ in
            page { () throws(CommandError) in
                let fields = try query(request)
                let kind = try fields.optional("kind").map { (name: String) throws(CommandError) -> Event.Kind in
                    guard let kind = Event.Kind(rawValue: name) else {
                        throw CommandError(.usage, "unknown event kind \(name)")
                    }
                    return kind
                }
                let live = try fields.optional("live")
                guard live == nil || live == "1" else { throw CommandError(.usage, "live is 1 or absent") }
                return try ActivityPage(backend: backend).render(
                    app: try fields.optional("app"), kind: kind, live: live != nil)
            }
        }
        for (path, action) in [("/revoke", Change.revoke), ("/restore", .restore), ("/forget", .forget)] {
            router.post(RouterPath(path)) { request, _ in
                guard let body = try? await request.body.collect(upTo: FormFields.byteLimit) else {
                    return ErrorPage.response(.contentTooLarge, "The form is larger than the page's forms ever are.")
                }
                return change {
                    () throws(CommandError) in
                    let fields = try form(String(buffer: body), csrf: secrets.csrf)
                    let (app, grant) = try target(fields)
                    if action == .forget, try fields.single("confirm") != "yes" {
                        throw CommandError(.usage, "forgetting needs the confirmation step (confirm=yes)")
                    }
                    return (app, try action.apply(app: app, grant: grant, backend: backend))
                }
            }
        }
        return router
    }

    enum Change {
        case revoke, restore, forget

        func apply(app: AppID, grant: GrantID?, backend: any SettingsBackend) throws(CommandError) -> AppPage.Notice {
            switch self {
            case .revoke:
                let response = try backend.change(.revoke(app: app, grant: grant))
                return OwnerPolicy.changedGrants(response).isEmpty ? .unchanged : .revoked
            case .restore:
                let response = try backend.change(.restore(app: app, grant: grant))
                return OwnerPolicy.changedGrants(response).isEmpty ? .unchanged : .restored
            case .forget:
                let response = try backend.change(.forget(app: app, grant: grant))
                return (response.forgotten ?? []).isEmpty ? .unchanged : .forgotten
            }
        }
    }

    private static func query(_ request: Request) throws(CommandError) -> FormFields {
        guard let query = request.uri.query else { return FormFields() }
        return try FormFields(encoded: Substring(query))
    }

    /// A change's form: well-formed, and carrying this start's CSRF token.
    private static func form(_ body: String, csrf: String) throws(CommandError) -> FormFields {
        let fields = try FormFields(encoded: Substring(body))
        guard SettingsSecrets.matches(try fields.single("csrf"), csrf) else {
            throw CommandError(.refused, "the form's CSRF token is missing or old: reload the page and try again")
        }
        return fields
    }

    /// The app and the grant (nil: all of the app's) a change or a
    /// confirmation names.
    private static func target(_ fields: FormFields) throws(CommandError) -> (AppID, GrantID?) {
        guard let app = try fields.optional("app") else { throw CommandError(.usage, "which app? (app=APP)") }
        try Identifier.validate(app, what: "app")
        guard let text = try fields.optional("grant") else { return (app, nil) }
        guard let grant = GrantID(text), grant > 0 else {
            throw CommandError(.usage, "a grant is a positive number: \(text)")
        }
        return (app, grant)
    }

    private static func page(_ render: () throws(CommandError) -> HTML) -> Response {
        do { return Layout.response(try render()) } catch { return ErrorPage.response(error) }
    }

    private static func change(_ body: () throws(CommandError) -> (AppID, AppPage.Notice)) -> Response {
        do {
            let (app, notice) = try body()
            return Response(
                status: .seeOther,
                headers: [.location: "/app" + URLText.query([("id", app), ("done", notice.rawValue)])])
        } catch {
            return ErrorPage.response(error)
        }
    }
}
