import Glibc
import SystemPackage

/// A backed folder read as the kernel asks for it, as passthrough_ll does:
/// opening costs one `openat`, entries are read a buffer at a time, and the
/// host's own position cookies (`d_off`) are the offsets the kernel keeps,
/// so seekdir and telldir behave as on the host. Nothing is read ahead at
/// opendir, so a large folder's first entries are not kept waiting.
///
/// Not thread-safe: the kernel serialises readdir calls on one open folder.
final class HostDirectoryStream {
    /// One entry, valid until the stream moves on.
    struct Entry {
        let name: UnsafePointer<CChar>
        let inode: UInt64
        /// The file type bits of st_mode (0 when the host does not say).
        let type: mode_t
        /// The position after this entry, as the kernel will hand it back.
        let nextOffset: Int64

        var isDotOrDotDot: Bool { ScopeFS.isDotOrDotDot(name) }
    }

    private let stream: OpaquePointer
    /// The position of the next entry `peek` returns.
    private var position: Int64 = 0
    /// An entry read from the host but not yet listed: it did not fit in the
    /// last reply, so it opens the next one.
    private var pending: UnsafeMutablePointer<dirent>?

    /// Opens the folder `directory` (an O_PATH descriptor) for reading.
    init(directory: Int32) throws(Errno) {
        let descriptor = try Sys.openAt(directory, ".", O_RDONLY | O_DIRECTORY)
        guard let stream = fdopendir(descriptor) else {
            let error = Errno(rawValue: errno)
            Sys.close(descriptor)
            throw error
        }
        self.stream = stream
    }

    deinit { closedir(stream) }

    /// The folder's size as the host file system reports it (st_size: for
    /// most, a measure of its entries), or nil.
    var hostSize: Int64? {
        var info = stat()
        return fstat(dirfd(stream), &info) == 0 ? Int64(info.st_size) : nil
    }

    /// Moves to `offset`, a cookie this stream handed out (or 0, the start,
    /// which reads the folder afresh). Reading on from where the last reply
    /// ended does not seek.
    func seek(to offset: Int64) {
        guard offset != position else { return }
        if offset == 0 { rewinddir(stream) } else { seekdir(stream, Int(offset)) }
        position = offset
        pending = nil
    }

    /// The entry at the current position, without moving past it.
    func peek() -> Entry? {
        if pending == nil { pending = Glibc.readdir(stream) }
        guard let entry = pending else { return nil }
        let name = UnsafeRawPointer(entry).advanced(by: MemoryLayout<dirent>.offset(of: \dirent.d_name)!)
        return Entry(
            name: name.assumingMemoryBound(to: CChar.self), inode: UInt64(entry.pointee.d_ino),
            type: mode_t(entry.pointee.d_type) << 12, nextOffset: Int64(entry.pointee.d_off))
    }

    /// Moves past the entry `peek` returned.
    func advance() {
        guard let entry = pending else { return }
        position = Int64(entry.pointee.d_off)
        pending = nil
    }
}

/// Whether the NUL-terminated `name` is "." or "..".
func isDotOrDotDot(_ name: UnsafePointer<CChar>) -> Bool {
    name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0))
}
