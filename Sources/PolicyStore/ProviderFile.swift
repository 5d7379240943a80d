import Foundation
import Policy

/// What the store records about a provider item on the host: its file
/// identity, so an item keeps its identifier across renames.
struct ProviderFile {
    var device: UInt64
    var inode: UInt64
    var isDirectory: Bool

    /// Looks at `path` inside the provider without following a symbolic link
    /// out of it (SPEC S33): every component must stay inside the provider.
    static func inspect(provider: Provider, path: String) throws(ScopeFSError) -> ProviderFile {
        let full = path.isEmpty ? provider.directory : provider.directory + "/" + path
        var info = stat()
        guard lstat(full, &info) == 0 else {
            throw ScopeFSError(.noInput, "\(provider.id):\(path) does not exist (\(full)): \(String(cString: strerror(errno)))")
        }
        let resolved = URL(fileURLWithPath: full).resolvingSymlinksInPath().path
        guard RelativePath.isWithin(resolved.dropFirstSlash, provider.directory.dropFirstSlash) || resolved == full else {
            throw ScopeFSError(.badData, "\(provider.id):\(path) leads outside the provider through a symbolic link")
        }
        return ProviderFile(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino),
            isDirectory: (info.st_mode & S_IFMT) == S_IFDIR)
    }
}

extension String {
    fileprivate var dropFirstSlash: String { hasPrefix("/") ? String(dropFirst()) : self }
}
