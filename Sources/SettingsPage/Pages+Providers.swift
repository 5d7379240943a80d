import CommandErrors
import Control
import Policy

/// The providers, with each extension's state, cache, queue and last
/// error as the daemon reports them (`scopefs status`, SPEC S41).
struct ProvidersPage {
    let backend: any SettingsBackend

    func render() throws(CommandError) -> HTML {
        let providers = try backend.providers().sorted { $0.id < $1.id }
        let status = backend.status()
        let extensions = Dictionary(
            (status?.extensions ?? []).map { ($0.provider, $0) }, uniquingKeysWith: { first, _ in first })
        let grants = Dictionary(grouping: try backend.grants(app: nil), by: \.provider)
        let rows = providers.map { provider -> HTML in
            let kind: HTML
            if let running = extensions[provider.id] {
                let error: HTML = running.lastError.map { "<br><span class=\"error\">last error: \($0)</span>" } ?? ""
                let offline: HTML = running.offline.map { "<br><span class=\"error\">offline: \($0)</span>" } ?? ""
                kind = """
                    extension <code>\(running.extension)</code>: \(running.state)<br>
                    \(running.items) items, \(running.pinned) pinned, \(running.queued) queued, \
                    \(running.conflicts) conflicts, \(running.errors) errors\(offline)\(error)
                    """
            } else if provider.extension != nil {
                kind = "extension (not running: no daemon reports it)"
            } else {
                kind = "local folder"
            }
            let held = grants[provider.id] ?? []
            return """
                <tr><td data-label="Provider"><span class="name">\(provider.id)</span></td>
                <td data-label="Name">\(provider.name)</td>
                <td data-label="Folder"><code>\(provider.directory)</code></td>
                <td data-label="Kind and state">\(kind)</td>
                <td data-label="Grants">\(held.count)</td></tr>
                """
        }
        let table: HTML =
            rows.isEmpty
            ? "<p>No providers yet: add one with <code>scopefs provider add ID DIR</code>.</p>"
            : """
            <div class="scroll"><table><thead><tr><th scope="col">Provider</th><th scope="col">Name</th>
            <th scope="col">Folder</th><th scope="col">Kind and state</th><th scope="col">Grants</th></tr></thead>
            <tbody>\(rows)</tbody></table></div>
            """
        return Layout.page("Providers", section: .providers, "\(DaemonLine.html(status))\(table)")
    }
}
