import CSystemShims
import Glibc
import SystemPackage

/// A folder's file handle on the host (name_to_handle_at): names the
/// folder wherever it is on its file system, as a held descriptor did.
/// A folder renamed on the host inside its grant kept working through its
/// node's descriptor (SPEC S33 amended: it has not left the grant); once
/// the cache evicted that descriptor, a re-open by the old name finds
/// nothing, and the handle finds the folder where it now is. Where it is
/// is then checked as before (`checkHostLocation`): a folder moved out of
/// its grant is refused.
struct HostFileHandle: Sendable {
    let type: Int32
    let bytes: [UInt8]

    /// Handles are 8–40 bytes on the usual file systems; MAX_HANDLE_SZ.
    private static let capacity = 128

    /// The handle of the file open as `descriptor`, or nil where the file
    /// system has none (FUSE and some network file systems).
    init?(of descriptor: Int32) {
        var type: Int32 = 0
        var length: Int32 = -1
        // Read into the stack, kept at its length: every folder node holds
        // one, and an array made at the full capacity keeps all of it.
        let bytes = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.capacity) { buffer in
            length = scopefs_handle_of(descriptor, buffer.baseAddress!, Int32(Self.capacity), &type)
            return length > 0 ? Array(buffer.prefix(Int(length))) : []
        }
        guard length > 0 else { return nil }
        self.type = type
        self.bytes = bytes
    }

    /// Opens the file; `folder` is an O_PATH descriptor of a folder on its
    /// file system. EPERM without CAP_DAC_READ_SEARCH, ESTALE once it is
    /// gone.
    func open(on folder: Int32, flags: Int32) throws(Errno) -> Int32 {
        // open_by_handle_at refuses an O_PATH descriptor as its mount_fd
        // (EBADF): the folder is opened for reading for the call.
        let mount = try Sys.openAt(folder, ".", O_RDONLY | O_DIRECTORY)
        defer { Sys.close(mount) }
        return try Sys.retrying {
            bytes.withUnsafeBufferPointer { buffer in
                scopefs_open_by_handle(mount, buffer.baseAddress!, Int32(buffer.count), type, flags | O_CLOEXEC)
            }
        }
    }
}
