import CommandErrors
import Policy
import PolicyStore

/// The confirmation step before a forget: it names what goes (the grants
/// and the app's references to their items) and that it cannot be undone.
struct ForgetPage {
    let backend: any SettingsBackend
    let csrf: String

    func confirm(app: AppID, grant: GrantID?) throws(CommandError) -> HTML {
        guard try backend.apps().contains(where: { $0.id == app }) else { throw CommandError.unknownApp(app) }
        let grants = try backend.grants(app: app).filter { grant == nil || $0.id == grant }
        if let grant, grants.isEmpty { throw CommandError(.unknown, "\(app) holds no grant \(grant)") }
        let items = grants.map { grant -> HTML in "<li><span class=\"name\">\(ItemText.label(grant))</span></li>" }
        let confirm: HTML = "<input type=\"hidden\" name=\"confirm\" value=\"yes\">"
        return Layout.page(
            "Forget", section: .apps,
            """
            <p>Forget these grants of <span class="name">\(app)</span> for good, with the app's references to their
            items? A revoke can be restored; this cannot.</p>
            <ul>\(items.isEmpty ? ["<li>none</li>"] : items)</ul>
            <p>\(Forms.button("/forget", label: "Forget", app: app, grant: grant, csrf: csrf, danger: true, extra: confirm))
            <a href="/app\(URLText.query([("id", app)]))">Cancel</a></p>
            """)
    }
}
