import CommandErrors
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore

/// What `scopefs pick` does once the user has chosen (SPEC S17–S20).
enum PickerMode: String, CaseIterable, Sendable {
    case open
    case `import`
    case export
    case move

    /// Export and move first choose an item of the app's container, then a
    /// destination folder in a provider.
    var startsInContainer: Bool { self == .export || self == .move }
}

/// One row of a listing.
struct PickerEntry: Equatable, Sendable {
    enum Kind: Equatable, Sendable {
        case folder
        case file
        /// A provider in the list of providers: its root folder.
        case provider
    }

    var name: String
    var kind: Kind
    /// Files only; nil when it cannot be read.
    var size: Int64?
    /// Providers: their display name.
    var detail: String?
    /// The app already holds a grant on this item (`scopefs pick` marks it).
    var granted = false
    /// Not of a type the picker was asked for: shown dimmed, not choosable.
    var dimmed = false

    var isFolder: Bool { kind != .file }
}

/// Where the user is browsing.
enum PickerPlace: Equatable, Sendable {
    /// The list of providers.
    case providers
    /// A folder of a provider; "" is its root.
    case provider(ProviderID, String)
    /// A folder of the app's container; "" is the container itself.
    case container(String)

    /// The folder one level up; nil at the top.
    var parent: PickerPlace? {
        switch self {
        case .providers: return nil
        case .provider(let provider, let path):
            return RelativePath.parent(of: path).map { .provider(provider, $0) } ?? .providers
        case .container(let path):
            return RelativePath.parent(of: path).map { .container($0) }
        }
    }

    /// The name to highlight in the parent after going up.
    var name: String? {
        switch self {
        case .providers: return nil
        case .provider(let provider, let path): return path.isEmpty ? provider : RelativePath.lastComponent(of: path)
        case .container(let path): return path.isEmpty ? nil : RelativePath.lastComponent(of: path)
        }
    }

    /// The place reached by opening `entry` here.
    func child(_ entry: PickerEntry) -> PickerPlace? {
        guard entry.isFolder else { return nil }
        switch self {
        case .providers: return .provider(entry.name, "")
        case .provider(let provider, let path): return .provider(provider, RelativePath.join(path, entry.name))
        case .container(let path): return .container(RelativePath.join(path, entry.name))
        }
    }
}

/// Listings, order and formatting for the picker. No terminal here.
enum PickerListing {
    /// Folders first, then files; each group case-insensitively by name
    /// (ties broken by the exact name, so the order is stable).
    static func sorted(_ entries: [PickerEntry]) -> [PickerEntry] {
        entries.sorted { a, b in
            if a.isFolder != b.isFolder { return a.isFolder }
            let (la, lb) = (a.name.lowercased(), b.name.lowercased())
            return la != lb ? la < lb : a.name < b.name
        }
    }

    /// Hidden files (dot-files) are not shown (SPEC S21).
    static func isHidden(_ name: String) -> Bool { name.utf8.first == UInt8(ascii: ".") }

    /// The entries of a host folder: hidden files skipped, symbolic links
    /// shown as what they point to, sorted.
    static func entries(ofFolder path: String) throws(CommandError) -> [PickerEntry] {
        // readdir, not FileManager: a name that is not UTF-8 is listed as
        // its bytes, not left out (SPEC S33a).
        guard let names = HostFiles.names(in: path) else {
            throw CommandError(.noInput, "cannot list \(path): \(String(cString: strerror(errno)))")
        }
        var entries: [PickerEntry] = []
        for name in names where !isHidden(name) {
            var info = stat()
            let full = path + "/" + name
            guard full.withHostCString({ stat($0, &info) == 0 || lstat($0, &info) == 0 }) else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFDIR: entries.append(PickerEntry(name: name, kind: .folder))
            case S_IFLNK: entries.append(PickerEntry(name: name, kind: .file))  // a dangling link
            default: entries.append(PickerEntry(name: name, kind: .file, size: Int64(info.st_size)))
            }
        }
        return sorted(entries)
    }

    /// The providers, as rows (their root folders).
    static func entries(ofProviders providers: [Provider]) -> [PickerEntry] {
        sorted(providers.map { PickerEntry(name: $0.id, kind: .provider, detail: $0.name == $0.id ? nil : $0.name) })
    }

    /// "512 B", "4.0 KB", "1.2 MB", "3.0 GB" (units of 1024).
    static func formatSize(_ bytes: Int64) -> String {
        if bytes < 1024 { return "\(max(bytes, 0)) B" }
        let units = ["KB", "MB", "GB", "TB", "PB", "EB"]
        var value = Double(bytes) / 1024
        var unit = 0
        // Round first, so that 1023.96 KB shows as "1.0 MB", not "1024.0 KB".
        while (value * 10).rounded() / 10 >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return String(format: "%.1f", value) + " " + units[unit]
    }
}

/// Text for a terminal cell grid: control characters made harmless, widths
/// counted in columns, truncation with an ellipsis.
enum TerminalText {
    /// Control characters escaped as in every text output (SPEC S29,
    /// S33a), so that a file name cannot move the cursor or send escape
    /// sequences to the terminal.
    static func sanitize(_ text: String) -> String { text.escapedForTerminal }

    /// Columns a character takes: 0 for combining marks, 2 for wide (East
    /// Asian, emoji) characters, else 1.
    static func width(of character: Character) -> Int {
        var sawNonZero = false
        for scalar in character.unicodeScalars {
            let value = scalar.value
            if isWide(value) { return 2 }
            if !isZeroWidth(value) { sawNonZero = true }
        }
        return sawNonZero ? 1 : 0
    }

    static func width(of text: String) -> Int { text.reduce(0) { $0 + width(of: $1) } }

    /// At most `columns` columns; a cut text ends with "…".
    static func truncate(_ text: String, to columns: Int) -> String {
        guard columns > 0 else { return "" }
        guard width(of: text) > columns else { return text }
        var result = ""
        var used = 0
        for character in text {
            let w = width(of: character)
            if used + w > columns - 1 { break }
            result.append(character)
            used += w
        }
        return result + "…"
    }

    /// `text` cut or padded with spaces to exactly `columns` columns.
    static func fit(_ text: String, to columns: Int) -> String {
        let cut = truncate(text, to: columns)
        return cut + String(repeating: " ", count: max(0, columns - width(of: cut)))
    }

    private static func isZeroWidth(_ value: UInt32) -> Bool {
        switch value {
        case 0x0300...0x036F, 0x1AB0...0x1AFF, 0x1DC0...0x1DFF, 0x20D0...0x20FF, 0xFE20...0xFE2F,
            0x200B...0x200F, 0xFE00...0xFE0F, 0xE0100...0xE01EF:
            return true
        default: return false
        }
    }

    private static func isWide(_ value: UInt32) -> Bool {
        switch value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
            0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
            0xFFE0...0xFFE6, 0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x2FFFD, 0x30000...0x3FFFD:
            return true
        default: return false
        }
    }
}
