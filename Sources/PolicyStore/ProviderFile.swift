import CSystemShims
import CommandErrors
import Foundation
import HostText
import Policy

/// A file's identity on the host: device, inode and birth time. Inode
/// numbers are reused (ext4 hands a deleted file's number to the next new
/// file); the birth time tells the two apart.
struct FileIdentity: Hashable, Sendable {
    var device: Int64
    var inode: Int64
    var birthSeconds: Int64
    var birthNanoseconds: Int64

    /// The identity of `path` below `directory`, without following a final symlink.
    static func at(_ directory: String, _ path: String) -> (key: FileIdentity, isDirectory: Bool)? {
        var identity = scopefs_identity()
        let full = path.isEmpty ? directory : directory + "/" + path
        guard full.withHostCString({ scopefs_identity_at(AT_FDCWD, $0, &identity) }) == 0 else { return nil }
        let key = FileIdentity(
            device: Int64(bitPattern: identity.device), inode: Int64(bitPattern: identity.inode),
            birthSeconds: identity.birth_seconds, birthNanoseconds: Int64(identity.birth_nanoseconds))
        return (key, identity.is_directory != 0)
    }
}

/// What the store records about a provider item on the host: its file
/// identity, so an item keeps its identifier across renames.
struct ProviderFile {
    var key: FileIdentity
    var isDirectory: Bool

    /// Looks at `path` inside the provider without following a symbolic link
    /// out of it (SPEC S33): every component must stay inside the provider.
    static func inspect(provider: Provider, path: String) throws(CommandError) -> ProviderFile {
        let full = path.isEmpty ? provider.directory : provider.directory + "/" + path
        guard let (key, isDirectory) = FileIdentity.at(provider.directory, path) else {
            throw CommandError(
                .noInput, "\(provider.id):\(path) does not exist (\(full)): \(String(cString: strerror(errno)))")
        }
        let resolved = HostFiles.realPath(full) ?? full
        let directory = HostFiles.realPath(provider.directory) ?? provider.directory
        guard
            RelativePath.isWithin(resolved.dropFirstSlash, directory.dropFirstSlash) || resolved.sameHostName(as: full)
        else {
            throw CommandError(.badData, "\(provider.id):\(path) leads outside the provider through a symbolic link")
        }
        return ProviderFile(key: key, isDirectory: isDirectory)
    }
}

extension String {
    fileprivate var dropFirstSlash: String { utf8.first == UInt8(ascii: "/") ? String(dropFirst()) : self }
}

/// A provider item's file identity for a store outside this module (the
/// fleet's, SPEC S44), checked as `ProviderFile.inspect` checks it.
public struct ProviderItemIdentity: Sendable, Equatable {
    public var device: Int64
    public var inode: Int64
    public var birthSeconds: Int64
    public var birthNanoseconds: Int64
    public var isDirectory: Bool

    public static func inspect(provider: Provider, path: String) throws(CommandError) -> ProviderItemIdentity {
        let file = try ProviderFile.inspect(provider: provider, path: path)
        return ProviderItemIdentity(
            device: file.key.device, inode: file.key.inode, birthSeconds: file.key.birthSeconds,
            birthNanoseconds: file.key.birthNanoseconds, isDirectory: file.isDirectory)
    }
}
