import CSystemShims
import Glibc
import HostText
import Policy

extension HostFiles {
    /// A text naming the file at `path` below `root` itself — device,
    /// inode and birth time, which a rename keeps — or nil when nothing is
    /// there. No symbolic link on the way is followed (SPEC S33): a link an
    /// app planted in its folder must not name a file it was not given.
    public static func identityKey(below root: String, _ path: String) -> String? {
        var directory = root.withHostCString { open($0, scopefs_o_path | O_DIRECTORY | O_CLOEXEC) }
        guard directory >= 0 else { return nil }
        defer { close(directory) }
        let components = RelativePath.components(of: path)
        for component in components.dropLast() {
            let next = String(component).withHostCString {
                openat(directory, $0, scopefs_o_path | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            guard next >= 0 else { return nil }
            close(directory)
            directory = next
        }
        let found = FileIdentity.at(descriptor: directory, name: components.last.map(String.init))
        return found.map { "\($0.device):\($0.inode):\($0.birthSeconds).\($0.birthNanoseconds)" }
    }
}

extension FileIdentity {
    /// The identity of `name` in the folder `descriptor` (the folder itself
    /// for nil), without following a final symbolic link.
    static func at(descriptor: Int32, name: String?) -> FileIdentity? {
        var identity = scopefs_identity()
        let status = (name ?? ".").withHostCString { scopefs_identity_at(descriptor, $0, &identity) }
        guard status == 0 else { return nil }
        return FileIdentity(
            device: Int64(bitPattern: identity.device), inode: Int64(bitPattern: identity.inode),
            birthSeconds: identity.birth_seconds, birthNanoseconds: Int64(identity.birth_nanoseconds))
    }
}
