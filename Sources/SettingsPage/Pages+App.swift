import CommandErrors
import Control
import Policy
import PolicyStore

/// One app's page: its grants by provider with a revoke or restore switch
/// each, "revoke all" and "restore all", forget (after a confirmation),
/// its references, live processes and recent denials, starts and leaks.
struct AppPage {
    let backend: any SettingsBackend
    let csrf: String

    /// What the last change did, named by the redirect after it (a fixed
    /// word, never text from the address).
    enum Notice: String {
        case revoked, restored, forgotten, unchanged

        var html: HTML {
            switch self {
            case .revoked: "Revoked: the app's next access fails with EPERM."
            case .restored: "Restored: the app's paths, references and bookmarks work again."
            case .forgotten: "Forgotten: the grants and their references are gone."
            case .unchanged: "Nothing changed: the grants were already in that state."
            }
        }
    }

    func render(app id: AppID, notice: Notice?) throws(CommandError) -> HTML {
        guard let app = try backend.apps().first(where: { $0.id == id }) else { throw CommandError.unknownApp(id) }
        let grants = try backend.grants(app: id)
        let references = backend.references(app: id)
        let status = backend.status()
        var body: [HTML] = []
        if let notice { body.append("<p class=\"notice\" role=\"status\">\(notice.html)</p>") }
        body.append("<p>\(AppLabel.html(app))</p>")
        body.append(DaemonLine.html(status))
        if grants.isEmpty {
            body.append("<p>This app holds no grants.</p>")
        } else {
            body.append(
                """
                <p>\(Forms.button("/revoke", label: "Revoke all", app: id, grant: nil, csrf: csrf, danger: true))
                \(Forms.button("/restore", label: "Restore all", app: id, grant: nil, csrf: csrf))
                <a href="/forget\(URLText.query([("app", id)]))">Forget all…</a></p>
                """)
        }
        for (provider, held) in Dictionary(grouping: grants, by: \.provider).sorted(by: { $0.key < $1.key }) {
            body.append("<h2>Provider <span class=\"name\">\(provider)</span></h2>")
            body.append(grantTable(held, references: references))
        }
        body.append(processList(status?.processes.filter { $0.app == id } ?? []))
        let recent = try backend.events(.init(app: id, kinds: [.denial, .start, .leak], limit: 20)).reversed()
        body.append("<h2>Recent denials, starts and leaks</h2>")
        body.append(
            recent.isEmpty
                ? "<p>None recorded.</p>"
                : EventTable.html(Array(recent))
                    + "<p><a href=\"/activity\(URLText.query([("app", id)]))\">All of this app's activity</a></p>")
        return Layout.page("App", section: .apps, HTML(joining: body))
    }

    private func grantTable(_ grants: [Grant], references: [ItemIdentifier: [String]]) -> HTML {
        let rows = grants.sorted { $0.relativePath < $1.relativePath }.map { grant -> HTML in
            let switchForm =
                grant.state == .active
                ? Forms.button("/revoke", label: "Revoke", app: grant.app, grant: grant.id, csrf: csrf, danger: true)
                : Forms.button("/restore", label: "Restore", app: grant.app, grant: grant.id, csrf: csrf)
            let refs = (references[grant.item] ?? []).map { path -> HTML in "<code>\(path)</code><br>" }
            return """
                <tr><td data-label="Grant">\(grant.id)</td>
                <td data-label="Item"><span class="name">\(ItemText.label(grant))</span></td>
                <td data-label="Kind">\(grant.isDirectory ? "folder" : "file")</td>
                <td data-label="Access">\(grant.access.rawValue)</td>
                <td data-label="Lifetime">\(grant.isSession ? "session" : "persistent")</td>
                <td data-label="State" class="state-\(grant.state.rawValue)">\(grant.state.rawValue)</td>
                <td data-label="Granted"><time>\(Layout.time(grant.grantedAt))</time></td>
                <td data-label="References">\(refs.isEmpty ? "none" : HTML(joining: refs))</td>
                <td data-label="Change">\(switchForm)
                <a href="/forget\(URLText.query([("app", grant.app), ("grant", String(grant.id))]))">Forget…</a></td></tr>
                """
        }
        return """
            <div class="scroll"><table><thead><tr><th scope="col">Grant</th><th scope="col">Item</th>
            <th scope="col">Kind</th><th scope="col">Access</th><th scope="col">Lifetime</th><th scope="col">State</th>
            <th scope="col">Granted</th><th scope="col">References</th><th scope="col">Change</th></tr></thead>
            <tbody>\(rows)</tbody></table></div>
            """
    }

    private func processList(_ processes: [DaemonStatus.AppProcessStatus]) -> HTML {
        guard !processes.isEmpty else { return "<h2>Live processes</h2><p>None running.</p>" }
        let rows = processes.sorted { $0.pid < $1.pid }.map { process -> HTML in
            let scopes = process.scopes.map { scope -> HTML in "<code>\(scope.path)</code> ×\(scope.count)<br>" }
            return """
                <tr><td data-label="Pid">\(process.pid)</td>
                <td data-label="Open scopes">\(scopes.isEmpty ? "none" : HTML(joining: scopes))</td></tr>
                """
        }
        return """
            <h2>Live processes</h2><div class="scroll"><table><thead><tr><th scope="col">Pid</th>
            <th scope="col">Open scopes</th></tr></thead><tbody>\(rows)</tbody></table></div>
            """
    }
}

/// An item as the CLI names it: `PROVIDER:RELPATH` (`.` for a root).
enum ItemText {
    static func label(_ grant: Grant) -> String {
        "\(grant.provider):\(grant.relativePath.isEmpty ? "." : grant.relativePath)"
    }
}

/// The page's forms: each a POST with this start's CSRF token.
enum Forms {
    static func button(
        _ action: String, label: String, app: AppID, grant: GrantID?, csrf: String, danger: Bool = false,
        extra: HTML = ""
    ) -> HTML {
        let grantField: HTML = grant.map { "<input type=\"hidden\" name=\"grant\" value=\"\($0)\">" } ?? ""
        let style: HTML = danger ? " class=\"danger\"" : ""
        return """
            <form class="inline" method="post" action="\(action)"><input type="hidden" name="csrf" value="\(csrf)">\
            <input type="hidden" name="app" value="\(app)">\(grantField)\(extra)\
            <button type="submit"\(style)>\(label)</button></form>
            """
    }
}
