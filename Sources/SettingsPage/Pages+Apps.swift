import CommandErrors
import Control
import Policy
import PolicyStore

/// The Apps page: every app with its grants, references, live processes
/// and last access (issue 36).
struct AppsPage {
    let backend: any SettingsBackend

    func render() throws(CommandError) -> HTML {
        let apps = try backend.apps().sorted { $0.id < $1.id }
        let grants = Dictionary(grouping: try backend.grants(app: nil), by: \.app)
        let status = backend.status()
        let processes = Dictionary(grouping: status?.processes ?? [], by: \.app)
        var rows: [HTML] = []
        for app in apps {
            let held = grants[app.id] ?? []
            let active = held.filter { $0.state == .active }.count
            let references = backend.references(app: app.id).values.reduce(0) { $0 + $1.count }
            let last = try backend.events(.init(app: app.id, kinds: [.start, .denial], limit: 1)).last
            let lastText: HTML = last.map { "<time>\(Layout.time($0.lastTime ?? $0.time))</time>" } ?? "never"
            rows.append(
                """
                <tr><td data-label="App"><a href="/app\(URLText.query([("id", app.id)]))">\(AppLabel.html(app))</a></td>
                <td data-label="Grants">\(active) active, \(held.count - active) revoked</td>
                <td data-label="References">\(references)</td>
                <td data-label="Processes">\(processes[app.id]?.count ?? 0)</td>
                <td data-label="Last access">\(lastText)</td></tr>
                """)
        }
        let table: HTML =
            rows.isEmpty
            ? "<p>No apps yet: add one with <code>scopefs app add ID</code>.</p>"
            : """
            <div class="scroll"><table><thead><tr><th scope="col">App</th><th scope="col">Grants</th>
            <th scope="col">References</th><th scope="col">Processes</th><th scope="col">Last access</th></tr></thead>
            <tbody>\(rows)</tbody></table></div>
            """
        return Layout.page("Apps", section: .apps, "\(DaemonLine.html(status))\(table)")
    }
}

/// An app as the CLI labels it: its id, and its display name when that says more.
enum AppLabel {
    static func html(_ app: App) -> HTML {
        guard !app.name.isEmpty, app.name != app.id else { return "<span class=\"name\">\(app.id)</span>" }
        return "<span class=\"name\">\(app.id)</span> <span class=\"muted\">(\(app.name))</span>"
    }
}

/// Whether a daemon serves the state directory: without one the page shows
/// the store, and a change is made there, as the CLI's would be.
enum DaemonLine {
    static func html(_ status: DaemonStatus?) -> HTML {
        guard let status else {
            return
                "<p class=\"notice\">No daemon serves this state directory: changes go to the store and apply at the next mount.</p>"
        }
        let failure: HTML =
            status.policyFailure.map { " <strong class=\"error\">Serving every grant as revoked: \($0)</strong>" } ?? ""
        return
            "<p class=\"muted\">Mounted at <code>\(status.mountpoint)</code>, daemon pid \(status.pid).\(failure)</p>"
    }
}
