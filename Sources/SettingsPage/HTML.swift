import HostText

/// Markup whose interpolated text is always escaped: a `String` put into
/// an `HTML` literal is shown as `ls -b` shows a name (control characters,
/// bidi overrides and bytes that are not UTF-8 as backslash escapes, SPEC
/// S29, S33a) and then escaped for HTML, so that an item named
/// `<script>` or `\e[31m` is text on the page, never markup. Only `HTML`
/// values go in as they are; there is no other way to put raw text in.
public struct HTML: Sendable, ExpressibleByStringInterpolation, CustomStringConvertible {
    public private(set) var text: String

    public init(stringLiteral value: String) { text = value }

    public init(stringInterpolation: StringInterpolation) { text = stringInterpolation.text }

    public var description: String { text }

    public static func + (first: HTML, second: HTML) -> HTML { HTML(joining: [first, second]) }

    /// Many fragments, one after the other.
    public init(joining parts: [HTML]) { text = parts.map(\.text).joined() }

    public struct StringInterpolation: StringInterpolationProtocol {
        var text = ""

        public init(literalCapacity: Int, interpolationCount: Int) {
            text.reserveCapacity(literalCapacity + interpolationCount * 16)
        }

        public mutating func appendLiteral(_ literal: String) { text += literal }

        public mutating func appendInterpolation(_ value: String) { text += HTML.escape(value.escapedForTerminal) }

        public mutating func appendInterpolation(_ value: HTML) { text += value.text }

        public mutating func appendInterpolation(_ values: [HTML]) { text += values.map(\.text).joined() }

        public mutating func appendInterpolation<Number: BinaryInteger>(_ value: Number) { text += String(value) }
    }

    /// `&`, `<`, `>`, `"` and `'` as character references: safe in text and
    /// in quoted attribute values alike.
    static func escape(_ text: String) -> String {
        guard text.utf8.contains(where: { "&<>\"'".utf8.contains($0) }) else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count + 16)
        for character in text.unicodeScalars {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.unicodeScalars.append(character)
            }
        }
        return result
    }
}

/// Query and form values in links: percent-encoded, so that any id or path
/// (bytes as `HostName` holds them included) survives the round trip.
enum URLText {
    static func component(_ value: String) -> String {
        var result = ""
        for byte in value.hostBytes {
            if unreserved(byte) {
                result.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                result += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return result
    }

    private static func unreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// `?a=1&b=2` from pairs (nil values left out).
    static func query(_ pairs: [(String, String?)]) -> String {
        let parts = pairs.compactMap { name, value in value.map { "\(name)=\(component($0))" } }
        return parts.isEmpty ? "" : "?" + parts.joined(separator: "&")
    }
}
