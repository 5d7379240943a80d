/// Hands out one shared copy of equal strings, for a store reading a
/// policy row by row: a million grants name a hundred apps, one provider
/// and ten thousand items, and each row read is a string of its own
/// otherwise, tens of bytes each in the daemon's memory for as long as the
/// snapshot lives (issue 34: 100 apps x 10,000 grants).
public struct StringPool: Sendable {
    private var strings = Set<String>()

    public init() {}

    /// `string`, or the equal one handed out before.
    public mutating func callAsFunction(_ string: String) -> String {
        strings.insert(string).memberAfterInsert
    }
}
