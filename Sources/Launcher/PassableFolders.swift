import Foundation

/// bubblewrap arguments that make the folders above a bind's destination
/// with mode 0755, each once: the folders bubblewrap makes for a
/// destination itself are root's alone (0700), and the app account must
/// pass through them. Shared by the app's sandbox and the portal's bus proxy.
struct PassableFolders {
    private var made = Set<String>()

    /// Whether `folder` was made by these arguments (as a folder above a bind).
    func made(_ folder: String) -> Bool { made.contains(folder) }

    /// `--perms 0755 --dir FOLDER` for each folder above `path` not made yet, outermost first.
    mutating func arguments(above path: String) -> [String] {
        var folders: [String] = []
        var folder = (path as NSString).deletingLastPathComponent
        while folder != "/" && !folder.isEmpty && !made.contains(folder) {
            folders.insert(folder, at: 0)
            folder = (folder as NSString).deletingLastPathComponent
        }
        made.formUnion(folders)
        return folders.flatMap { ["--perms", "0755", "--dir", $0] }
    }
}
