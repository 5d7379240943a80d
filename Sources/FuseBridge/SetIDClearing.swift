import CFuse3
import CSystemShims
import Glibc
import Synchronization

/// FUSE_HANDLE_KILLPRIV_V2: the file system, not the kernel, clears a
/// file's setuid and setgid bits when a caller without CAP_FSETID writes
/// or truncates it. In exchange the kernel may mark an inode "no security
/// attributes" (S_NOSEC) after its first write, and stops asking for
/// `security.capability` (a GETXATTR round trip) before every later write
/// to it (docs/PERFORMANCE.md).
///
/// libfuse 3.14 knows neither the flag nor the per-request bits that come
/// with it, so the bridge handles both on the wire, through libfuse's
/// custom I/O hooks:
/// - the INIT reply gets the flag when the kernel offered it and the file
///   system asked for it (`ConnectionSettings.clearsSetIDBits`);
/// - a WRITE, a truncating SETATTR or an O_TRUNC OPEN/CREATE whose kill
///   bit is set marks the worker thread; the handler sees it as
///   `Request.clearsSetIDBits` (libfuse workers read a request and handle
///   it on the same thread).
///
/// The same `writev` hook adds FUSE passthrough to the INIT, OPEN and
/// CREATE replies (`PassthroughWire`), and FUSE_DIRECT_IO_ALLOW_MMAP to
/// the INIT reply.
///
/// Without splice_receive libfuse reads every request through the hook
/// (no SPLICE_READ); replies are still spliced, through `spliceSend`.
enum SetIDClearing {
    static var io: fuse_custom_io {
        fuse_custom_io(writev: writev, read: read, splice_receive: nil, splice_send: spliceSend)
    }

    /// Whether the request this thread read last asks for the bits to go.
    static var pending: Bool { pthread_getspecific(threadFlag) != nil }

    // MARK: Wire layout (linux/fuse.h, protocol 7.33+)

    static let handleKillPrivV2: UInt32 = 1 << 28  // fuse_init_in/out.flags
    private static let writeKillSUIDGID: UInt32 = 1 << 2  // fuse_write_in.write_flags
    private static let attrSize: UInt32 = 1 << 3  // fuse_setattr_in.valid: FATTR_SIZE
    private static let attrKillSUIDGID: UInt32 = 1 << 11  // fuse_setattr_in.valid
    private static let openKillSUIDGID: UInt32 = 1 << 0  // fuse_open_in/fuse_create_in.open_flags

    static let inHeaderSize = 40  // len, opcode, unique, nodeid, uid, gid, pid, padding
    private static let outHeaderSize = 16  // len, error, unique

    enum Opcode: UInt32 {
        case setattr = 4, open = 14, write = 16, initialize = 26, create = 35
    }

    /// Where each opcode keeps its kill bit, from the start of the request,
    /// and which bits must all be set.
    static func killBit(_ opcode: Opcode) -> (offset: Int, mask: UInt32)? {
        switch opcode {
        case .write: (inHeaderSize + 20, writeKillSUIDGID)  // fh, offset, size, write_flags
        case .setattr: (inHeaderSize, attrKillSUIDGID | attrSize)  // valid
        case .open: (inHeaderSize + 4, openKillSUIDGID)  // flags, open_flags
        case .create: (inHeaderSize + 12, openKillSUIDGID)  // flags, mode, umask, open_flags
        case .initialize: nil
        }
    }

    // MARK: Hooks

    private static let read: @convention(c) (Int32, UnsafeMutableRawPointer?, Int, UnsafeMutableRawPointer?) -> Int = {
        fd, buffer, size, userdata in
        let count = Glibc.read(fd, buffer, size)
        if count >= inHeaderSize, let buffer, let userdata {
            inspect(UnsafeRawBufferPointer(start: buffer, count: count), BridgeContext.from(userdata).wire)
        }
        return count
    }

