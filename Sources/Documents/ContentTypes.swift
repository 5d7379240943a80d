import Foundation
import Glibc

/// Which files match the content types an app asked the picker for
/// (issue 17), decided with the system's shared-mime-info database — the
/// data the desktop's own file chooser uses (globs, aliases, sub-class-of) —
/// rather than a table of our own. Apps may name types as Apple's UTType
/// identifiers or as MIME types; a UTType is translated to the MIME type
/// Apple declares for it.
public struct ContentTypes: Sendable {
    private struct Glob: Sendable {
        var weight: Int
        var pattern: String
        var mime: String
        var caseSensitive: Bool
    }

    private let globs: [Glob]
    private let parents: [String: [String]]
    private let aliases: [String: String]

    public static let databaseRoot = "/usr/share/mime"
    public static let folder = "inode/directory"
    static let anything = "*"

    /// Reads the database; an empty one (every file "application/octet-stream")
    /// when it is not installed.
    public init(root: String = databaseRoot) {
        var globs: [Glob] = []
        for line in Self.lines(root + "/globs2") {
            // weight:mime:glob[:flags]
            let fields = line.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
            guard fields.count >= 3, let weight = Int(fields[0]) else { continue }
            let caseSensitive = fields.count == 4 && fields[3].contains("cs")
            globs.append(
                Glob(weight: weight, pattern: String(fields[2]), mime: String(fields[1]), caseSensitive: caseSensitive))
        }
        // Higher weight first, then longer (more specific) pattern first.
        self.globs = globs.sorted { ($0.weight, $0.pattern.count) > ($1.weight, $1.pattern.count) }
        var parents: [String: [String]] = [:]
        for line in Self.lines(root + "/subclasses") {
            let pair = line.split(separator: " ")
            if pair.count == 2 { parents[String(pair[0]), default: []].append(String(pair[1])) }
        }
        self.parents = parents
        var aliases: [String: String] = [:]
        for line in Self.lines(root + "/aliases") {
            let pair = line.split(separator: " ")
            if pair.count == 2 { aliases[String(pair[0])] = String(pair[1]) }
        }
        self.aliases = aliases
    }

    /// The MIME type of a file name, by the database's globs.
    public func mimeType(ofName name: String) -> String {
        let lowered = name.lowercased()
        for glob in globs where fnmatch(glob.pattern, glob.caseSensitive ? name : lowered, 0) == 0 {
            return glob.mime
        }
        return "application/octet-stream"
    }

    /// Whether an item matches any of `types` (UTType identifiers or MIME
    /// types, `image/*` included). No types means `public.item`: anything,
    /// folders too, as every UTType conforms to it.
    public func matches(name: String, isDirectory: Bool, types: [String]) -> Bool {
        let wanted = types.isEmpty ? ["public.item"] : types
        let mimeTypes = wanted.compactMap(Self.mimeType(ofTypeIdentifier:))
        if isDirectory { return mimeTypes.contains(Self.folder) || mimeTypes.contains(Self.anything) }
        let mime = canonical(mimeType(ofName: name))
        return mimeTypes.contains { wantedType in
            wantedType == Self.anything || isA(mime, wantedType)
        }
    }

    /// `mime` is `wanted` or one of its sub-classes (shared-mime-info's
    /// rules: declared parents, every text/* is text/plain, every file is
    /// application/octet-stream); `image/*` matches a whole media type.
    public func isA(_ mime: String, _ wanted: String) -> Bool {
        let wanted = canonical(wanted)
        if wanted == "application/octet-stream" { return !mime.hasPrefix("inode/") }
        var seen: Set<String> = []
        var queue = [canonical(mime)]
        while let type = queue.popLast() {
            guard seen.insert(type).inserted else { continue }
            if type == wanted { return true }
            if wanted.hasSuffix("/*"), type.hasPrefix(wanted.dropLast()) { return true }
            queue += parents[type] ?? []
            if type.hasPrefix("text/") && type != "text/plain" { queue.append("text/plain") }
        }
        return false
    }

    private func canonical(_ mime: String) -> String { aliases[mime] ?? mime }

    /// The MIME type Apple declares for a UTType identifier; a MIME type as
    /// it is; nil for an identifier we cannot place (it matches nothing).
    public static func mimeType(ofTypeIdentifier identifier: String) -> String? {
        if identifier.contains("/") { return identifier }
        return utTypes[identifier]
    }

    /// Apple's public UTTypes (UniformTypeIdentifiers' declarations and
    /// their MIME tags): the few that name a family rather than one format.
    private static let utTypes: [String: String] = [
        "public.item": anything, "public.data": anything, "public.content": anything,
        "public.folder": folder, "public.directory": folder,
        "public.text": "text/plain", "public.plain-text": "text/plain", "public.utf8-plain-text": "text/plain",
        "public.source-code": "text/plain", "public.script": "text/plain",
        "public.image": "image/*", "public.movie": "video/*", "public.video": "video/*", "public.audio": "audio/*",
        "public.html": "text/html", "public.xml": "application/xml", "public.json": "application/json",
        "public.comma-separated-values-text": "text/csv", "net.daringfireball.markdown": "text/markdown",
        "com.adobe.pdf": "application/pdf", "public.png": "image/png", "public.jpeg": "image/jpeg",
        "public.zip-archive": "application/zip", "public.rtf": "application/rtf",
    ]

    private static func lines(_ path: String) -> [Substring] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").filter { !$0.hasPrefix("#") }
    }
}
