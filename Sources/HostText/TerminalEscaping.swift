/// Names and paths are whatever bytes the backing file system accepts
/// (SPEC S33a), chosen by whoever made the file — possibly a hostile app.
/// Printed raw, a newline in a name forges a line of `scopefs events`, and
/// an ESC sequence drives the terminal. Every text output therefore shows
/// names as `ls -b` does: control characters as backslash escapes, and a
/// backslash doubled, so that the escaped text reads back unambiguously.
/// A byte that is not UTF-8 (held as an escape, see `HostName`) shows as
/// `\xe9`. JSON output stays exact (SPEC S29, S33a: `jsonHostEscaped`).
extension String {
    /// `self` with control characters escaped: `\n`, `\t`, `\r`, `\a`, `\b`,
    /// `\f`, `\v` by name, other C0 characters and DEL as `\x1b` style
    /// escapes, C1 controls and the invisible characters that reorder or
    /// break lines (bidi overrides, line and paragraph separators) as
    /// `\u202e` style escapes, and `\` as `\\`. Text without any of them is
    /// returned as it is, without a copy.
    public var escapedForTerminal: String {
        guard unicodeScalars.contains(where: { $0.needsTerminalEscape }) else { return self }
        var result = ""
        result.reserveCapacity(utf8.count + 8)
        for scalar in unicodeScalars {
            if scalar.needsTerminalEscape {
                result += scalar.terminalEscape
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}

extension Unicode.Scalar {
    fileprivate var needsTerminalEscape: Bool {
        switch value {
        case 0x00...0x1F, 0x5C, 0x7F...0x9F: true
        // Marks and overrides that reorder text, and Unicode's own line breaks.
        case 0x061C, 0x200E, 0x200F, 0x2028...0x202E, 0x2066...0x2069: true
        // A host byte that is not UTF-8.
        case HostName.escapes: true
        default: false
        }
    }

    fileprivate var terminalEscape: String {
        switch value {
        case 0x07: return "\\a"
        case 0x08: return "\\b"
        case 0x09: return "\\t"
        case 0x0A: return "\\n"
        case 0x0B: return "\\v"
        case 0x0C: return "\\f"
        case 0x0D: return "\\r"
        case 0x5C: return "\\\\"
        case 0x00...0x7F: return "\\x" + Self.hex(value, digits: 2)
        case HostName.escapes: return "\\x" + Self.hex(value - HostName.escapeBase, digits: 2)
        default: return "\\u" + Self.hex(value, digits: 4)
        }
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}

extension String {
    /// JSON text (as an encoder wrote it) with every host byte that is not
    /// UTF-8 written as `\udcXX`, the lone surrogate that Python's
    /// `surrogateescape` uses for byte XX: `json.loads` then
    /// `os.fsencode()` gives the exact bytes back (SPEC S33a). A real
    /// character is never a lone surrogate, so nothing else reads as one.
    public var jsonHostEscaped: String {
        guard hasEscapedBytes else { return self }
        var result = ""
        result.reserveCapacity(utf8.count + 16)
        for scalar in unicodeScalars {
            if HostName.escapes.contains(scalar.value) {
                result += "\\udc" + String(scalar.value - HostName.escapeBase, radix: 16)
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
