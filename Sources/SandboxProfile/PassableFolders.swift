import Foundation

/// bubblewrap arguments that make the folders above a bind's destination
/// with mode 0755, each once: the folders bubblewrap makes for a
/// destination itself are root's alone (0700), and a root owner's app
/// account must pass through them. `SandboxProfile` makes them above every
/// mount of every sandbox.
struct PassableFolders {
    private var made = Set<String>()

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
