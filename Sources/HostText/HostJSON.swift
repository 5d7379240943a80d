/// Paths on the control socket are bytes (SPEC S33a, issue 16), but JSON
/// strings are Unicode. The socket follows Python's `surrogateescape`
/// convention: a host byte XX that is not UTF-8 travels as the lone
/// surrogate escape `\udcXX`, so `os.fsencode(json.loads(text))` gives the
/// exact bytes, and a C reader maps `\udcXX` to the byte (docs/API.md
/// "Paths are bytes"). Inside ScopeFS such a byte is the escape scalar of
/// `HostName`; these two functions convert at the socket's edge.
///
/// Foundation's `JSONDecoder` rejects lone surrogates, so `decodable`
/// turns each into the escape scalar before decoding; `String.jsonHostEscaped`
/// writes them after encoding.
public enum HostJSON {
    /// JSON text as a client wrote it, made decodable by Foundation with
    /// every host byte as `HostName`'s escape: `\udcXX` (not the low half
    /// of a surrogate pair) becomes byte XX; a raw byte that is not UTF-8
    /// becomes its escape too (a client may send the raw bytes); and a real
    /// character in the escapes' range, raw or as a surrogate pair, becomes
    /// the escapes of its four bytes, as `HostName.string` holds it, so that
    /// it does not read as a stray byte.
    public static func decodable<Text: Collection<UInt8>>(_ text: Text) -> [UInt8] {
        let bytes = Array(text)
        // The common case: nothing to convert (no backslash-u, all ASCII).
        if !bytes.contains(where: { $0 >= 0x80 }) && !containsUnicodeEscape(bytes) { return bytes }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 16)
        var run: [UInt8] = []  // raw bytes of the string being read, since the last escape
        func flush() {
            if run.contains(where: { $0 >= 0x80 }) { out += HostName.string(run).utf8 } else { out += run }
            run.removeAll(keepingCapacity: true)
        }
        var inString = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard inString else {
                out.append(byte)
                if byte == UInt8(ascii: "\"") { inString = true }
                index += 1
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                flush()
                out.append(byte)
                inString = false
                index += 1
            case UInt8(ascii: "\\"):
                flush()
                index += escapeSequence(bytes, at: index, into: &out)
            default:
                run.append(byte)
                index += 1
            }
        }
        flush()
        return out
    }

    /// Copies or converts the escape sequence at `index` (on its backslash)
    /// into `out`; returns its length.
    private static func escapeSequence(_ bytes: [UInt8], at index: Int, into out: inout [UInt8]) -> Int {
        guard index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u"), let value = hex4(bytes, index + 2) else {
            out += bytes[index..<min(index + 2, bytes.count)]
            return 2
        }
        if (0xD800...0xDBFF).contains(value), index + 11 < bytes.count, bytes[index + 6] == UInt8(ascii: "\\"),
            bytes[index + 7] == UInt8(ascii: "u"), let low = hex4(bytes, index + 8), (0xDC00...0xDFFF).contains(low)
        {
            let scalar = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
            if HostName.escapes.contains(scalar), let real = Unicode.Scalar(scalar) {
                out += HostName.string(Array(String(real).utf8)).utf8
            } else {
                out += bytes[index..<index + 12]
            }
            return 12
        }
        if (0xDC80...0xDCFF).contains(value), let escape = Unicode.Scalar(HostName.escapeBase + (value & 0xFF)) {
            out += String(escape).utf8
        } else {
            out += bytes[index..<index + 6]
        }
        return 6
    }

    private static func hex4(_ bytes: [UInt8], _ start: Int) -> UInt32? {
        guard start + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for byte in bytes[start..<start + 4] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    private static func containsUnicodeEscape(_ bytes: [UInt8]) -> Bool {
        var index = 0
        while index + 1 < bytes.count {
            if bytes[index] == UInt8(ascii: "\\") {
                if bytes[index + 1] == UInt8(ascii: "u") { return true }
                index += 2
            } else {
                index += 1
            }
        }
        return false
    }

    /// Encoded JSON (valid UTF-8, as an encoder wrote it) with every host
    /// byte as `\udcXX` (`String.jsonHostEscaped`).
    public static func escaped<Text: Collection<UInt8>>(_ text: Text) -> [UInt8] {
        let string = String(decoding: text, as: UTF8.self)
        guard string.hasEscapedBytes else { return Array(text) }
        return Array(string.jsonHostEscaped.utf8)
    }
}
