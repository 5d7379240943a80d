/// A key press, as the picker understands it (SPEC S21).
enum Key: Equatable, Sendable {
    case up, down, left, right
    case pageUp, pageDown, home, end
    case enter, backspace, escape, space
    /// Ctrl-C: the terminal is raw, so it arrives as a byte, not as SIGINT.
    case interrupt
    /// Ctrl-L: redraw.
    case redraw
    /// A printable character other than space.
    case character(Character)
    /// The terminal changed size (not a key: the reader reports it in band).
    case resize
    /// End of input: the terminal went away.
    case endOfInput
    /// Anything else (function keys, Alt combinations, other control bytes).
    case other
}

/// Turns the bytes of one key press into a `Key`. Pure: `Terminal` reads
/// one complete sequence (a byte, an escape sequence, or a UTF-8 character)
/// and hands it here.
enum KeyDecoder {
    static func decode(_ bytes: [UInt8]) -> Key {
        guard let first = bytes.first else { return .other }
        if first == 0x1B { return bytes.count == 1 ? .escape : escapeSequence(Array(bytes.dropFirst())) }
        if bytes.count == 1 {
            switch first {
            case 0x0D, 0x0A: return .enter
            case 0x7F, 0x08: return .backspace
            case 0x20: return .space
            case 0x03: return .interrupt
            case 0x0C: return .redraw
            case 0x0E: return .down  // Ctrl-N
            case 0x10: return .up  // Ctrl-P
            case 0x21...0x7E: return .character(Character(Unicode.Scalar(first)))
            default: return .other
            }
        }
        if let text = String(validating: bytes, as: UTF8.self), text.count == 1, let character = text.first {
            return .character(character)
        }
        return .other
    }

    /// `rest` follows ESC: "[A", "OA", "[5~", "[1;5A", ...
    private static func escapeSequence(_ rest: [UInt8]) -> Key {
        guard let introducer = rest.first, let final = rest.last, rest.count >= 2 else { return .other }
        guard introducer == UInt8(ascii: "[") || introducer == UInt8(ascii: "O") else { return .other }
        switch final {
        case UInt8(ascii: "A"): return .up
        case UInt8(ascii: "B"): return .down
        case UInt8(ascii: "C"): return .right
        case UInt8(ascii: "D"): return .left
        case UInt8(ascii: "H"): return .home
        case UInt8(ascii: "F"): return .end
        case UInt8(ascii: "~"):
            // The number before the first ';' (modifiers follow it).
            let digits = rest.dropFirst().dropLast().prefix { $0 != UInt8(ascii: ";") }
            switch String(decoding: digits, as: UTF8.self) {
            case "1", "7": return .home
            case "4", "8": return .end
            case "5": return .pageUp
            case "6": return .pageDown
            default: return .other
            }
        default: return .other
        }
    }

    /// True when `byte` ends a CSI ("ESC [") sequence.
    static func isFinalCSIByte(_ byte: UInt8) -> Bool { (0x40...0x7E).contains(byte) }

    /// The length of a UTF-8 sequence that starts with `byte` (1 for ASCII
    /// and for stray bytes).
    static func utf8Length(startingWith byte: UInt8) -> Int {
        switch byte {
        case 0xC2...0xDF: return 2
        case 0xE0...0xEF: return 3
        case 0xF0...0xF4: return 4
        default: return 1
        }
    }
}
