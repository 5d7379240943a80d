import Foundation
import Policy

/// An app's accesses (starts) and denials per hour over the last day, as
/// `<meter>` bars: a chart with no inline style (the CSP allows none),
/// read out by screen readers as numbers. `/activity.js` counts the
/// events the live stream brings into it (`EventRow.series`, `.hour`).
enum AccessChart {
    static let hours = 24

    static func html(_ events: [Event], now: Double) -> HTML {
        let start = (now / 3600).rounded(.down) * 3600 - Double(hours - 1) * 3600
        var accesses = [Int](repeating: 0, count: hours)
        var denials = [Int](repeating: 0, count: hours)
        for event in events {
            let bucket = Int(((event.lastTime ?? event.time) - start) / 3600)
            guard (0..<hours).contains(bucket) else { continue }
            guard let series = series(of: event.kind) else { continue }
            if series == "denials" {
                denials[bucket] += event.occurrences
            } else {
                accesses[bucket] += event.occurrences
            }
        }
        let most = max(1, accesses.max() ?? 0, denials.max() ?? 0)
        let rows = (0..<hours).filter { accesses[$0] + denials[$0] > 0 }.map { hour -> HTML in
            """
            <tr><th scope="row" data-label="Hour">\(hourLabel(start + Double(hour) * 3600))</th>
            <td data-label="Accesses"><meter min="0" max="\(most)" value="\(accesses[hour])"></meter> <span class="count">\(accesses[hour])</span></td>
            <td data-label="Denials"><meter class="denials" min="0" max="\(most)" value="\(denials[hour])" high="0"></meter> <span class="count">\(denials[hour])</span></td></tr>
            """
        }
        let none: HTML = rows.isEmpty ? "" : " hidden"
        let hidden: HTML = rows.isEmpty ? " hidden" : ""
        return """
            <h2>The last 24 hours</h2><p id="no-chart"\(none)>No accesses or denials.</p>
            <div class="scroll"\(hidden)><table class="chart"><thead><tr><th scope="col">Hour (UTC)</th>
            <th scope="col">Accesses (starts)</th><th scope="col">Denials</th></tr></thead><tbody>\(rows)</tbody></table></div>
            """
    }

    /// The bars an event counts in: starts are accesses.
    static func series(of kind: Event.Kind) -> String? {
        switch kind {
        case .start: "accesses"
        case .denial: "denials"
        default: nil
        }
    }

    /// An hour's row label: the hour it starts, in UTC.
    static func hourLabel(_ time: Double) -> String {
        Layout.time((time / 3600).rounded(.down) * 3600).prefix(16) + "Z"
    }
}
