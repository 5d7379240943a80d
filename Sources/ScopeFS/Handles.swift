import Glibc
import HostText
import Policy
import Synchronization

/// An open file. The kernel's file handle (`fh`) is this object's retained
/// pointer: reads and writes reach it without a table lookup.
final class OpenHandle: Sendable {
    let descriptor: Int32
    let node: Node
    /// The grant that allowed the open (provider items): the descriptor's
    /// check falls back on it only where the file's path no longer leads
    /// to a grant (`Decision.permitDescriptor`).
    let grant: GrantID?
    /// What the descriptor was opened for: each operation on it asks the
    /// access rule for all of it (`checkStillGranted`, SPEC S47).
    let access: DescriptorAccess
    var writable: Bool { access.contains(.write) }
    /// Who opened it: only processes of that app (or, for a file opened in
    /// the inspect view, the owner's processes) may use it (SPEC S33).
    let user: FileUser
    /// The policy generation in which the access rule last allowed the
    /// descriptor's access.
    let grantVerified = Atomic<UInt64>(0)
    /// Set by the first write (or truncation) through the handle: its
    /// release tells other apps' presenters (`contentWritten`).
    let wrote = Atomic<Bool>(false)
    /// The descriptor's place in its app's budget (`DescriptorBudget`),
    /// given back after `deinit` closed the descriptor.
    private let charge: DescriptorCharge
    /// An extension provider's file: the remote edition it was opened at
    /// (`ProviderContent.edition`); its reads of a later one are ESTALE.
    let edition: UInt64?

    init(
        descriptor: Int32, node: Node, grant: GrantID?, access: DescriptorAccess, user: FileUser,
        charge: DescriptorCharge, edition: UInt64? = nil
    ) {
        self.charge = charge
        self.edition = edition
        self.descriptor = descriptor
        self.node = node
        self.grant = grant
        self.access = access
        self.user = user
    }

    deinit { Sys.close(descriptor) }

    /// The kernel's handle for this object: a retained pointer, so each
    /// call takes a reference that only `release(_:)` gives back. A method,
    /// not a property, so that reading it is visibly an act.
    func retainedHandle() -> UInt64 { UInt64(UInt(bitPattern: Unmanaged.passRetained(self).toOpaque())) }

    static func from(_ handle: UInt64) -> OpenHandle {
        Unmanaged<OpenHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle))!).takeUnretainedValue()
    }

    /// Balances the retain taken by `retainedHandle()` (on release).
    static func release(_ handle: UInt64) {
        Unmanaged<OpenHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle))!).release()
    }
}

/// An open directory. Backed folders are read from the host as the kernel
/// asks (`HostDirectoryStream`); synthetic folders, which are small, are
/// listed at opendir and served by index.
final class DirectoryHandle: @unchecked Sendable {
    struct Item {
        var name: String
        var inode: UInt64
        var type: mode_t
    }

    enum Entries {
        /// "." and ".." and the names listed, by index.
        case fixed([Item])
        /// The host folder; `shown` limits it to these names (a bare folder
        /// above grants shows only the children that lead to them).
        case host(HostDirectoryStream, shown: Set<HostNameKey>?, hidesStaging: Bool = false)
    }

    let node: Node
    // Only touched by the request that holds the handle: the kernel
    // serialises readdir calls on one open directory.
    var entries: Entries
    var hasBeenRead = false
    /// A backed folder's stream holds a descriptor: its place in the app's
    /// budget (`DescriptorBudget`).
    private let charge: DescriptorCharge?

    init(node: Node, entries: Entries, charge: DescriptorCharge?) {
        self.charge = charge
        self.node = node
        self.entries = entries
    }

    /// The kernel's handle for this object: a retained pointer, so each
    /// call takes a reference that only `release(_:)` gives back. A method,
    /// not a property, so that reading it is visibly an act.
    func retainedHandle() -> UInt64 { UInt64(UInt(bitPattern: Unmanaged.passRetained(self).toOpaque())) }

    static func from(_ handle: UInt64) -> DirectoryHandle {
        Unmanaged<DirectoryHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle))!).takeUnretainedValue()
    }

    static func release(_ handle: UInt64) {
        Unmanaged<DirectoryHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle))!).release()
    }
}
