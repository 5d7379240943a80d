/// A strict JSON parser for lines from an untrusted process: UTF-8 checked,
/// nesting bounded (a line of 500,000 `[` must not overflow the stack),
/// integers kept exact. A lone surrogate escape (`"\udcff"`, how Python
/// writes a file name that is not UTF-8) cannot be a Swift string: it
/// becomes NUL, which no valid name or id holds, so the item carrying it
/// is left out instead of the whole line being refused.
struct JSONParser {
    static let maximumDepth = 64

    let bytes: [UInt8]
    var position = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    mutating func document() -> JSONValue? {
        guard let value = value(depth: 0) else { return nil }
        skipWhitespace()
        return position == bytes.count ? value : nil
    }

    private mutating func skipWhitespace() {
        while position < bytes.count,
            bytes[position] == 0x20 || bytes[position] == 0x0A || bytes[position] == 0x0D || bytes[position] == 0x09
        {
            position += 1
        }
    }

    private mutating func value(depth: Int) -> JSONValue? {
        skipWhitespace()
        guard position < bytes.count, depth < Self.maximumDepth else { return nil }
        switch bytes[position] {
        case UInt8(ascii: "{"): return object(depth: depth)
        case UInt8(ascii: "["): return array(depth: depth)
        case UInt8(ascii: "\""): return string().map(JSONValue.string)
        case UInt8(ascii: "t"): return literal("true", .bool(true))
        case UInt8(ascii: "f"): return literal("false", .bool(false))
        case UInt8(ascii: "n"): return literal("null", .null)
        default: return number()
        }
    }

    private mutating func literal(_ word: StaticString, _ value: JSONValue) -> JSONValue? {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count else { return nil }
        for index in 0..<count where bytes[position + index] != word.utf8Start[index] { return nil }
        position += count
        return value
    }

    private mutating func object(depth: Int) -> JSONValue? {
        position += 1
        var fields: [String: JSONValue] = [:]
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            return .object(fields)
        }
        while true {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\""), let key = string() else { return nil }
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { return nil }
            position += 1
            guard let member = value(depth: depth + 1) else { return nil }
            fields[key] = member
            skipWhitespace()
            guard position < bytes.count else { return nil }
            if bytes[position] == UInt8(ascii: ",") {
                position += 1
            } else if bytes[position] == UInt8(ascii: "}") {
                position += 1
                return .object(fields)
            } else {
                return nil
            }
        }
    }

    private mutating func array(depth: Int) -> JSONValue? {
        position += 1
        var values: [JSONValue] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            return .array(values)
        }
        while true {
            guard let element = value(depth: depth + 1) else { return nil }
            values.append(element)
            skipWhitespace()
            guard position < bytes.count else { return nil }
            if bytes[position] == UInt8(ascii: ",") {
                position += 1
            } else if bytes[position] == UInt8(ascii: "]") {
                position += 1
                return .array(values)
            } else {
                return nil
            }
        }
    }

    private mutating func number() -> JSONValue? {
        let start = position
        var isInteger = true
        if position < bytes.count, bytes[position] == UInt8(ascii: "-") { position += 1 }
        let digitsStart = position
        while position < bytes.count, bytes[position] >= 0x30, bytes[position] <= 0x39 { position += 1 }
        let integerDigits = position - digitsStart
        guard integerDigits > 0, !(integerDigits > 1 && bytes[digitsStart] == 0x30) else { return nil }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            isInteger = false
            position += 1
            let fraction = position
            while position < bytes.count, bytes[position] >= 0x30, bytes[position] <= 0x39 { position += 1 }
            guard position > fraction else { return nil }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            isInteger = false
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") {
                position += 1
            }
            let exponent = position
            while position < bytes.count, bytes[position] >= 0x30, bytes[position] <= 0x39 { position += 1 }
            guard position > exponent else { return nil }
        }
        let text = String(decoding: bytes[start..<position], as: UTF8.self)
        if isInteger, let value = Int64(text) { return .int(value) }
        guard let value = Double(text), value.isFinite else { return nil }
        return .double(value)
    }

    /// A string from its opening quote; nil for bad escapes, raw control
    /// characters or bytes that are not UTF-8.
    private mutating func string() -> String? {
        position += 1
        var scalars = String.UnicodeScalarView()
        var runStart = position
        func flushRun(_ end: Int, into scalars: inout String.UnicodeScalarView) -> Bool {
            guard end > runStart else { return true }
            guard let run = String(validating: bytes[runStart..<end], as: UTF8.self) else { return false }
            scalars.append(contentsOf: run.unicodeScalars)
            return true
        }
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                guard flushRun(position, into: &scalars) else { return nil }
                position += 1
                return String(scalars)
            }
            if byte < 0x20 { return nil }
            if byte == UInt8(ascii: "\\") {
                guard flushRun(position, into: &scalars), let scalar = escape() else { return nil }
                scalars.append(scalar)
                runStart = position
                continue
            }
            position += 1
        }
        return nil
    }

    /// The escape at `position` (a backslash), moving past it.
    private mutating func escape() -> Unicode.Scalar? {
        guard position + 1 < bytes.count else { return nil }
        let kind = bytes[position + 1]
        position += 2
        switch kind {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            guard let unit = hex4() else { return nil }
            if (0xD800...0xDBFF).contains(unit), position + 5 < bytes.count, bytes[position] == UInt8(ascii: "\\"),
                bytes[position + 1] == UInt8(ascii: "u")
            {
                let saved = position
                position += 2
                if let low = hex4(), (0xDC00...0xDFFF).contains(low) {
                    return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
                }
                position = saved
            }
            return Unicode.Scalar(unit) ?? "\u{0}"
        default: return nil
        }
    }

    private mutating func hex4() -> UInt32? {
        guard position + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for byte in bytes[position..<position + 4] {
            let digit: UInt8
            switch byte {
            case 0x30...0x39: digit = byte - 0x30
            case 0x41...0x46: digit = byte - 0x41 + 10
            case 0x61...0x66: digit = byte - 0x61 + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        position += 4
        return value
    }
}
