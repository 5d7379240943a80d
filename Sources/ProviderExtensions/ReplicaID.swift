/// An extension's item id as the replica keeps it (SPEC S33a, issue 50).
///
/// Swift compares Strings by canonical equivalence: `café.txt` in NFC and
/// in NFD are one key of a dictionary. A store keyed by path (S3, rclone)
/// lists both as two items with those two ids, so every map the replica
/// keys by id would take them for one and show one. The replica keeps
/// ids in a form that is plain ASCII, so String equality is byte
/// equality: each byte of 0x80 and above, and `%` itself, as `%XX`.
/// The wire (ExtensionHost) turns ids into this form as they arrive and
/// back as they leave; nothing else in the replica sees the difference.
public enum ReplicaID {
    /// The replica's form of an id the extension gave.
    public static func kept(_ wire: String) -> String {
        guard wire.utf8.contains(where: needsEscape) else { return wire }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(wire.utf8.count * 3)
        for byte in wire.utf8 {
            if needsEscape(byte) {
                bytes += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)]]
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The id the extension gave, from the replica's form. A form that is
    /// not one (an id saved before ids were kept this way is migrated, so
    /// none should be) passes through unchanged.
    public static func wire(_ kept: String) -> String {
        guard kept.utf8.contains(UInt8(ascii: "%")) else { return kept }
        let input = Array(kept.utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(input.count)
        var index = 0
        while index < input.count {
            if input[index] == UInt8(ascii: "%"), index + 2 < input.count,
                let high = hexValue(input[index + 1]), let low = hexValue(input[index + 2])
            {
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(input[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func needsEscape(_ byte: UInt8) -> Bool { byte >= 0x80 || byte == UInt8(ascii: "%") }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
