/// A JSON value as it came off the pipe: the host reads every answer into
/// this first and checks its shape by hand, so a malformed answer becomes a
/// precise refusal ("item 3: size is not an integer") rather than a
/// decoding error about some key path.
enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    subscript(key: String) -> JSONValue? {
        if case .object(let fields) = self { return fields[key] }
        return nil
    }

    var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    var int: Int64? {
        switch self {
        case .int(let value): value
        // 5.0 is an integer in JSON's eyes (some encoders write it so).
        case .double(let value) where value == value.rounded() && abs(value) < 9e15: Int64(value)
        default: nil
        }
    }

    var number: Double? {
        switch self {
        case .int(let value): Double(value)
        case .double(let value): value
        default: nil
        }
    }

    var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    var array: [JSONValue]? {
        if case .array(let values) = self { return values }
        return nil
    }

    var isObject: Bool {
        if case .object = self { return true }
        return false
    }

    var isNull: Bool { self == .null }
}

extension JSONValue {
    /// Parses one line; nil when it is not one JSON value (or not UTF-8).
    static func parse(_ line: some Collection<UInt8>) -> JSONValue? {
        var parser = JSONParser(bytes: Array(line))
        return parser.document()
    }
}

extension JSONValue {
    /// The compact UTF-8 encoding, one line (JSON escapes every newline).
    var encoded: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        append(to: &out)
        return out
    }

    private func append(to out: inout [UInt8]) {
        switch self {
        case .null: out += Array("null".utf8)
        case .bool(let value): out += Array((value ? "true" : "false").utf8)
        case .int(let value): out += Array(String(value).utf8)
        // Non-finite numbers have no JSON form; the host never sends one.
        case .double(let value): out += Array((value.isFinite ? "\(value)" : "null").utf8)
        case .string(let value): Self.appendString(value, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                value.append(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let fields):
            out.append(UInt8(ascii: "{"))
            for (index, key) in fields.keys.sorted().enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.appendString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                fields[key]!.append(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func appendString(_ value: String, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case UInt8(ascii: "\n"): out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0..<0x20:
                out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
