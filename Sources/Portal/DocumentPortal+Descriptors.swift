import CPortalBus
import Control
import Glibc
import HostText
import Policy

/// What file a caller's descriptor stands for: the one answer Add,
/// AddNamed, AddFull, AddNamedFull and FileTransfer's AddFiles all take.
extension DocumentPortal {
    /// The file `fd` (or `name` in the folder of `fd`) stands for:
    /// - a provider item of the owner's ScopeFS mount (what an app in its
    ///   sandbox holds, `$SCOPEFS_MOUNT/Providers/PROVIDER/PATH`): the
    ///   item's host file, which `sender` (nil: the owner) must be allowed
    ///   to use the descriptor for by the one rule (SPEC S47);
    /// - a document's file in the layout: its host file;
    /// - any other file: itself, as the descriptor shows it.
    /// The path of a descriptor in a sandbox means nothing here (it names
    /// the sandbox's mounts), so the mount's item is read from the
    /// descriptor itself, never from its path.
    func exportedFile(descriptor fd: Int32, name: String? = nil, sender: AppID?) throws(PortalError) -> ExportedFile {
        if name == nil, let item = try mountedItem(fd) {
            return try hostFile(of: item, sender: sender)
        }
        var file = try ExportedFile(descriptor: fd, name: name)
        if let hostPath = hostPathInLayout(file.path) { file.path = hostPath }
        return file
    }

    /// A provider item of the ScopeFS mount, as a descriptor of it shows it.
    struct MountedItem {
        var provider: ProviderID
        var relativePath: String
        var isDirectory: Bool
        /// What the descriptor was opened for (nothing for O_PATH).
        var access: DescriptorAccess
    }

    /// The item `fd` holds when it is a descriptor of the owner's ScopeFS
    /// mount (the daemon serving this state directory); nil for any other
    /// file. Only a file on a FUSE mount costs a question to the daemon.
    private func mountedItem(_ fd: Int32) throws(PortalError) -> MountedItem? {
        var info = scopefs_portal_fd_mount()
        guard scopefs_portal_inspect_mount_fd(fd, &info) == 0, info.on_fuse != 0 else { return nil }
        guard let mountPoint = daemonMountPoint(), let device = Self.device(of: mountPoint),
            UInt64(device) == info.device
        else { return nil }
        // The mount answers these from the item itself, to the owner's
        // processes, whichever app's view the descriptor was opened in.
        guard let provider = Self.attribute(fd, .provider), let relativePath = Self.attribute(fd, .path) else {
            throw .notAllowed(
                "the descriptor is of the ScopeFS mount but of no provider item (an app's Container and the "
                    + "mount's own folders are not exported)")
        }
        var access: DescriptorAccess = []
        if info.readable != 0 { access.insert(.read) }
        if info.writable != 0 { access.insert(.write) }
        return MountedItem(
            provider: ProviderID(provider), relativePath: relativePath, isDirectory: info.is_directory != 0,
            access: access)
    }

    /// The host file of a mounted item, refused unless `sender` may read
    /// it now: a descriptor opened before a revoke proves nothing. Write
    /// where the descriptor was opened for writing and the rule allows it.
    /// The owner's processes read every provider item (SPEC S4).
    private func hostFile(of item: MountedItem, sender: AppID?) throws(PortalError) -> ExportedFile {
        var writable = item.access.contains(.write)
        if let sender {
            let reading = try grants.permitsDescriptor(
                [.read], app: sender, provider: item.provider, path: item.relativePath)
            guard reading else {
                throw .notAllowed("\(sender) may not read \(item.provider):\(item.relativePath) (no active grant)")
            }
            if writable {
                writable = try grants.permitsDescriptor(
                    [.write], app: sender, provider: item.provider, path: item.relativePath)
            }
        }
        let hostPath = try grants.hostPath(provider: item.provider, relativePath: item.relativePath)
        return ExportedFile(path: hostPath, isDirectory: item.isDirectory, writable: writable)
    }

    /// The mount point of the daemon serving the state directory, nil when
    /// none runs (then no descriptor can be of its mount).
    private func daemonMountPoint() -> String? {
        guard let status = try? ControlClient.status(state: grants.state) else { return nil }
        return status.mountpoint
    }

    private static func device(of path: String) -> dev_t? {
        var status = stat()
        return path.withHostCString { stat($0, &status) } == 0 ? status.st_dev : nil
    }

    /// One of ScopeFS's read-only attributes of the descriptor's file, as
    /// host bytes (SPEC S33a); nil when the file has none.
    private static func attribute(_ fd: Int32, _ name: ControlAttributeName) -> String? {
        var size = scopefs_portal_fd_attribute(fd, name.rawValue, nil, 0)
        while size >= 0 {
            var buffer = [UInt8](repeating: 0, count: size + 1)
            let count = scopefs_portal_fd_attribute(fd, name.rawValue, &buffer, UInt(buffer.count))
            if count >= 0 { return String(hostBytes: buffer[..<count]) }
            guard count == -Int(ERANGE) else { return nil }
            size = scopefs_portal_fd_attribute(fd, name.rawValue, nil, 0)
        }
        return nil
    }
}
