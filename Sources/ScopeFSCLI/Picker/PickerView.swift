/// One line of the screen: text already fitted to the width, and a style.
struct ScreenLine: Equatable, Sendable {
    enum Style: Equatable, Sendable {
        case plain
        case title
        case location
        case highlighted
        case dim
        case message
        case question
    }

    var text: String
    var style: Style = .plain
}

/// Renders the picker for a terminal of a given size: pure, so the layout
/// can be checked without a terminal.
///
///     row 0            title (what is being chosen, for which app)
///     row 1            location, and the position in the list
///     rows 2..<h-2     the list, scrolled to keep the cursor visible
///     row h-2          message or the y/N question
///     row h-1          keys
enum PickerView {
    static let minimumWidth = 20
    static let minimumHeight = 5

    /// Rows available to the list.
    static func listRows(height: Int) -> Int { max(height - 4, 1) }

    static func render(_ picker: PickerController, width: Int, height: Int) -> [ScreenLine] {
        guard width >= minimumWidth, height >= minimumHeight else {
            let text = TerminalText.fit("Terminal too small", to: max(width, 0))
            return [ScreenLine(text: text, style: .message)]
                + Array(
                    repeating: ScreenLine(text: String(repeating: " ", count: max(width, 0))), count: max(height - 1, 0)
                )
        }
        var lines: [ScreenLine] = []
        lines.append(line(picker.title, width, .title))

        let position = picker.entries.isEmpty ? "" : "\(picker.cursor + 1)/\(picker.entries.count)"
        let locationWidth = width - TerminalText.width(of: position) - 1
        lines.append(
            ScreenLine(
                text: TerminalText.fit(TerminalText.sanitize(picker.location), to: locationWidth) + " " + position,
                style: .location))

        let rows = listRows(height: height)
        lines += listLines(picker, width: width, rows: rows)

        if let confirmation = picker.confirmation {
            lines.append(line(confirmation.question, width, .question))
        } else {
            lines.append(line(picker.message ?? "", width, .message))
        }
        // One column short: writing the bottom right cell scrolls some terminals.
        lines.append(line(picker.help, width - 1, .dim))
        return lines
    }

    private static func line(_ text: String, _ width: Int, _ style: ScreenLine.Style) -> ScreenLine {
        ScreenLine(text: TerminalText.fit(TerminalText.sanitize(text), to: width), style: style)
    }

    private static func listLines(_ picker: PickerController, width: Int, rows: Int) -> [ScreenLine] {
        let blank = ScreenLine(text: String(repeating: " ", count: width))
        guard !picker.entries.isEmpty else {
            var empty = picker.place == .providers ? "(no providers)" : "(empty folder)"
            if picker.canChooseFolder { empty += ": . or Space selects it" }
            return [line("  " + empty, width, .dim)] + Array(repeating: blank, count: rows - 1)
        }
        // The right column: sizes of files, display names of providers.
        let details = picker.entries.map(detail)
        let detailWidth = min(details.map(TerminalText.width).max() ?? 0, width / 3)
        var lines: [ScreenLine] = []
        let first = min(picker.top, max(picker.entries.count - 1, 0))
        for index in first..<min(first + rows, picker.entries.count) {
            let entry = picker.entries[index]
            let isCursor = index == picker.cursor
            let name =
                TerminalText.sanitize(entry.name) + (entry.isFolder ? "/" : "") + (entry.granted ? "  (granted)" : "")
                + (picker.isSelected(entry) ? "  [selected]" : "")
            let nameWidth = width - 2 - (detailWidth > 0 ? detailWidth + 2 : 0)
            var text = (isCursor ? "> " : "  ") + TerminalText.fit(name, to: nameWidth)
            if detailWidth > 0 {
                let detailText = TerminalText.truncate(TerminalText.sanitize(details[index]), to: detailWidth)
                text +=
                    "  " + String(repeating: " ", count: detailWidth - TerminalText.width(of: detailText)) + detailText
            }
            lines.append(ScreenLine(text: text, style: isCursor ? .highlighted : entry.dimmed ? .dim : .plain))
        }
        return lines + Array(repeating: blank, count: rows - lines.count)
    }

    private static func detail(_ entry: PickerEntry) -> String {
        switch entry.kind {
        case .file: return entry.size.map(PickerListing.formatSize) ?? "?"
        case .folder: return ""
        case .provider: return entry.detail ?? ""
        }
    }
}
