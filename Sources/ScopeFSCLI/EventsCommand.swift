import ArgumentParser
import CommandErrors
import FleetStore
import Foundation
import HostText
import Policy
import PolicyStore

struct EventsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "What apps did: grants, revokes, restores, denials, starts, stops, leaks.",
        discussion: """
            Repeats of an event within seconds of each other are one event, shown with ×N (JSON: occurrences, \
            lastTime). Text output escapes control characters in names as `ls -b` does; --json keeps them exact.
            """)
    @OptionGroup var options: StateOptions
    @Option(help: "Only this app's events.", completion: Completions.apps) var app: String?
    // Unconditional: "-60" is a value here, not an option.
    @Option(
        parsing: .unconditional,
        help: "Only events at or after T: ISO 8601, seconds since 1970, or an age: -60, 60s, 5m, 2h, 1d.")
    var since: String?
    @Option(help: "Only events of these kinds (comma-separated, e.g. leak,denial).") var kind: String?
    @Option(help: "At most the newest N events (with --follow, 0 means only new ones).") var limit: Int = 1000
    @Flag(help: "Keep printing new events as they come.") var follow = false
    @Flag(help: "One JSON object per line.") var json = false

    func run() throws {
        try report { () throws(CommandError) in
            guard limit >= 0 else { throw CommandError(.usage, "--limit \(limit): use 0 or more") }
            let backend = try options.backend()
            // An unknown app is an error, as in `privacy` and `query`, not an empty log.
            // The apps are the isolation layer's: on a fleet, its store's;
            // the log is this host's own (docs/CLI.md "A fleet").
            let store = try backend.localEvents()
            let apps = try backend.reader().apps()
            if let app, !apps.contains(where: { $0.id == app }) { throw CommandError.unknownApp(app) }
            let names = AppNames(apps)
            var filter = EventStore.Filter(app: app, kinds: try kinds(), since: try sinceTime(), limit: limit)
            if follow && limit == 0 {
                // Only what happens from now on: start after the newest event.
                filter.afterID = try store.events(.init(limit: 1)).last?.id ?? 0
                filter.limit = nil
            }
            // Occurrences printed of the newest events: while following, an
            // event that absorbs repeats is printed again as it grows.
            var shown: [Int64: Int] = [:]
            while true {
                let events = try store.events(filter)
                for event in events where shown[event.id ?? 0] != event.occurrences {
                    print(json ? Self.json(event, names: names) : Self.line(event, names: names))
                    if follow, let id = event.id { shown[id] = event.occurrences }
                }
                fflush(nil)  // all streams: stdout is not concurrency-safe to name
                guard follow else { return }
                if let last = events.last?.id {
                    let stillGrowing = max(filter.afterID ?? 0, last - Int64(EventStore.coalescingLookback))
                    filter.afterID = stillGrowing
                    shown = shown.filter { $0.key > stillGrowing }
                }
                filter.limit = nil
                usleep(CLITunables.eventFollowPeriod)
            }
        }
    }

    private func kinds() throws(CommandError) -> Set<Event.Kind>? {
        guard let kind else { return nil }
        var kinds: Set<Event.Kind> = []
        for name in kind.split(separator: ",") {
            guard let parsed = Event.Kind(rawValue: String(name)) else {
                throw CommandError(
                    .usage,
                    "unknown event kind \(name); kinds: \(Event.Kind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            kinds.insert(parsed)
        }
        return kinds
    }

    private func sinceTime() throws(CommandError) -> Double? {
        guard let since else { return nil }
        guard let time = Self.time(since, now: Date().timeIntervalSince1970) else {
            throw CommandError(
                .usage,
                "--since \(since): use ISO 8601 (2026-11-22T10:00:00Z), seconds since 1970, or an age (-60, 60s, 5m, 2h, 1d)"
            )
        }
        return time
    }

    /// A point in time: ISO 8601 (with or without a fraction), seconds since
    /// 1970, "-N" seconds ago, or an age with a unit ("90s", "5m", "2h", "1d").
    static func time(_ text: String, now: Double) -> Double? {
        if let seconds = Double(text) { return seconds < 0 ? now + seconds : seconds }
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        if let unit = text.last.flatMap({ units[$0] }), let count = Double(text.dropLast().drop(while: { $0 == "-" })),
            count >= 0
        {
            return now - count * unit
        }
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
        formatter.formatOptions.insert(.withFractionalSeconds)
        return formatter.date(from: text)?.timeIntervalSince1970
    }

    /// One tab-separated line; names and paths escaped (SPEC S29, S33a),
    /// so that a name cannot forge a line or drive the terminal. The app
    /// shows with its display name (`com.example.editor (Editor)`).
    /// One event as a tab-separated line; `milliseconds` (the `scopefs
    /// test` report) gives its times to the millisecond.
    static func line(_ event: Event, names: AppNames, milliseconds: Bool = false) -> String {
        let formatter = ISO8601DateFormatter()
        if milliseconds { formatter.formatOptions.insert(.withFractionalSeconds) }
        let time = formatter.string(from: Date(timeIntervalSince1970: event.time))
        var fields = [
            time, event.kind.rawValue, event.app.map(names.label) ?? "-", event.pid.map(String.init) ?? "-",
            (event.path ?? "-").escapedForTerminal,
        ]
        if let operation = event.operation { fields.append("op=\(operation.escapedForTerminal)") }
        if let code = event.errno { fields.append("errno=\(Event.errnoName(code))") }
        if let count = event.count { fields.append("count=\(count)") }
        if let grant = event.grant { fields.append("grant=\(grant)") }
        if event.occurrences > 1 {
            fields.append("×\(event.occurrences)")
            if let last = event.lastTime {
                fields.append("until=\(formatter.string(from: Date(timeIntervalSince1970: last)))")
            }
        }
        return fields.joined(separator: "\t")
    }

    static func json(_ event: Event, names: AppNames) -> String {
        JSONOutput.text(EventJSON(event, appName: event.app.flatMap(names.name)), .line)
    }
}
