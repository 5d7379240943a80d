import CFuse3
import Glibc
import SystemPackage

/// FUSE passthrough on the wire (Linux 6.9+, `CONFIG_FUSE_PASSTHROUGH`): an
/// OPEN or CREATE reply may name a backing file that the daemon registered
/// on `/dev/fuse` (`PassthroughFiles`), and the kernel then reads, writes
/// and maps that file itself, without a READ or WRITE request.
///
/// libfuse 3.14 knows none of it, so the bridge adds it to the replies in
/// its `writev` hook (`SetIDClearing.io`), as it does FUSE_HANDLE_KILLPRIV_V2:
/// - the INIT reply: `FUSE_PASSTHROUGH` in `flags2` (with `FUSE_INIT_EXT`)
///   and the `max_stack_depth` of the file systems behind it;
/// - an OPEN or CREATE reply: `FOPEN_PASSTHROUGH` and the backing id in
///   its `fuse_open_out`, for the reply the thread marked with `sending`.
enum PassthroughWire {
    // MARK: Wire layout (linux/fuse.h, protocol 7.40+)

    /// FUSE_PASSTHROUGH (1 << 37): bit 5 of fuse_init_in/out.flags2.
    static let flags2Passthrough: UInt32 = 1 << 5
    /// FUSE_INIT_EXT: flags2 is there (fuse_init_in/out.flags).
    static let initExtended: UInt32 = 1 << 30
    /// In the INIT request's body: flags, then flags2.
    static let initRequestFlags = 12
    static let initRequestFlags2 = 16
    /// In the INIT reply's body (fuse_init_out).
    static let initReplyFlags = 12
    static let initReplyFlags2 = 32
    static let initReplyStackDepth = 36
    /// fuse_open_out (the last 16 bytes of an OPEN or CREATE reply):
    /// fh, open_flags, backing_id.
    static let openOutSize = 16
    static let openOutFlags = 8
    static let openOutBackingID = 12
    /// FOPEN_PASSTHROUGH in fuse_open_out.open_flags.
    static let openPassthrough: UInt32 = 1 << 7

    /// Whether an INIT request (its body) offers passthrough.
    static func offered(initBody body: UnsafeRawBufferPointer) -> Bool {
        guard body.count >= initRequestFlags2 + 4 else { return false }
        let flags = body.loadUnaligned(fromByteOffset: initRequestFlags, as: UInt32.self)
        guard flags & initExtended != 0 else { return false }
        return body.loadUnaligned(fromByteOffset: initRequestFlags2, as: UInt32.self) & flags2Passthrough != 0
    }

    /// FUSE_DIRECT_IO_ALLOW_MMAP (1 << 36): bit 4 of flags2. A file opened
    /// with direct I/O (while a fault rule acts on reads) may then still be
    /// mapped shared; without it such an mmap fails with ENODEV.
    static let flags2DirectIOAllowMmap: UInt32 = 1 << 4

    /// Whether an INIT request (its body) offers shared mmap of direct I/O files.
    static func offersDirectIOMmap(initBody body: UnsafeRawBufferPointer) -> Bool {
        guard body.count >= initRequestFlags2 + 4 else { return false }
        let flags = body.loadUnaligned(fromByteOffset: initRequestFlags, as: UInt32.self)
        guard flags & initExtended != 0 else { return false }
        return body.loadUnaligned(fromByteOffset: initRequestFlags2, as: UInt32.self) & flags2DirectIOAllowMmap != 0
    }

    /// Asks for it in an INIT reply's body; false when the body has no flags2.
    static func allowDirectIOMmap(initReplyBody body: UnsafeMutableRawPointer, length: Int) -> Bool {
        guard length >= initReplyFlags2 + 4 else { return false }
        let flags = body.loadUnaligned(fromByteOffset: initReplyFlags, as: UInt32.self)
        body.storeBytes(of: flags | initExtended, toByteOffset: initReplyFlags, as: UInt32.self)
        let flags2 = body.loadUnaligned(fromByteOffset: initReplyFlags2, as: UInt32.self)
        body.storeBytes(of: flags2 | flags2DirectIOAllowMmap, toByteOffset: initReplyFlags2, as: UInt32.self)
        return true
    }

