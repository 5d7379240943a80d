import Foundation
import Policy

/// An app's accesses (starts) and denials per hour over the last day, as
/// `<meter>` bars: a chart with neither script nor inline style (the CSP
/// allows neither), read out by screen readers as numbers.
enum AccessChart {
    static let hours = 24

    static func html(_ events: [Event], now: Double) -> HTML {
        let start = (now / 3600).rounded(.down) * 3600 - Double(hours - 1) * 3600
        var accesses = [Int](repeating: 0, count: hours)
        var denials = [Int](repeating: 0, count: hours)
        for event in events {
            let bucket = Int(((event.lastTime ?? event.time) - start) / 3600)
            guard (0..<hours).contains(bucket) else { continue }
            if event.kind == .denial {
                denials[bucket] += event.occurrences
            } else {
                accesses[bucket] += event.occurrences
            }
        }
        let most = max(1, accesses.max() ?? 0, denials.max() ?? 0)
        let rows = (0..<hours).filter { accesses[$0] + denials[$0] > 0 }.map { hour -> HTML in
            let from = Layout.time(start + Double(hour) * 3600).prefix(16) + "Z"
            return """
                <tr><th scope="row" data-label="Hour">\(String(from))</th>
                <td data-label="Accesses"><meter min="0" max="\(most)" value="\(accesses[hour])"></meter> \(accesses[hour])</td>
                <td data-label="Denials"><meter class="denials" min="0" max="\(most)" value="\(denials[hour])" high="0"></meter> \(denials[hour])</td></tr>
                """
        }
        guard !rows.isEmpty else { return "<h2>The last 24 hours</h2><p>No accesses or denials.</p>" }
        return """
            <h2>The last 24 hours</h2><div class="scroll"><table class="chart"><thead><tr><th scope="col">Hour (UTC)</th>
            <th scope="col">Accesses (starts)</th><th scope="col">Denials</th></tr></thead><tbody>\(rows)</tbody></table></div>
            """
    }
}
