import CFuse3
import CFuseRing
import Glibc
import Synchronization

/// FUSE over io_uring as the bridge's transport, when asked for (`scopefs
/// mount --io-uring`) and the kernel offers it: the INIT reply agrees to
/// it, the engine in CFuseRing registers one entry per thread on each of
/// the kernel's queues, and every request after INIT comes through a ring
/// entry instead of a read of /dev/fuse. FORGET, INTERRUPT and the
/// daemon's notices stay on /dev/fuse, which libfuse's loop still serves.
/// A refused registration leaves the kernel on /dev/fuse for the whole
/// connection, so the ring never costs a request.
///
/// Requests run through libfuse (`fuse_session_process_buf`) on the ring's
/// threads, so the file system sees nothing new; replies reach the ring
/// from the `writev` hook (`SetIDClearing`), after its patches.
final class FuseRing: Sendable {
    /// Threads per queue (0: the ring is not asked for). A handler that
    /// waits (a download) holds its thread's entry.
    let threadsPerQueue: UInt32
    /// The engine, once the INIT reply agreed to it (0: none).
    private let engine = Atomic<UInt>(0)
    private let state = Mutex<FuseRingReport.State>(.notAsked)

    init(threadsPerQueue: UInt32) {
        self.threadsPerQueue = threadsPerQueue
        state.withLock { $0 = threadsPerQueue == 0 ? .notAsked : .notOffered }
    }

    var requested: Bool { threadsPerQueue > 0 }

    /// Whether an INIT request (its body) offers the ring.
    static func offered(initBody body: UnsafeRawBufferPointer) -> Bool {
        guard body.count >= PassthroughWire.initRequestFlags2 + 4 else { return false }
        let flags = body.loadUnaligned(fromByteOffset: PassthroughWire.initRequestFlags, as: UInt32.self)
        guard flags & PassthroughWire.initExtended != 0 else { return false }
        let flags2 = body.loadUnaligned(fromByteOffset: PassthroughWire.initRequestFlags2, as: UInt32.self)
        return flags2 & UInt32(SCOPEFS_FLAGS2_OVER_IO_URING) != 0
    }

    /// In fuse_init_out: max_write and max_pages, which size each entry.
    private static let initReplyMaxWrite = 20
    private static let initReplyMaxPages = 28

    /// Agrees to the ring in a successful INIT reply's body, once its rings
    /// exist; returns whether it did.
    func agree(initReplyBody body: UnsafeMutableRawPointer, length: Int, kernelOffers: Bool) -> Bool {
        guard requested else { return false }
        guard kernelOffers else {
            state.withLock { $0 = .notOffered }
            return false
        }
        guard length >= PassthroughWire.initReplyFlags2 + 4 else {
            state.withLock { $0 = .failed("libfuse's INIT reply has no flags2") }
            return false
        }
        let maxWrite = Int(body.loadUnaligned(fromByteOffset: Self.initReplyMaxWrite, as: UInt32.self))
        let maxPages = Int(body.loadUnaligned(fromByteOffset: Self.initReplyMaxPages, as: UInt16.self))
        // The kernel's own bound (dev_uring.c): the largest of these.
        let payload = max(8192, maxWrite, max(maxPages, 32) * Int(getpagesize()))
        var error: Int32 = 0
        guard let created = scopefs_ring_create(threadsPerQueue, payload, &error) else {
            state.withLock { $0 = .failed("no io_uring: \(String(cString: strerror(error)))") }
            return false
        }
        engine.store(UInt(bitPattern: created), ordering: .releasing)
        let flags = body.loadUnaligned(fromByteOffset: PassthroughWire.initReplyFlags, as: UInt32.self)
        body.storeBytes(
            of: flags | PassthroughWire.initExtended, toByteOffset: PassthroughWire.initReplyFlags, as: UInt32.self)
        let flags2 = body.loadUnaligned(fromByteOffset: PassthroughWire.initReplyFlags2, as: UInt32.self)
        body.storeBytes(
            of: flags2 | UInt32(SCOPEFS_FLAGS2_OVER_IO_URING), toByteOffset: PassthroughWire.initReplyFlags2,
            as: UInt32.self)
        return true
    }

    /// After the INIT reply reached the kernel: the threads register.
    func start(device: Int32, context: BridgeContext) {
        guard let ring = pointer else { return }
        let started = scopefs_ring_start(ring, device, Self.handler, Unmanaged.passUnretained(context).toOpaque())
        state.withLock { $0 = started == 0 ? .running : .failed("no thread: \(String(cString: strerror(-started)))") }
    }

    /// The reply, if it answers a request a ring entry holds: taken there.
    func reply(_ vector: UnsafeMutablePointer<iovec>, _ count: Int32) -> Int? {
        guard let ring = pointer else { return nil }
        let taken = scopefs_ring_reply(ring, vector, count)
        if taken >= 0 { return taken }
        return errno == ENOENT ? nil : -1
    }

    /// Ends the threads; the connection is gone or no longer served.
    func stop() {
        let ring = engine.exchange(0, ordering: .acquiringAndReleasing)
        guard ring != 0, let pointer = OpaquePointer(bitPattern: ring) else { return }
        let last = report(of: pointer)
        state.withLock { if case .running = $0 { $0 = .ended(served: last.served) } }
        scopefs_ring_stop(pointer)
    }

    var report: FuseRingReport {
        let state = state.withLock { $0 }
        guard let ring = pointer else { return FuseRingReport(state: state) }
        let counts = report(of: ring)
        var result = FuseRingReport(
            state: state, queues: Int(counts.queues), threads: Int(counts.threads), served: counts.served)
        if counts.refused > 0 {
            // The kernel refused an entry: it serves the connection through /dev/fuse.
            result.state = .failed("the kernel refused an entry: \(String(cString: strerror(counts.error)))")
        }
        return result
    }

    private var pointer: OpaquePointer? { OpaquePointer(bitPattern: engine.load(ordering: .acquiring)) }

    private func report(of ring: OpaquePointer) -> scopefs_ring_report {
        var counts = scopefs_ring_report()
        scopefs_ring_report(ring, &counts)
        return counts
    }

    /// One request from an entry, on its ring thread: the wire hook's look
    /// at it (the kill bit), then libfuse's dispatch, as after a read.
    private static let handler: scopefs_ring_handler = { request, length, userdata in
        guard let request, let userdata else { return }
        let context = BridgeContext.from(userdata)
        SetIDClearing.inspect(UnsafeRawBufferPointer(start: request, count: length), context.wire)
        guard let session = OpaquePointer(bitPattern: context.session.load(ordering: .acquiring)) else { return }
        var buffer = fuse_buf()
        buffer.size = length
        buffer.mem = UnsafeMutableRawPointer(mutating: request)
        buffer.fd = -1
        fuse_session_process_buf(session, &buffer)
    }
}

/// How the mount's requests reach the daemon (`scopefs status`).
public struct FuseRingReport: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        /// The mount was not asked to use the ring (`--io-uring`).
        case notAsked
        /// The kernel did not offer it: before Linux 6.14, or fuse's
        /// `enable_uring` parameter is N.
        case notOffered
        case running
        /// Agreed, then not used: the requests go through /dev/fuse.
        case failed(String)
        case ended(served: UInt64)
    }
    public var state: State
    public var queues = 0
    public var threads = 0
    /// Requests served through the ring.
    public var served: UInt64 = 0
}
