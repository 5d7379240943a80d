import Foundation

/// Paths are bytes (SPEC S33a, issue 16): a Linux file name need not be
/// UTF-8, but a Swift `String` (and so a Foundation `URL`) holds Unicode.
/// This library holds such a path as ScopeFS does inside: a byte XX that
/// is not UTF-8 is the private-use scalar U+10FF00 + XX. On the control
/// socket the byte travels as the lone surrogate escape `\udcXX` (Python's
/// surrogateescape, docs/API.md "Paths are bytes"), which Foundation's
/// `JSONDecoder` rejects: `decodable` and `escaped` convert at the socket.
///
/// A URL this library returns keeps the escapes in its `path`; Foundation
/// would open the wrong name with it. `URL.hostPathBytes` and
/// `URL.withHostPath` give the exact bytes for `open(2)` and friends, and
/// every call of this library that takes a URL uses them.
enum HostPathText {
    static let escapeBase: UInt32 = 0x10FF00
    static let escapes: ClosedRange<UInt32> = 0x10FF80...0x10FFFF

    /// The host bytes of a path held with escapes.
    static func bytes(_ path: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(path.utf8.count)
        for scalar in path.unicodeScalars {
            if escapes.contains(scalar.value) {
                bytes.append(UInt8(scalar.value - escapeBase))
            } else {
                bytes.append(contentsOf: String(scalar).utf8)
            }
        }
        return bytes
    }

    /// Calls `body` with the NUL-terminated host bytes of `path`.
    static func withCString<Result>(_ path: String, _ body: (UnsafePointer<CChar>) throws -> Result) rethrows -> Result
    {
        let bytes = self.bytes(path).map { CChar(bitPattern: $0) } + [0]
        return try bytes.withUnsafeBufferPointer { try body($0.baseAddress!) }
    }

    /// A daemon's answer with each `\udcXX` (not the low half of a
    /// surrogate pair) turned into the escape of byte XX, for `JSONDecoder`.
    static func decodable(_ data: Data) -> Data {
        let bytes = [UInt8](data)
        let backslash = UInt8(ascii: "\\")
        let u = UInt8(ascii: "u")
        guard bytes.contains(backslash) else { return data }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            guard bytes[index] == backslash, index + 1 < bytes.count else {
                out.append(bytes[index])
                index += 1
                continue
            }
            guard bytes[index + 1] == u, let value = hex4(bytes, index + 2) else {
                out += bytes[index...index + 1]  // another escape, copied whole
                index += 2
                continue
            }
            let isPair =
                (0xD800...0xDBFF).contains(value) && index + 11 < bytes.count && bytes[index + 6] == backslash
                && bytes[index + 7] == u
            if isPair {
                out += bytes[index..<index + 12]
                index += 12
            } else if (0xDC80...0xDCFF).contains(value), let escape = Unicode.Scalar(escapeBase + (value & 0xFF)) {
                out += String(escape).utf8
                index += 6
            } else {
                out += bytes[index..<index + 6]
                index += 6
            }
        }
        return Data(out)
    }

    /// An encoded request with each escape written as `\udcXX`.
    static func escaped(_ data: Data) -> Data {
        let text = String(decoding: data, as: UTF8.self)
        guard text.unicodeScalars.contains(where: { escapes.contains($0.value) }) else { return data }
        var result = ""
        for scalar in text.unicodeScalars {
            if escapes.contains(scalar.value) {
                result += "\\udc" + String(scalar.value - escapeBase, radix: 16)
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return Data(result.utf8)
    }

    private static func hex4(_ bytes: [UInt8], _ start: Int) -> UInt32? {
        guard start + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for byte in bytes[start..<start + 4] {
            guard let digit = Character(Unicode.Scalar(byte)).hexDigitValue else { return nil }
            value = value << 4 | UInt32(digit)
        }
        return value
    }
}

extension URL {
    /// The exact bytes of this file URL's path (SPEC S33a): what `open(2)`
    /// needs for a name that is not UTF-8 in a URL this library returned
    /// (its `path` holds such a byte XX as U+10FF00 + XX; Foundation cannot
    /// open it). The same as `path.utf8` for every other name.
    public var hostPathBytes: [UInt8] { HostPathText.bytes(path) }

    /// Calls `body` with the NUL-terminated `hostPathBytes`:
    /// `url.withHostPath { open($0, O_RDONLY) }`.
    public func withHostPath<Result>(_ body: (UnsafePointer<CChar>) throws -> Result) rethrows -> Result {
        try HostPathText.withCString(path, body)
    }
}
