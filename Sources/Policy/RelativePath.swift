import HostText

/// Provider-relative paths: "" is the provider's root, components are joined
/// with "/", never with a leading or trailing slash, never "." or "..".
///
/// Paths are split and compared by their bytes (SPEC S33a, `HostName`):
/// Swift's Character view glues a "/" to a combining mark after it, and its
/// `==` deems canonically equivalent names equal.
public enum RelativePath {
    static let slash = UInt8(ascii: "/")

    /// Normalises a user-supplied relative path, or returns nil when it would
    /// leave the provider (SPEC S33: no `..` reaches outside).
    public static func normalize(_ raw: String) -> String? {
        if raw.utf8.first == slash { return nil }
        var parts: [Substring] = []
        for part in components(of: raw) {
            if part.utf8.elementsEqual(".".utf8) { continue }
            if part.utf8.elementsEqual("..".utf8) { return nil }
            parts.append(part)
        }
        return parts.joined(separator: "/")
    }

    /// The "/"-separated components of `path`, empty ones left out.
    public static func components(of path: String) -> [Substring] {
        path.utf8.split(separator: slash, omittingEmptySubsequences: true).map { Substring($0) }
    }

    /// Whether a name holds a "/" (then it is no single component). Scans
    /// the UTF-8 bytes in place, without iterating `utf8` element by
    /// element: it runs on every lookup.
    public static func hasSeparator(_ name: String) -> Bool {
        name.utf8.withContiguousStorageIfAvailable { $0.contains(slash) } ?? name.utf8.contains(slash)
    }

    public static func join(_ parent: String, _ name: String) -> String {
        parent.isEmpty ? name : parent + "/" + name
    }

    /// The parent of a path; the root's parent is nil.
    public static func parent(of path: String) -> String? {
        if path.isEmpty { return nil }
        guard let slashIndex = path.utf8.lastIndex(of: slash) else { return "" }
        return String(path[..<slashIndex])
    }

    public static func lastComponent(of path: String) -> String {
        guard let slashIndex = path.utf8.lastIndex(of: slash) else { return path }
        return String(path[path.utf8.index(after: slashIndex)...])
    }

    /// True when `path` is `ancestor` itself or lies below it.
    public static func isWithin(_ path: String, _ ancestor: String) -> Bool {
        if ancestor.isEmpty { return true }
        let (path, ancestor) = (path.utf8, ancestor.utf8)
        guard path.starts(with: ancestor) else { return false }
        let rest = path.dropFirst(ancestor.count)
        return rest.isEmpty || rest.first == slash
    }

    /// The component of `path` right below `ancestor` ("b" for "a/b/c"
    /// below "a"); nil unless `path` lies strictly below `ancestor`.
    public static func nextComponent(of path: String, after ancestor: String) -> String? {
        guard !path.utf8.elementsEqual(ancestor.utf8), isWithin(path, ancestor) else { return nil }
        let rest = Substring(path.utf8.dropFirst(ancestor.utf8.count))
        return components(of: String(rest)).first.map(String.init)
    }
}
