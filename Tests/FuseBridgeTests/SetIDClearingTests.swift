import Glibc
import Synchronization
import Testing

@testable import FuseBridge

/// FUSE_HANDLE_KILLPRIV_V2 on the wire (linux/fuse.h, protocol 7.33+): the
/// kill bit of each request kind marks the thread, and the INIT reply gets
/// the flag only when the kernel offered it and the file system asked.
@Suite struct SetIDClearingTests {
    static let header = SetIDClearing.inHeaderSize

    /// A request: the in-header (len, opcode, unique, ...) and a zeroed body
    /// with `bits` stored at `offset`.
    static func request(_ opcode: SetIDClearing.Opcode, unique: UInt64 = 7, bits: UInt32 = 0, at offset: Int = 0)
        -> [UInt8]
    {
        var bytes = [UInt8](repeating: 0, count: header + 64)
        bytes.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt32(raw.count), toByteOffset: 0, as: UInt32.self)
            raw.storeBytes(of: opcode.rawValue, toByteOffset: 4, as: UInt32.self)
            raw.storeBytes(of: unique, toByteOffset: 8, as: UInt64.self)
            if offset > 0 { raw.storeBytes(of: bits, toByteOffset: offset, as: UInt32.self) }
        }
        return bytes
    }

    static func pending(after bytes: [UInt8], _ wire: WireState = WireState()) -> Bool {
        bytes.withUnsafeBytes { SetIDClearing.inspect($0, wire) }
        return SetIDClearing.pending
    }

    @Test("a write asks through write_flags bit 2 (FUSE_WRITE_KILL_SUIDGID)")
    func write() {
        #expect(Self.pending(after: Self.request(.write, bits: 1 << 2, at: Self.header + 20)))
        #expect(!Self.pending(after: Self.request(.write, bits: 1 << 0, at: Self.header + 20)))
        #expect(!Self.pending(after: Self.request(.write)))
    }

    @Test("a setattr asks only when it truncates (FATTR_SIZE with FATTR_KILL_SUIDGID)")
    func setattr() {
        #expect(Self.pending(after: Self.request(.setattr, bits: 1 << 11 | 1 << 3, at: Self.header)))
        #expect(!Self.pending(after: Self.request(.setattr, bits: 1 << 11, at: Self.header)))
        #expect(!Self.pending(after: Self.request(.setattr, bits: 1 << 3, at: Self.header)))
    }

    @Test("open and create ask through open_flags (FUSE_OPEN_KILL_SUIDGID), each at its own offset")
    func openAndCreate() {
        #expect(Self.pending(after: Self.request(.open, bits: 1, at: Self.header + 4)))
        #expect(!Self.pending(after: Self.request(.open, bits: 1, at: Self.header)))
        #expect(Self.pending(after: Self.request(.create, bits: 1, at: Self.header + 12)))
        #expect(!Self.pending(after: Self.request(.create, bits: 1, at: Self.header + 4)))
    }

    @Test("a request without the bit clears an earlier request's mark on the thread")
    func markIsPerRequest() {
        #expect(Self.pending(after: Self.request(.write, bits: 1 << 2, at: Self.header + 20)))
        #expect(!Self.pending(after: Self.request(.open)))
    }

    /// Sends an INIT reply through the hook: a 16-byte out-header and a
    /// body with `flags` at offset 12; returns the flags as sent.
    static func reply(unique: UInt64, error: Int32 = 0, flags: UInt32, _ wire: WireState) -> UInt32 {
        var head = [UInt8](repeating: 0, count: 16)
        var body = [UInt8](repeating: 0, count: 64)
        head.withUnsafeMutableBytes {
            $0.storeBytes(of: error, toByteOffset: 4, as: Int32.self)
            $0.storeBytes(of: unique, toByteOffset: 8, as: UInt64.self)
        }
        body.withUnsafeMutableBytes { $0.storeBytes(of: flags, toByteOffset: 12, as: UInt32.self) }
        head.withUnsafeMutableBytes { head in
            body.withUnsafeMutableBytes { body in
                var vector = [
                    iovec(iov_base: head.baseAddress, iov_len: head.count),
                    iovec(iov_base: body.baseAddress, iov_len: body.count),
                ]
                vector.withUnsafeMutableBufferPointer { SetIDClearing.patchInitReply($0.baseAddress!, 2, wire) }
            }
        }
        return body.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 12, as: UInt32.self) }
    }

    static func initPending(_ wire: WireState) -> Bool { wire.initPending.load(ordering: .relaxed) }

    @Test("INIT: the flag is added when the kernel offered it and the file system asked, else not")
    func initReply() {
        let flag = SetIDClearing.handleKillPrivV2
        let offered = Self.request(.initialize, unique: 42, bits: flag, at: Self.header + 12)

        let asked = WireState()
        asked.clearsSetIDBits.store(true, ordering: .relaxed)
        _ = Self.pending(after: offered, asked)
        #expect(Self.initPending(asked))
        #expect(Self.reply(unique: 42, flags: 1, asked) == 1 | flag)
        #expect(!Self.initPending(asked), "one reply only")

        let notAsked = WireState()
        _ = Self.pending(after: offered, notAsked)
        #expect(Self.reply(unique: 42, flags: 1, notAsked) == 1)

        let notOffered = WireState()
        notOffered.clearsSetIDBits.store(true, ordering: .relaxed)
        _ = Self.pending(after: Self.request(.initialize, unique: 42, bits: 0, at: Self.header + 12), notOffered)
        #expect(!Self.initPending(notOffered))

        let otherReply = WireState()
        otherReply.clearsSetIDBits.store(true, ordering: .relaxed)
        _ = Self.pending(after: offered, otherReply)
        #expect(Self.reply(unique: 43, flags: 1, otherReply) == 1, "another request's reply is left alone")
        #expect(Self.reply(unique: 42, error: -EPROTO, flags: 1, otherReply) == 1, "a failed INIT is left alone")
    }
}