    /// Asks for passthrough in an INIT reply's body, with `stackDepth`.
    /// False when the body is too short to carry it (a libfuse that sends
    /// an older fuse_init_out).
    static func agree(initReplyBody body: UnsafeMutableRawPointer, length: Int, stackDepth: UInt32) -> Bool {
        guard length >= initReplyStackDepth + 4 else { return false }
        let flags = body.loadUnaligned(fromByteOffset: initReplyFlags, as: UInt32.self)
        body.storeBytes(of: flags | initExtended, toByteOffset: initReplyFlags, as: UInt32.self)
        let flags2 = body.loadUnaligned(fromByteOffset: initReplyFlags2, as: UInt32.self)
        body.storeBytes(of: flags2 | flags2Passthrough, toByteOffset: initReplyFlags2, as: UInt32.self)
        body.storeBytes(of: stackDepth, toByteOffset: initReplyStackDepth, as: UInt32.self)
        return true
    }

    // MARK: OPEN and CREATE replies

    /// The reply a thread is about to send through libfuse: the handle it
    /// carries and the backing id to add.
    struct OpenReply {
        var handle: UInt64
        var backingID: Int32
    }

    /// Runs `send` (a `fuse_reply_open` or `fuse_reply_create`) with the
    /// reply marked for the hook: libfuse writes a reply on the calling
    /// thread, within the call, and writes nothing else meanwhile.
    static func sending<T>(_ reply: OpenReply?, _ send: () -> T) -> T {
        guard var reply else { return send() }
        return withUnsafeMutablePointer(to: &reply) { pointer in
            pthread_setspecific(pendingReply, pointer)
            defer { pthread_setspecific(pendingReply, nil) }
            return send()
        }
    }

    /// Adds FOPEN_PASSTHROUGH and the backing id to the reply this thread
    /// marked, if this is it (a successful reply carrying the same handle).
    static func patchOpenReply(_ vector: UnsafeMutablePointer<iovec>, _ count: Int32) {
        guard let marked = pthread_getspecific(pendingReply) else { return }
        let reply = marked.assumingMemoryBound(to: OpenReply.self).pointee
        patch(vector, count, reply)
    }

    /// The patch itself (internal for FuseBridgeTests).
    @discardableResult
    static func patch(_ vector: UnsafeMutablePointer<iovec>, _ count: Int32, _ reply: OpenReply) -> Bool {
        guard count == 2, vector[0].iov_len >= 16, vector[1].iov_len >= openOutSize,
            let header = vector[0].iov_base, let body = vector[1].iov_base,
            header.loadUnaligned(fromByteOffset: 4, as: Int32.self) == 0
        else { return false }
        let openOut = body + (vector[1].iov_len - openOutSize)
        guard openOut.loadUnaligned(as: UInt64.self) == reply.handle else { return false }
        let flags = openOut.loadUnaligned(fromByteOffset: openOutFlags, as: UInt32.self)
        openOut.storeBytes(of: flags | openPassthrough, toByteOffset: openOutFlags, as: UInt32.self)
        openOut.storeBytes(of: reply.backingID, toByteOffset: openOutBackingID, as: Int32.self)
        return true
    }

    private static let pendingReply: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    // MARK: Registering backing files

    /// Registers the file open as `descriptor` on the connection of
    /// `device`; returns its backing id. The corresponding ioctl is
    /// `FUSE_DEV_IOC_BACKING_OPEN`.
    static func register(_ descriptor: Int32, on device: Int32) -> Result<Int32, Errno> {
        while true {
            let id = scopefs_backing_open(device, descriptor)
            if id >= 0 { return .success(id) }
            if errno != EINTR { return .failure(Errno(rawValue: errno)) }
        }
    }

    /// Forgets backing id `id` (`FUSE_DEV_IOC_BACKING_CLOSE`); files open
    /// with it keep their backing file.
    static func unregister(_ id: Int32, on device: Int32) {
        guard device >= 0 else { return }
        _ = scopefs_backing_close(device, id)
    }
}