    private static let writev:
        @convention(c) (Int32, UnsafeMutablePointer<iovec>?, Int32, UnsafeMutableRawPointer?)
            -> Int = { fd, vector, count, userdata in
                guard let vector, let userdata else { return Glibc.writev(fd, vector, count) }
                let context = BridgeContext.from(userdata)
                let wire = context.wire
                var initReply = false
                var ringAgreed = false
                if wire.initPending.load(ordering: .relaxed) {
                    patchInitReply(vector, count, wire)
                    initReply = !wire.initPending.load(ordering: .relaxed)
                    if initReply { ringAgreed = agreeRing(vector, count, context) }
                }
                PassthroughWire.patchOpenReply(vector, count)
                // A reply to a request a ring entry holds goes to the entry.
                if let taken = context.ring.reply(vector, count) { return taken }
                let written = Glibc.writev(fd, vector, count)
                // The kernel took the INIT reply within the write: a backing
                // file can be registered now, and the ring's entries.
                if initReply { settlePassthrough(context, replyWritten: written >= 0) }
                if ringAgreed && written >= 0 {
                    context.ring.start(device: context.passthrough.device.load(ordering: .acquiring), context: context)
                }
                return written
            }

    /// Agrees to FUSE over io_uring in a successful INIT reply (`FuseRing`).
    private static func agreeRing(_ vector: UnsafeMutablePointer<iovec>, _ count: Int32, _ context: BridgeContext)
        -> Bool
    {
        guard context.ring.requested, count >= 2, let header = vector[0].iov_base, let body = vector[1].iov_base,
            header.loadUnaligned(fromByteOffset: 4, as: Int32.self) == 0
        else { return false }
        return context.ring.agree(
            initReplyBody: body, length: vector[1].iov_len,
            kernelOffers: context.wire.kernelOffersRing.load(ordering: .relaxed))
    }

    /// After the INIT reply: tries passthrough if the reply agreed it, and
    /// otherwise says why it is off.
    private static func settlePassthrough(_ context: BridgeContext, replyWritten: Bool) {
        let agreed = context.wire.passthroughAgreed.exchange(false, ordering: .acquiring)
        if agreed && replyWritten {
            context.passthrough.probe()
        } else if context.wire.passthroughDepth.load(ordering: .acquiring) > 0 {
            context.passthrough.decline(
                agreed ? "the INIT reply did not reach the kernel" : "libfuse's INIT reply has no room for it")
        }
    }

    private static let spliceSend:
        @convention(c) (
            Int32, UnsafeMutablePointer<off_t>?, Int32, UnsafeMutablePointer<off_t>?, Int, UInt32,
            UnsafeMutableRawPointer?
        ) -> Int = { input, inputOffset, output, outputOffset, length, flags, _ in
            splice(input, inputOffset, output, outputOffset, length, flags)
        }

    /// Reads one request as the hook received it (internal for FuseBridgeTests).
    static func inspect(_ request: UnsafeRawBufferPointer, _ wire: WireState) {
        guard let opcode = Opcode(rawValue: request.loadUnaligned(fromByteOffset: 4, as: UInt32.self)) else { return }
        if opcode == .initialize {
            guard request.count >= inHeaderSize + 16 else { return }
            let flags = request.loadUnaligned(fromByteOffset: inHeaderSize + 12, as: UInt32.self)
            let passthrough = PassthroughWire.offered(
                initBody: UnsafeRawBufferPointer(rebasing: request[inHeaderSize...]))
            wire.initUnique.store(request.loadUnaligned(fromByteOffset: 8, as: UInt64.self), ordering: .relaxed)
            wire.kernelOffersKillPriv.store(flags & handleKillPrivV2 != 0, ordering: .relaxed)
            wire.kernelOffersPassthrough.store(passthrough, ordering: .relaxed)
            let directMmap = PassthroughWire.offersDirectIOMmap(
                initBody: UnsafeRawBufferPointer(rebasing: request[inHeaderSize...]))
            wire.kernelOffersDirectIOMmap.store(directMmap, ordering: .relaxed)
            let ring = FuseRing.offered(initBody: UnsafeRawBufferPointer(rebasing: request[inHeaderSize...]))
            wire.kernelOffersRing.store(ring, ordering: .relaxed)
            // Looked at whenever the ring is asked for: the reply then says
            // whether the kernel offered it.
            wire.initPending.store(
                flags & handleKillPrivV2 != 0 || passthrough || directMmap || wire.ringRequested, ordering: .releasing)
            return
        }
        guard let (offset, mask) = killBit(opcode) else { return }
        // Set for every request of these kinds, so none sees an earlier one's flag.
        let bits = request.count >= offset + 4 ? request.loadUnaligned(fromByteOffset: offset, as: UInt32.self) : 0
        pthread_setspecific(threadFlag, bits & mask == mask ? UnsafeRawPointer(bitPattern: 1) : nil)
    }

