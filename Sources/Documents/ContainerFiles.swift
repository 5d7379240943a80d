import Glibc
import HostText
import Policy

/// Reads and removes files inside an app's container without following
/// symbolic links: the app controls its container (through the mount it
/// can replace `tmp/APP-Inbox` or a folder of `Documents/` with a link to
/// any folder of the owner), and the daemon and the CLI act with the
/// owner's rights. Every component is opened with O_NOFOLLOW, relative to
/// the folder before it.
public enum ContainerFiles {
    /// Opens the folder at `relative` below `root` (a trusted path), every
    /// component a real folder; nil when one is missing or a link.
    public static func openFolder(root: String, relative: String) -> Int32? {
        var descriptor = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        for component in RelativePath.components(of: relative) {
            let next = String(component).withHostCString {
                openat(descriptor, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            close(descriptor)
            guard next >= 0 else { return nil }
            descriptor = next
        }
        return descriptor
    }

    /// The names in the folder at `relative` below `root` ("." and ".."
    /// left out); empty when it is missing or reached through a link.
    public static func names(root: String, relative: String) -> [String] {
        guard let folder = openFolder(root: root, relative: relative) else { return [] }
        return names(in: folder)
    }

    /// The status of `name` in the folder at `relative`, not following it.
    public static func status(root: String, relative: String, name: String) -> stat? {
        guard let folder = openFolder(root: root, relative: relative) else { return nil }
        defer { close(folder) }
        var info = stat()
        return name.withHostCString { fstatat(folder, $0, &info, AT_SYMLINK_NOFOLLOW) } == 0 ? info : nil
    }

    /// Removes `relative` below `root` — a file, a link (not its target) or
    /// a folder with everything in it. True when it is gone.
    @discardableResult
    public static func remove(root: String, relative: String) -> Bool {
        var components = RelativePath.components(of: relative).map(String.init)
        guard let name = components.popLast(), name != ".", name != ".." else { return false }
        guard let folder = openFolder(root: root, relative: components.joined(separator: "/")) else { return false }
        defer { close(folder) }
        return remove(name, in: folder)
    }

    /// Removes the file or link `relative` below `root`, never a folder.
    @discardableResult
    public static func removeFile(root: String, relative: String) -> Bool {
        var components = RelativePath.components(of: relative).map(String.init)
        guard let name = components.popLast() else { return false }
        guard let folder = openFolder(root: root, relative: components.joined(separator: "/")) else { return false }
        defer { close(folder) }
        return name.withHostCString { unlinkat(folder, $0, 0) } == 0 || errno == ENOENT
    }

    /// Removes the folder `relative` below `root` if it is empty (and a
    /// real folder).
    public static func removeEmptyFolder(root: String, relative: String) {
        var components = RelativePath.components(of: relative).map(String.init)
        guard let name = components.popLast(),
            let folder = openFolder(root: root, relative: components.joined(separator: "/"))
        else { return }
        _ = name.withHostCString { unlinkat(folder, $0, AT_REMOVEDIR) }
        close(folder)
    }

    private static func remove(_ name: String, in folder: Int32) -> Bool {
        if name.withHostCString({ unlinkat(folder, $0, 0) }) == 0 || errno == ENOENT { return true }
        guard errno == EISDIR else { return false }
        let child = name.withHostCString { openat(folder, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard child >= 0 else { return false }
        let names = names(in: dup(child))
        for entry in names { _ = remove(entry, in: child) }
        close(child)
        return name.withHostCString { unlinkat(folder, $0, AT_REMOVEDIR) } == 0 || errno == ENOENT
    }

    /// Lists and closes `descriptor`.
    private static func names(in descriptor: Int32) -> [String] {
        guard let stream = fdopendir(descriptor) else {
            close(descriptor)
            return []
        }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            // Names are bytes (SPEC S33a): kept losslessly, so each one
            // removed is the one listed.
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                HostName.string(raw.prefix(while: { $0 != 0 }))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
