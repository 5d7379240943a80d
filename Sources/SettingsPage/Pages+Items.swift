import CommandErrors
import Control
import HostText
import Policy
import PolicyStore

/// Which apps hold a given file or folder: a grant on the item itself, or
/// on a folder that contains it. Without a query, every granted item.
struct ItemsPage {
    let backend: any SettingsBackend

    func render(provider: ProviderID?, path: String?) throws(CommandError) -> HTML {
        let providers = try backend.providers().sorted { $0.id < $1.id }
        let grants = try backend.grants(app: nil)
        let previews = backend.previews()
        let options = providers.map { option -> HTML in
            let selected: HTML = option.id == provider ? " selected" : ""
            return "<option value=\"\(option.id)\"\(selected)>\(option.id)</option>"
        }
        let form: HTML = """
            <form class="filters" method="get" action="/items">
            <label>Provider <select name="provider">\(options)</select></label>
            <label>Path <input type="text" name="path" value="\(path ?? "")" placeholder="Documents/report.odt"></label>
            <button type="submit">Who holds it?</button></form>
            """
        guard let provider else {
            let byItem = Dictionary(grouping: grants, by: ItemText.label).sorted { $0.key < $1.key }
            let rows = byItem.map { item, holders -> HTML in
                let apps = holders.map { grant -> HTML in Self.holder(grant, how: "") }
                let preview =
                    holders.first { $0.state == .active }.map { Self.preview($0, path: $0.relativePath, previews) }
                    ?? ""
                return
                    "<tr><td data-label=\"Item\">\(preview)<span class=\"name\">\(item)</span></td><td data-label=\"Held by\">\(apps)</td></tr>"
            }
            let table: HTML =
                rows.isEmpty
                ? "<p>No app holds any item.</p>"
                : "<div class=\"scroll\"><table><thead><tr><th scope=\"col\">Item</th><th scope=\"col\">Held by</th></tr></thead><tbody>\(rows)</tbody></table></div>"
            return Layout.page("Items", section: .items, "\(form)<h2>Every granted item</h2>\(table)")
        }
        guard providers.contains(where: { $0.id == provider }) else {
            throw CommandError(.unknown, "unknown provider \(provider)")
        }
        let wanted = Self.normalized(path ?? "")
        let holding = grants.filter { $0.provider == provider && Self.covers($0, wanted) }
        let holders = holding.map { grant -> HTML in
            grant.relativePath.sameHostName(as: wanted)
                ? Self.holder(grant, how: "the item itself")
                : Self.holder(grant, how: "inside \(ItemText.label(grant))")
        }
        let preview = holding.first { $0.state == .active }.map { Self.preview($0, path: wanted, previews) } ?? ""
        let answer: HTML =
            holders.isEmpty
            ? "<p>No app holds <span class=\"name\">\(provider):\(wanted)</span>.</p>"
            : "\(preview)<ul>\(holders.map { "<li>\($0)</li>" as HTML })</ul>"
        return Layout.page(
            "Items", section: .items,
            "\(form)<h2>Who holds <span class=\"name\">\(provider):\(wanted.isEmpty ? "." : wanted)</span></h2>\(answer)"
        )
    }

    private static func holder(_ grant: Grant, how: String) -> HTML {
        let howText: HTML = how.isEmpty ? "" : " <span class=\"muted\">(\(how))</span>"
        return """
            <a href="/app\(URLText.query([("id", grant.app)]))"><span class="name">\(grant.app)</span></a> \
            <span class="state-\(grant.state.rawValue)">\(grant.state.rawValue)</span> \(grant.access.rawValue)\(howText)<br>
            """
    }

    /// Whether `grant` holds the item at `path`: the item itself, or a folder holding it.
    static func covers(_ grant: Grant, _ path: String) -> Bool {
        grant.relativePath.sameHostName(as: path) || grant.relativePath.isEmpty
            || path.hasHostPrefix(grant.relativePath + "/")
    }

    /// The item's preview (SPEC S50), shown where it has one.
    private static func preview(
        _ grant: Grant, path: String, _ previews: (Grant, String) -> [UInt8]?
    ) -> HTML {
        guard previews(grant, path) != nil else { return "" }
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return
            "<img class=\"preview\" src=\"\(ItemPreview.address(grant, path: path))\" alt=\"preview of \(name)\" width=\"64\" height=\"64\">"
    }

    /// The grant of `app` through which the page shows `provider:path`'s
    /// preview: an active one holding the item. Paths with `..` are refused.
    func previewTarget(app: AppID?, provider: ProviderID?, path: String?) throws(CommandError) -> (Grant, String) {
        guard let app, let provider else { throw CommandError(.usage, "which item? (app=APP&provider=P&path=PATH)") }
        try Identifier.validate(app, what: "app")
        let wanted = Self.normalized(path ?? "")
        guard !wanted.split(separator: "/").contains("..") else { throw CommandError(.usage, "a path without '..'") }
        let grant = try backend.grants(app: app).first {
            $0.provider == provider && $0.state == .active && Self.covers($0, wanted)
        }
        guard let grant else { throw CommandError(.unknown, "\(app) holds no \(provider):\(wanted)") }
        return (grant, wanted)
    }

    /// "a//b/./c/" as "a/b/c"; "." and "" are the provider's root.
    static func normalized(_ path: String) -> String {
        path.split(separator: "/").filter { $0 != "." }.joined(separator: "/")
    }
}
