/// The host names of atomic saves' temporaries (SPEC S48): a file made
/// beside a document to be renamed over it has a hidden name of its own,
/// `.NAME.scopefs-MAKER-RANDOM`, so the owner's file manager shows no
/// save in progress and the name an app chose is the app's alone.
///
/// Two makers write them beside the same files: the mount (a save beside
/// a single-file grant, `ReplacementTemporaries`) and the portal's
/// document layout (`DocumentTemporaries`). Each removes what a killed
/// predecessor left when it starts, while the other may be saving beside
/// the same document; the maker in the name keeps either sweep from
/// taking the other's live temporary.
public enum SaveTemporaryNames {
    public enum Maker: String, Sendable, CaseIterable {
        case mount = "save"
        case portal = "portal"
    }

    /// A fresh temporary's host name beside the file `name`.
    public static func make(beside name: String, by maker: Maker) -> String {
        prefix(beside: name, by: maker) + String(UInt64.random(in: 0...UInt64.max), radix: 36)
    }

    /// Whether `candidate` is a name `make(beside: name, by: maker)` gives.
    public static func isTemporary(_ candidate: String, beside name: String, by maker: Maker) -> Bool {
        let prefix = prefix(beside: name, by: maker).utf8
        guard candidate.utf8.starts(with: prefix) else { return false }
        let suffix = candidate.utf8.dropFirst(prefix.count)
        // UInt64's largest, in base 36, has 13 digits.
        return (1...13).contains(suffix.count)
            && suffix.allSatisfy {
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0)
            }
    }

    private static func prefix(beside name: String, by maker: Maker) -> String {
        ".\(name).scopefs-\(maker.rawValue)-"
    }
}
