/// A dictionary key for numbers that the kernel or the daemon hands out —
/// process and thread IDs, grant row IDs, inode numbers — never a value an
/// app picks. Every FUSE request looks up several of them, and Swift's
/// default hash (SipHash) resists keys chosen by an attacker, which these
/// are not, at many times the price; this one is a multiply (`FibonacciHash`).
@frozen
public struct NumberKey<Number: FixedWidthInteger & Sendable>: Hashable, Sendable {
    public let number: Number

    @inlinable
    public init(_ number: Number) { self.number = number }

    @inlinable
    public func hash(into hasher: inout Hasher) { hasher.combine(number) }

    @inlinable
    public func _rawHashValue(seed: Int) -> Int {
        FibonacciHash.mix(UInt64(truncatingIfNeeded: number), seed: seed)
    }
}

/// One multiply by 2^64 / φ, folded: consecutive numbers land far apart.
/// Swift's dictionaries probe linearly and shift entries back on removal,
/// so an unmixed (identity) hash of consecutive numbers would make one long
/// run of occupied buckets for every removal to walk.
public enum FibonacciHash {
    @inlinable
    public static func mix(_ value: UInt64, seed: Int) -> Int {
        let mixed = (value ^ UInt64(UInt(bitPattern: seed))) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed ^ (mixed >> 32))
    }
}

extension Dictionary {
    /// Reads and writes by the number itself.
    @inlinable
    public subscript<Number>(_ number: Number) -> Value? where Key == NumberKey<Number> {
        get { self[NumberKey(number)] }
        set { self[NumberKey(number)] = newValue }
    }
}
