import Glibc
import HostText
import Policy

/// The few file-system calls the store, the documents layer and the CLI
/// make on host paths, with names as bytes (SPEC S33a, `HostName`):
/// Foundation's `FileManager` turns a name that is not UTF-8 into U+FFFD,
/// and then lists a file that cannot be opened, or leaves it out.
public enum HostFiles {
    /// The names in folder `path`, without "." and "..", in the host's
    /// order; nil when it cannot be read. The corresponding C function is
    /// `readdir`.
    public static func names(in path: String) -> [String]? {
        guard let directory = path.withHostCString({ opendir($0) }) else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { HostName.string(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// `path` with every symbolic link resolved; nil when it does not
    /// resolve. The corresponding C function is `realpath`.
    public static func realPath(_ path: String) -> String? {
        guard let resolved = path.withHostCString({ realpath($0, nil) }) else { return nil }
        defer { free(resolved) }
        return HostName.string(cString: resolved)
    }

    /// `lstat` of `path`; nil when it does not exist.
    public static func status(_ path: String) -> stat? {
        var info = stat()
        return path.withHostCString({ lstat($0, &info) }) == 0 ? info : nil
    }

    /// Whether something is at `path` (a final symlink not followed).
    public static func exists(_ path: String) -> Bool {
        status(path) != nil
    }

    /// Whether `path` is a folder (a final symlink followed).
    public static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return path.withHostCString({ stat($0, &info) }) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }
}

extension HostFiles {
    /// The target of symbolic link `path`. The corresponding C function is `readlink`.
    public static func symbolicLinkTarget(_ path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = path.withHostCString { readlink($0, &buffer, buffer.count - 1) }
        return count < 0 ? nil : String(hostBytes: buffer[..<count])
    }

    /// Removes `path` and, for a folder, everything in it (no symbolic link
    /// followed); false when something stayed.
    @discardableResult
    public static func removeTree(_ path: String) -> Bool {
        guard let info = status(path) else { return false }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            for name in names(in: path) ?? [] { removeTree(path + "/" + name) }
            return path.withHostCString { rmdir($0) } == 0
        }
        return path.withHostCString { unlink($0) } == 0
    }
}
