/// Provider-relative paths: "" is the provider's root, components are joined
/// with "/", never with a leading or trailing slash, never "." or "..".
public enum RelativePath {
    /// Normalises a user-supplied relative path, or returns nil when it would
    /// leave the provider (SPEC S33: no `..` reaches outside).
    public static func normalize(_ raw: String) -> String? {
        if raw.hasPrefix("/") { return nil }
        var parts: [Substring] = []
        for part in raw.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": return nil
            default: parts.append(part)
            }
        }
        return parts.joined(separator: "/")
    }

    /// Whether a name holds a "/" (then it is no single component). Scans
    /// the UTF-8 bytes in place: iterating `utf8` cost ~300 instructions
    /// per name, on every lookup.
    public static func hasSeparator(_ name: String) -> Bool {
        let slash = UInt8(ascii: "/")
        return name.utf8.withContiguousStorageIfAvailable { $0.contains(slash) } ?? name.utf8.contains(slash)
    }

    public static func join(_ parent: String, _ name: String) -> String {
        parent.isEmpty ? name : parent + "/" + name
    }

    /// The parent of a path; the root's parent is nil.
    public static func parent(of path: String) -> String? {
        if path.isEmpty { return nil }
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return String(path[..<slash])
    }

    public static func lastComponent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// True when `path` is `ancestor` itself or lies below it.
    public static func isWithin(_ path: String, _ ancestor: String) -> Bool {
        if ancestor.isEmpty || path == ancestor { return true }
        return path.count > ancestor.count && path.hasPrefix(ancestor)
            && path[path.index(path.startIndex, offsetBy: ancestor.count)] == "/"
    }
}
