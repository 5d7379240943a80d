/// Names and paths are bytes, as Linux has them (SPEC S33a), but most of
/// ScopeFS speaks `String`. A `String` cannot hold bytes that are not UTF-8,
/// and `String(cString:)`, `String(decoding:as:)` and Foundation turn them
/// into U+FFFD: two host files become one name, and the name leads nowhere.
///
/// So bytes become a `String` losslessly, and back, at every boundary with
/// the kernel (FUSE requests, system calls, `argv`, /proc):
///
/// - a byte that is not part of a valid UTF-8 sequence is held as the
///   private-use scalar U+10FF00 + byte (U+10FF80...U+10FFFF, an *escape*);
/// - a valid character that is itself in that range is held as the escapes
///   of its four bytes, so that no name's escapes mean two things;
/// - everything else is held as it is.
///
/// Every byte string has exactly one such `String`, and `hostBytes` gives the
/// bytes back. Two names are the same host name only when their UTF-8 views
/// are equal: Swift's `==` and hashing follow Unicode canonical equivalence
/// ("caf\u{e9}" == "cafe\u{301}"), which would make two host files one —
/// compare with `sameHostName` and key by `HostNameKey` instead.
public enum HostName {
    /// Escape of byte `b` (0x80...0xFF): U+10FF00 + b.
    static let escapeBase: UInt32 = 0x10FF00
    static let escapes: ClosedRange<UInt32> = 0x10FF80...0x10FFFF
    /// The lead byte of every escape's UTF-8 form (F4 8F BE/BF xx): a name
    /// without it has no escape, and its UTF-8 view is its bytes.
    @usableFromInline static let escapeLead: UInt8 = 0xF4

    /// Whether two names have the same bytes, compared in place (a
    /// `Substring`'s UTF-8 is contiguous unless it was bridged).
    @inlinable
    public static func sameBytes(_ a: Substring, _ b: Substring) -> Bool {
        var (a, b) = (a, b)
        return a.withUTF8 { first in
            b.withUTF8 { second in
                guard first.count == second.count else { return false }
                for index in 0..<first.count where first[index] != second[index] { return false }
                return true
            }
        }
    }

    /// The `String` of `bytes` (no NUL expected).
    public static func string<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        if !bytes.contains(where: { $0 >= 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
        let array = Array(bytes)
        var result = String.UnicodeScalarView()
        var index = 0
        while index < array.count {
            if let (scalar, length) = validScalar(array, at: index), !escapes.contains(scalar.value) {
                result.append(scalar)
                index += length
            } else {
                // Invalid here, or a real character in the escape range: each
                // of its bytes is escaped (ASCII is always valid).
                let length = validScalar(array, at: index)?.length ?? 1
                for byte in array[index..<index + length] {
                    result.append(Unicode.Scalar(escapeBase + UInt32(byte))!)
                }
                index += length
            }
        }
        return String(result)
    }

    /// The `String` of a NUL-terminated name from the kernel.
    public static func string(cString: UnsafePointer<CChar>) -> String {
        // The common case: valid UTF-8 without the escapes' lead byte, as
        // the standard library validates it (no second pass of our own).
        if let valid = String(validatingCString: cString), !valid.hasEscapedBytes { return valid }
        var length = 0
        while cString[length] != 0 { length += 1 }
        return cString.withMemoryRebound(to: UInt8.self, capacity: length) {
            string(UnsafeBufferPointer(start: $0, count: length))
        }
    }

    /// The scalar encoded at `index` and its length, when the bytes there
    /// are valid UTF-8 (shortest form, no surrogates, at most U+10FFFF).
    static func validScalar(_ bytes: [UInt8], at index: Int) -> (scalar: Unicode.Scalar, length: Int)? {
        let lead = bytes[index]
        let length: Int
        var value: UInt32
        var minimum: UInt32
        switch lead {
        case 0x00...0x7F: return (Unicode.Scalar(lead), 1)
        case 0xC2...0xDF: (length, value, minimum) = (2, UInt32(lead & 0x1F), 0x80)
        case 0xE0...0xEF: (length, value, minimum) = (3, UInt32(lead & 0x0F), 0x800)
        case 0xF0...0xF4: (length, value, minimum) = (4, UInt32(lead & 0x07), 0x10000)
        default: return nil
        }
        guard index + length <= bytes.count else { return nil }
        for byte in bytes[(index + 1)..<(index + length)] {
            guard byte & 0xC0 == 0x80 else { return nil }
            value = value << 6 | UInt32(byte & 0x3F)
        }
        guard value >= minimum, let scalar = Unicode.Scalar(value) else { return nil }
        return (scalar, length)
    }
}

extension String {
    /// `HostName.string(bytes)`.
    public init<Bytes: Collection<UInt8>>(hostBytes bytes: Bytes) {
        self = HostName.string(bytes)
    }

    /// Whether the name holds an escaped byte (or an escaped character).
    @inlinable
    public var hasEscapedBytes: Bool {
        utf8.withContiguousStorageIfAvailable { $0.contains(HostName.escapeLead) }
            ?? utf8.contains(HostName.escapeLead)
    }

    /// The host bytes this name stands for (see `HostName`).
    public var hostBytes: [UInt8] {
        guard hasEscapedBytes else { return Array(utf8) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        for scalar in unicodeScalars {
            if HostName.escapes.contains(scalar.value) {
                bytes.append(UInt8(scalar.value - HostName.escapeBase))
            } else {
                bytes.append(contentsOf: UTF8.encode(scalar)!)
            }
        }
        return bytes
    }

    /// Calls `body` with the host bytes of this name, NUL-terminated: what
    /// every system call gets instead of `withCString`. Without an escape
    /// the string's own storage is passed, without a copy.
    @inlinable
    public func withHostCString<Result, Failure: Error>(
        _ body: (UnsafePointer<CChar>) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        if !hasEscapedBytes {
            var result: Result?
            var failure: Failure?
            withCString { pointer in
                do throws(Failure) { result = try body(pointer) } catch { failure = error }
            }
            if let failure { throw failure }
            return result!
        }
        let bytes = hostBytes.map { CChar(bitPattern: $0) } + [0]
        var result: Result?
        var failure: Failure?
        bytes.withUnsafeBufferPointer { buffer in
            do throws(Failure) { result = try body(buffer.baseAddress!) } catch { failure = error }
        }
        if let failure { throw failure }
        return result!
    }

    /// Whether two names are the same host name: equal bytes, not Swift's
    /// canonical equivalence.
    @inlinable
    public func sameHostName(as other: String) -> Bool {
        HostName.sameBytes(self[...], other[...])
    }

    /// Whether `prefix` is a byte prefix of this name.
    @inlinable
    public func hasHostPrefix(_ prefix: String) -> Bool {
        utf8.starts(with: prefix.utf8)
    }
}

extension Substring {
    @inlinable
    public func sameHostName(as other: Substring) -> Bool {
        HostName.sameBytes(self, other)
    }
}

/// A name or path as a dictionary key or set member: equal and hashed by
/// its bytes, so that two host names that Swift deems canonically
/// equivalent stay two keys (see `HostName`).
public struct HostNameKey: Hashable, Sendable {
    public let text: Substring

    @inlinable
    public init(_ text: Substring) {
        self.text = text
    }

    @inlinable
    public init(_ text: String) {
        self.text = text[...]
    }

    @inlinable
    public static func == (a: Self, b: Self) -> Bool {
        HostName.sameBytes(a.text, b.text)
    }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