    /// Adds the flag (and FUSE passthrough, `PassthroughWire`) to a
    /// successful INIT reply; libfuse built the reply after the file
    /// system's `initialize` said whether it clears the bits.
    static func patchInitReply(_ vector: UnsafeMutablePointer<iovec>, _ count: Int32, _ wire: WireState) {
        guard count >= 2, vector[0].iov_len >= outHeaderSize, vector[1].iov_len >= 16,
            let header = vector[0].iov_base, let body = vector[1].iov_base,
            header.loadUnaligned(fromByteOffset: 8, as: UInt64.self) == wire.initUnique.load(ordering: .relaxed)
        else { return }
        wire.initPending.store(false, ordering: .relaxed)
        guard header.loadUnaligned(fromByteOffset: 4, as: Int32.self) == 0 else { return }
        if wire.kernelOffersKillPriv.load(ordering: .relaxed), wire.clearsSetIDBits.load(ordering: .acquiring) {
            let flags = body.loadUnaligned(fromByteOffset: 12, as: UInt32.self)
            body.storeBytes(of: flags | handleKillPrivV2, toByteOffset: 12, as: UInt32.self)
        }
        if wire.kernelOffersDirectIOMmap.load(ordering: .relaxed) {
            _ = PassthroughWire.allowDirectIOMmap(initReplyBody: body, length: vector[1].iov_len)
        }
        let depth = wire.passthroughDepth.load(ordering: .acquiring)
        if depth > 0, wire.kernelOffersPassthrough.load(ordering: .relaxed),
            PassthroughWire.agree(initReplyBody: body, length: vector[1].iov_len, stackDepth: depth)
        {
            wire.passthroughAgreed.store(true, ordering: .releasing)
        }
    }

    private static let threadFlag: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}

/// What the wire hooks learn about one session's INIT exchange.
final class WireState: Sendable {
    /// The INIT request's id, between its read and its reply.
    let initUnique = Atomic<UInt64>(0)
    /// The kernel offered a flag the hook adds and the reply is not sent yet.
    let initPending = Atomic<Bool>(false)
    /// What the kernel offered: FUSE_HANDLE_KILLPRIV_V2, FUSE_PASSTHROUGH.
    let kernelOffersKillPriv = Atomic<Bool>(false)
    let kernelOffersPassthrough = Atomic<Bool>(false)
    /// FUSE_DIRECT_IO_ALLOW_MMAP (kernel 6.6+), asked for whenever offered.
    let kernelOffersDirectIOMmap = Atomic<Bool>(false)
    /// The file system asked for it (set by `initialize`, before the reply).
    let clearsSetIDBits = Atomic<Bool>(false)
    /// The `max_stack_depth` to agree passthrough with (0: not asked for;
    /// set at negotiation, before the reply).
    let passthroughDepth = Atomic<UInt32>(0)
    /// The INIT reply agreed passthrough and is being written: once it is,
    /// the hook tries a backing file (`PassthroughFiles.probe`).
    let passthroughAgreed = Atomic<Bool>(false)
    /// FUSE over io_uring: the mount asked for it; the kernel offered it.
    let ringRequested: Bool
    let kernelOffersRing = Atomic<Bool>(false)

    init(ringRequested: Bool = false) { self.ringRequested = ringRequested }
}
