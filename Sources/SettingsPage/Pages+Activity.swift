import CommandErrors
import Foundation
import Policy
import PolicyStore

/// The event log, newest first, filterable by app and kind. `live=1`
/// reloads the page every second (a meta refresh: no script needed).
struct ActivityPage {
    let backend: any SettingsBackend

    static let limit = 200

    func render(app: AppID?, kind: Event.Kind?, live: Bool) throws(CommandError) -> HTML {
        let apps = try backend.apps().sorted { $0.id < $1.id }
        if let app, !apps.contains(where: { $0.id == app }) { throw CommandError.unknownApp(app) }
        let kinds = kind.map { Set([$0]) }
        let events = try backend.events(.init(app: app, kinds: kinds, limit: Self.limit)).reversed()
        let appOptions = apps.map { option -> HTML in
            let selected: HTML = option.id == app ? " selected" : ""
            return "<option value=\"\(option.id)\"\(selected)>\(option.id)</option>"
        }
        let kindOptions = Event.Kind.allCases.map { option -> HTML in
            let selected: HTML = option == kind ? " selected" : ""
            return "<option value=\"\(option.rawValue)\"\(selected)>\(option.rawValue)</option>"
        }
        let liveBox: HTML = live ? " checked" : ""
        let form: HTML = """
            <form class="filters" method="get" action="/activity">
            <label>App <select name="app"><option value="">any</option>\(appOptions)</select></label>
            <label>Kind <select name="kind"><option value="">any</option>\(kindOptions)</select></label>
            <label><input type="checkbox" name="live" value="1"\(liveBox)> Follow (reload every second)</label>
            <button type="submit">Show</button></form>
            """
        let names = Dictionary(apps.map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
        let table: HTML = events.isEmpty ? "<p>No events match.</p>" : EventTable.html(Array(events), names: names)
        let head: HTML = live ? "<meta http-equiv=\"refresh\" content=\"1\">" : ""
        var chart: HTML = ""
        if let app {
            let now = Date().timeIntervalSince1970
            let recent = try backend.events(
                .init(app: app, kinds: [.start, .denial], since: now - Double(AccessChart.hours) * 3600, limit: 10_000))
            chart = AccessChart.html(recent, now: now)
        }
        return Layout.page(
            "Activity", section: .activity, head: head,
            "\(form)\(chart)<h2>Events</h2><p class=\"muted\">The newest \(Self.limit) events, as <code>scopefs events</code> shows them.</p>\(table)"
        )
    }
}

/// Events as rows, with the same fields as `scopefs events`.
enum EventTable {
    static func html(_ events: [Event], names: [AppID: String]) -> HTML {
        let rows = events.map { event -> HTML in
            var details: [String] = []
            if let operation = event.operation { details.append("op=\(operation)") }
            if let code = event.errno { details.append("errno=\(Event.errnoName(code))") }
            if let count = event.count { details.append("count=\(count)") }
            if let grant = event.grant { details.append("grant=\(grant)") }
            if event.occurrences > 1 { details.append("×\(event.occurrences)") }
            let time = Layout.time(event.lastTime ?? event.time)
            return """
                <tr class="event-\(event.kind.rawValue)"><td data-label="Time"><time>\(time)</time></td>
                <td data-label="Kind">\(event.kind.rawValue)</td>
                <td data-label="App"><span class="name">\(event.app ?? "-")</span></td>
                <td data-label="Pid">\(event.pid.map(String.init) ?? "-")</td>
                <td data-label="Path"><span class="name">\(event.path ?? "-")</span></td>
                <td data-label="Details">\(details.joined(separator: " "))</td></tr>
                """
        }
        return """
            <div class="scroll"><table class="events"><thead><tr><th scope="col">Time</th><th scope="col">Kind</th>
            <th scope="col">App</th><th scope="col">Pid</th><th scope="col">Path</th><th scope="col">Details</th></tr>
            </thead><tbody>\(rows)</tbody></table></div>
            """
    }
}
