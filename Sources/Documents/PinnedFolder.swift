import CommandErrors
import Glibc
import HostText
import Policy
import PolicyStore

/// A folder reached from a trusted root without following a symbolic link
/// at any step, and held open: what the picker's operations read or write
/// goes through `/proc/self/fd/N`, so swapping a folder of the path for a
/// link afterwards redirects nothing. The app controls its container (and,
/// with a read-write grant, folders of a provider) through the mount, while
/// the picker's operations run with the owner's rights: a link there must
/// not make them read or write the owner's other files (SPEC S33).
final class PinnedFolder {
    let descriptor: Int32

    /// `relative` below `root`; missing folders are made when `create`.
    init(root: String, relative: String, create: Bool, what: String) throws(CommandError) {
        var descriptor = root.withHostCString { open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard descriptor >= 0 else {
            throw CommandError(.noInput, "cannot open \(root): \(String(cString: strerror(errno)))")
        }
        for component in RelativePath.components(of: relative) {
            let name = String(component)
            if create { _ = name.withHostCString { mkdirat(descriptor, $0, 0o755) } }
            let next = name.withHostCString { openat(descriptor, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            let failure = errno
            close(descriptor)
            guard next >= 0 else {
                throw failure == ELOOP || failure == ENOTDIR
                    ? CommandError(
                        .refused, "\(what) \(relative) is not a folder of its own (a symbolic link?); refused")
                    : CommandError(.noInput, "\(what) \(relative): \(String(cString: strerror(failure)))")
            }
            descriptor = next
        }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// The path of `name` in this folder, valid while the folder is held.
    func path(of name: String) -> String { "/proc/self/fd/\(descriptor)/" + name }

    /// `name` in this folder, which must exist and not be a symbolic link.
    func existingItem(_ name: String, what: String) throws(CommandError) -> String {
        var info = stat()
        guard name.withHostCString({ fstatat(descriptor, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0 else {
            throw CommandError(.noInput, "\(what) does not exist")
        }
        guard info.st_mode & S_IFMT != S_IFLNK else {
            throw CommandError(.refused, "\(what) is a symbolic link; choose what it points to instead")
        }
        return path(of: name)
    }

    /// The parent folder of `relative` below `root`, and its last name.
    static func parent(root: String, relative: String, what: String) throws(CommandError) -> (PinnedFolder, String) {
        let components = RelativePath.components(of: relative).map(String.init)
        guard let name = components.last else { throw CommandError(.badData, "\(what) names no item") }
        let folder = try PinnedFolder(
            root: root, relative: components.dropLast().joined(separator: "/"), create: false, what: what)
        return (folder, name)
    }
}
