import CommandErrors
import HostText

/// The fields of a query string or an `application/x-www-form-urlencoded`
/// body, decoded byte for byte: a percent-escape that is not UTF-8 becomes
/// the `HostName` form of its byte, so an item named with such bytes is
/// found again (SPEC S33a). Malformed input is an error, not a guess.
struct FormFields: Sendable {
    private(set) var values: [String: [String]] = [:]

    /// At most this many fields and bytes: the page's forms have four.
    static let fieldLimit = 32
    static let byteLimit = 16 * 1024

    init() {}

    init(encoded text: Substring) throws(CommandError) {
        guard text.utf8.count <= Self.byteLimit else { throw Self.malformed("the form is too large") }
        let pairs = text.split(separator: "&", omittingEmptySubsequences: true)
        guard pairs.count <= Self.fieldLimit else { throw Self.malformed("too many fields") }
        for pair in pairs {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = try Self.decode(parts[0])
            let value = parts.count > 1 ? try Self.decode(parts[1]) : ""
            values[name, default: []].append(value)
        }
    }

    /// The one value of `name`; two values of a field the page sends once is
    /// an error (a forged form), not a choice between them.
    func single(_ name: String) throws(CommandError) -> String? {
        guard let found = values[name] else { return nil }
        guard found.count == 1 else { throw Self.malformed("\(name) is given more than once") }
        return found[0]
    }

    /// A field's value, with an empty one taken as absent (a form's "any").
    func optional(_ name: String) throws(CommandError) -> String? {
        guard let value = try single(name), !value.isEmpty else { return nil }
        return value
    }

    private static func decode(_ text: Substring) throws(CommandError) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    throw Self.malformed("a bad percent-escape")
                }
                bytes.append(high << 4 | low)
            default: bytes.append(byte)
            }
        }
        guard !bytes.contains(0) else { throw Self.malformed("a NUL byte") }
        return HostName.string(bytes)
    }

    /// Bad input: a usage error, shown as a 400 page that changed nothing.
    static func malformed(_ why: String) -> CommandError {
        CommandError(.usage, "malformed form or query: \(why)")
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
