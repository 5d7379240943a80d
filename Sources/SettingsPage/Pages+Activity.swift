import CommandErrors
import Foundation
import Policy
import PolicyStore

/// The event log, newest first, filterable by app and kind. New events
/// arrive as they are recorded: `/activity.js` follows the page's stream
/// (`LiveActivity`) and adds their rows, without a reload. Without
/// JavaScript, `live=1` reloads the page every second instead (a meta
/// refresh inside `<noscript>`).
struct ActivityPage {
    let backend: any SettingsBackend

    static let limit = 200

    func render(app: AppID?, kind: Event.Kind?, live: Bool) throws(CommandError) -> HTML {
        let apps = try backend.apps().sorted { $0.id < $1.id }
        if let app, !apps.contains(where: { $0.id == app }) { throw CommandError.unknownApp(app) }
        let kinds = kind.map { Set([$0]) }
        // The newest id first: an event recorded while the page renders
        // comes by the stream (twice at worst, and a row is kept per id).
        let newest = try backend.events(.init(limit: 1)).last?.id ?? 0
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
            <label><input type="checkbox" name="live" value="1"\(liveBox)> Without JavaScript: reload every second</label>
            <button type="submit">Show</button></form>
            """
        let stream =
            "/activity/events" + URLText.query([("app", app), ("kind", kind?.rawValue), ("after", String(newest))])
        let table = EventTable.html(Array(events), stream: stream)
        let head: HTML =
            "<script src=\"/activity.js\" defer></script>"
            + (live ? "<noscript><meta http-equiv=\"refresh\" content=\"1\"></noscript>" : "")
        var chart: HTML = ""
        if let app {
            let now = Date().timeIntervalSince1970
            let recent = try backend.events(
                .init(app: app, kinds: [.start, .denial], since: now - Double(AccessChart.hours) * 3600, limit: 10_000))
            chart = AccessChart.html(recent, now: now)
        }
        return Layout.page(
            "Activity", section: .activity, head: head,
            """
            \(form)\(chart)<h2>Events</h2><p class="muted">The newest \(Self.limit) events, as <code>scopefs events</code> \
            shows them. <a href="">Reload</a></p>
            <p id="live-state" class="muted" role="status"></p>\(table)
            """
        )
    }
}

/// An event's row: the same fields as `scopefs events`. The page renders
/// it as HTML; the live stream sends it as JSON, for `/activity.js` to put
/// in the same cells with `textContent`. Both show names and paths as
/// `ls -b` does (the HTML interpolation, and `encode(to:)`).
struct EventRow: Encodable {
    let id: Int64
    let kind: String
    let time: String
    let app: String
    let pid: String
    let path: String
    let details: String
    let occurrences: Int
    /// The chart's series this event counts in ("accesses", "denials"),
    /// and the label of its hour there.
    let series: String?
    let hour: String

    init(_ event: Event) {
        var details: [String] = []
        if let operation = event.operation { details.append("op=\(operation)") }
        if let code = event.errno { details.append("errno=\(Event.errnoName(code))") }
        if let count = event.count { details.append("count=\(count)") }
        if let grant = event.grant { details.append("grant=\(grant)") }
        if event.occurrences > 1 { details.append("×\(event.occurrences)") }
        id = event.id ?? 0
        kind = event.kind.rawValue
        time = Layout.time(event.lastTime ?? event.time)
        app = event.app ?? "-"
        pid = event.pid.map(String.init) ?? "-"
        path = event.path ?? "-"
        self.details = details.joined(separator: " ")
        occurrences = event.occurrences
        series = AccessChart.series(of: event.kind)
        hour = AccessChart.hourLabel(event.lastTime ?? event.time)
    }

    enum CodingKeys: String, CodingKey { case id, kind, time, app, pid, path, details, occurrences, series, hour }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(kind, forKey: .kind)
        try container.encode(time, forKey: .time)
        try container.encode(app.escapedForTerminal, forKey: .app)
        try container.encode(pid, forKey: .pid)
        try container.encode(path.escapedForTerminal, forKey: .path)
        try container.encode(details.escapedForTerminal, forKey: .details)
        try container.encode(occurrences, forKey: .occurrences)
        try container.encodeIfPresent(series, forKey: .series)
        try container.encode(hour, forKey: .hour)
    }

    var html: HTML {
        """
        <tr class="event-\(kind)" data-id="\(id)" data-occurrences="\(occurrences)"><td data-label="Time"><time>\(time)</time></td>
        <td data-label="Kind">\(kind)</td>
        <td data-label="App"><span class="name">\(app)</span></td>
        <td data-label="Pid">\(pid)</td>
        <td data-label="Path"><span class="name">\(path)</span></td>
        <td data-label="Details">\(details)</td></tr>
        """
    }
}

/// Events as rows, newest first. With a stream: the table the live view
/// adds rows to (there, hidden, while nothing matches).
enum EventTable {
    static func html(_ events: [Event], stream: String? = nil) -> HTML {
        let head: HTML = """
            <table class="events"><thead><tr><th scope="col">Time</th><th scope="col">Kind</th>
            <th scope="col">App</th><th scope="col">Pid</th><th scope="col">Path</th><th scope="col">Details</th></tr>
            </thead><tbody>
            """
        let rows = HTML(joining: events.map { EventRow($0).html })
        guard let stream else { return "<div class=\"scroll\">\(head)\(rows)</tbody></table></div>" }
        let hidden: HTML = events.isEmpty ? " hidden" : ""
        let none: HTML = events.isEmpty ? "" : " hidden"
        return """
            <p id="no-events"\(none)>No events match.</p>
            <div class="scroll" id="live-events" data-stream="\(stream)" data-limit="\(ActivityPage.limit)"\(hidden)>\
            \(head)\(rows)</tbody></table></div>
            """
    }
}
