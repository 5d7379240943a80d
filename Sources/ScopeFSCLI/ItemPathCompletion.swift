import Foundation
import Policy

/// Completion of `PROVIDER:RELPATH` words (issue 31): before the colon the
/// provider ids, after it the names in the provider's folder on the host,
/// one folder at a time, as a shell completes paths. Only reads the host;
/// a path that climbs out of the provider (`..`, absolute) offers nothing,
/// as `grant` would refuse it (65).
enum ItemPathCompletion {
    static func candidates(for word: String, providers: [Provider]) -> [String] {
        guard let colon = word.firstIndex(of: ":") else {
            return providers.map { $0.id + ":" }.filter { $0.hasPrefix(word) }.sorted()
        }
        let id = String(word[..<colon])
        guard let provider = providers.first(where: { $0.id == id }) else { return [] }
        let relative = String(word[word.index(after: colon)...])
        // `docs/re` -> the folder `docs/` and the start of a name, `re`.
        let folder = relative.lastIndex(of: "/").map { String(relative[...$0]) } ?? ""
        let start = String(relative.dropFirst(folder.count))
        let parts = folder.split(separator: "/")
        guard !relative.hasPrefix("/"), !parts.contains(".."), !parts.contains(".") else { return [] }
        let directory = folder.isEmpty ? provider.directory : provider.directory + "/" + folder
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        return
            names
            // Hidden names only when asked for, as shells do.
            .filter { $0.hasPrefix(start) && (start.hasPrefix(".") || !$0.hasPrefix(".")) }
            .map { name in
                var isFolder: ObjCBool = false
                let exists = FileManager.default.fileExists(atPath: directory + "/" + name, isDirectory: &isFolder)
                // A folder ends with `/`, so the next TAB goes inside it.
                return "\(id):\(folder)\(name)\(exists && isFolder.boolValue ? "/" : "")"
            }
            .sorted()
    }
}
