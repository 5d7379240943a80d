import Glibc
import Policy
import Synchronization

/// An open file. The kernel's file handle (`fh`) is this object's retained
/// pointer: reads and writes reach it without a table lookup.
final class OpenHandle: Sendable {
    let descriptor: Int32
    let node: Node
    /// The grant that covered the file when it was opened (provider items).
    let grant: GrantID?
    let writable: Bool
    /// The policy generation in which the grant was last seen active.
    let grantVerified = Atomic<UInt64>(0)

    init(descriptor: Int32, node: Node, grant: GrantID?, writable: Bool) {
        self.descriptor = descriptor
        self.node = node
        self.grant = grant
        self.writable = writable
    }

    deinit { Sys.close(descriptor) }

    var handle: UInt64 { UInt64(UInt(bitPattern: Unmanaged.passRetained(self).toOpaque())) }

    static func from(_ handle: UInt64) -> OpenHandle {
        Unmanaged<OpenHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle))!).takeUnretainedValue()
    }

    /// Balances the retain taken by `handle` (on release).
    static func release(_ handle: UInt64) {
        Unmanaged<OpenHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle))!).release()
    }
}

/// An open directory: the entries read at opendir (or at a rewind), served
/// by index so that offsets stay stable while the directory changes.
final class DirectoryHandle: @unchecked Sendable {
    struct Item {
        var name: String
        var inode: UInt64
        var type: mode_t
    }

    let node: Node
    // Only touched by the request that holds the handle: the kernel
    // serialises readdir calls on one open directory.
    var items: [Item]
    var hasBeenRead = false

    init(node: Node, items: [Item]) {
        self.node = node
        self.items = items
    }

    var handle: UInt64 { UInt64(UInt(bitPattern: Unmanaged.passRetained(self).toOpaque())) }

    static func from(_ handle: UInt64) -> DirectoryHandle {
        Unmanaged<DirectoryHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle))!).takeUnretainedValue()
    }

    static func release(_ handle: UInt64) {
        Unmanaged<DirectoryHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle))!).release()
    }
}
