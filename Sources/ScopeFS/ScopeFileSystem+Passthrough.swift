import CSystemShims
import FuseBridge
import Glibc
import SystemPackage

/// The app's own container through FUSE passthrough (issue 33): the kernel
/// reads, writes and maps container files itself, at the backing file
/// system's speed, where the session has passthrough (`PassthroughFiles`;
/// `status` says whether). Only container files: nothing there is ever
/// revoked (S14 is about grants), so no open descriptor ever has to be cut.
/// Provider files keep the daemon's path, where every read and write meets
/// the gate.
///
/// What the daemon no longer sees through such a descriptor, and why that
/// is sound, is docs/DECISIONS.md's decision 56, "Kernel passthrough
/// for the container": its reads and writes (S33's check of the caller: in the
/// sandbox no other app can reach the descriptor), and the set-id bits an
/// unprivileged write would clear (a container file has none: `modeAllowed`).
extension ScopeFileSystem {
    /// What the kernel may do with an open of `node`, open as `descriptor`
    /// with status `info`: nil for a file outside a container.
    func passthroughOffer(_ node: Node, _ info: stat, descriptor: Int32) -> PassthroughOffer? {
        guard case .container = node.place, node.reference == nil else { return nil }
        // A write through passthrough would keep a set-id bit that the
        // daemon clears for an unprivileged writer (`clearSetIDBits`); a
        // fault rule must see every read and write. Such an open goes
        // through the daemon, unless the file is open through passthrough
        // already (the kernel then allows no other way).
        if info.st_mode & (S_ISUID | S_ISGID) != 0 || faults.isActive { return .declined }
        return .descriptor(descriptor)
    }

    /// The mode a chmod, create or mknod may give a file in `place`: in a
    /// container a regular file never takes a set-id bit (a write through
    /// passthrough would not clear it; SPEC S35); folders, FIFOs, sockets
    /// and devices, which nothing writes through, keep theirs (issue 50:
    /// pjdfstest in a container failed 101 cases on them). `mode`'s type
    /// bits say which it is; without them it is a regular file's.
    /// Elsewhere, the mode asked for.
    static func modeAllowed(_ mode: mode_t, in place: Place, isDirectory: Bool) -> mode_t {
        let type = mode & S_IFMT
        guard case .container = place, !isDirectory, type == 0 || type == S_IFREG else { return mode }
        return mode & ~(S_ISUID | S_ISGID)
    }

    /// An anonymous regular file in the containers folder, for the bridge
    /// to try passthrough with (`ConnectionSettings.passthroughProbe`); a
    /// named one, unlinked at once, where the file system has no O_TMPFILE.
    func passthroughProbe() -> Int32? {
        if let file = try? Sys.openAt(containers, ".", scopefs_o_tmpfile | O_RDWR, 0o600) { return file }
        let name = ".scopefs-passthrough-probe-\(getpid())"
        guard let file = try? Sys.openAt(containers, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600) else {
            return nil
        }
        try? Sys.unlinkAt(containers, name, 0)
        return file
    }

    /// The kernel's `max_stack_depth` for the containers' file system: 2
    /// where it stacks on another (an overlay, as a container image's root
    /// is; FUSE; eCryptfs), else 1. The mount then counts as stacked that
    /// deep: one that says 2 cannot be the lower layer of an overlay.
    var passthroughStackDepth: UInt32 {
        let type = scopefs_file_system_type(containers)
        return [Self.overlayMagic, Self.fuseMagic, Self.ecryptfsMagic].contains(type) ? 2 : 1
    }

    // linux/magic.h
    private static let overlayMagic = 0x794c_7630
    private static let fuseMagic = 0x6573_5546
    private static let ecryptfsMagic = 0xf15f
}
