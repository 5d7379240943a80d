import Glibc
import Synchronization
import Testing

@testable import FuseBridge

/// FUSE passthrough on the wire (linux/fuse.h, protocol 7.40+): what the
/// INIT request offers, what the INIT reply agrees, and the OPEN and
/// CREATE replies that name a backing file.
@Suite struct PassthroughWireTests {
    /// An INIT request's body: flags at 12, flags2 at 16.
    static func initBody(flags: UInt32, flags2: UInt32) -> [UInt8] {
        var body = [UInt8](repeating: 0, count: 64)
        body.withUnsafeMutableBytes {
            $0.storeBytes(of: flags, toByteOffset: 12, as: UInt32.self)
            $0.storeBytes(of: flags2, toByteOffset: 16, as: UInt32.self)
        }
        return body
    }

    @Test("INIT offers passthrough in flags2 bit 5, which counts only with FUSE_INIT_EXT")
    func offered() {
        let extended: UInt32 = 1 << 30
        #expect(Self.initBody(flags: extended, flags2: 1 << 5).withUnsafeBytes(PassthroughWire.offered))
        #expect(!Self.initBody(flags: 0, flags2: 1 << 5).withUnsafeBytes(PassthroughWire.offered))
        #expect(!Self.initBody(flags: extended, flags2: 1 << 4).withUnsafeBytes(PassthroughWire.offered))
        #expect(
            !Array(Self.initBody(flags: extended, flags2: 1 << 5).prefix(18)).withUnsafeBytes(PassthroughWire.offered))
    }

    @Test("the INIT reply agrees with FUSE_INIT_EXT, flags2 bit 5 and max_stack_depth at 36")
    func agree() {
        var body = [UInt8](repeating: 0, count: 64)
        body.withUnsafeMutableBytes {
            $0.storeBytes(of: UInt32(1), toByteOffset: 12, as: UInt32.self)
            $0.storeBytes(of: UInt32(1 << 1), toByteOffset: 32, as: UInt32.self)
        }
        let agreed = body.withUnsafeMutableBytes {
            PassthroughWire.agree(initReplyBody: $0.baseAddress!, length: $0.count, stackDepth: 2)
        }
        #expect(agreed)
        body.withUnsafeBytes {
            #expect($0.loadUnaligned(fromByteOffset: 12, as: UInt32.self) == 1 | 1 << 30)
            #expect($0.loadUnaligned(fromByteOffset: 32, as: UInt32.self) == 1 << 1 | 1 << 5)
            #expect($0.loadUnaligned(fromByteOffset: 36, as: UInt32.self) == 2)
        }
        var short = [UInt8](repeating: 0, count: 36)
        #expect(
            !short.withUnsafeMutableBytes {
                PassthroughWire.agree(initReplyBody: $0.baseAddress!, length: 36, stackDepth: 1)
            })
        #expect(short.allSatisfy { $0 == 0 })
    }

    /// A reply through the hook's patch: a 16-byte out-header and a body of
    /// `bodySize` bytes ending in fuse_open_out with handle `fh`; returns
    /// (open_flags, backing_id) as sent.
    static func reply(
        bodySize: Int = 16, fh: UInt64, error: Int32 = 0, _ apply: (UnsafeMutablePointer<iovec>) -> Void
    ) -> (flags: UInt32, backing: Int32) {
        var head = [UInt8](repeating: 0, count: 16)
        var body = [UInt8](repeating: 0, count: bodySize)
        head.withUnsafeMutableBytes { $0.storeBytes(of: error, toByteOffset: 4, as: Int32.self) }
        body.withUnsafeMutableBytes {
            $0.storeBytes(of: fh, toByteOffset: bodySize - 16, as: UInt64.self)
            $0.storeBytes(of: UInt32(1 << 1), toByteOffset: bodySize - 8, as: UInt32.self)  // FOPEN_KEEP_CACHE
        }
        head.withUnsafeMutableBytes { head in
            body.withUnsafeMutableBytes { body in
                var vector = [
                    iovec(iov_base: head.baseAddress, iov_len: head.count),
                    iovec(iov_base: body.baseAddress, iov_len: body.count),
                ]
                vector.withUnsafeMutableBufferPointer { apply($0.baseAddress!) }
            }
        }
        return body.withUnsafeBytes {
            (
                $0.loadUnaligned(fromByteOffset: bodySize - 8, as: UInt32.self),
                $0.loadUnaligned(fromByteOffset: bodySize - 4, as: Int32.self)
            )
        }
    }

    @Test("an OPEN reply and a CREATE reply (entry first) get FOPEN_PASSTHROUGH and the backing id")
    func openAndCreateReplies() {
        let reply = PassthroughWire.OpenReply(handle: 0xABCD, backingID: 7)
        let open = Self.reply(fh: 0xABCD) { PassthroughWire.patch($0, 2, reply) }
        #expect(open.flags == 1 << 1 | 1 << 7 && open.backing == 7)
        let create = Self.reply(bodySize: 128 + 16, fh: 0xABCD) { PassthroughWire.patch($0, 2, reply) }
        #expect(create.flags == 1 << 1 | 1 << 7 && create.backing == 7)
    }

    @Test("another handle's reply and an error reply are left alone")
    func othersLeftAlone() {
        let reply = PassthroughWire.OpenReply(handle: 0xABCD, backingID: 7)
        let other = Self.reply(fh: 0x1234) { PassthroughWire.patch($0, 2, reply) }
        #expect(other.flags == 1 << 1 && other.backing == 0)
        let failed = Self.reply(fh: 0xABCD, error: -EIO) { PassthroughWire.patch($0, 2, reply) }
        #expect(failed.flags == 1 << 1 && failed.backing == 0)
    }

    @Test("the hook patches only the reply sent within `sending`, on its thread")
    func markedReplyOnly() {
        let reply = PassthroughWire.OpenReply(handle: 9, backingID: 3)
        let inside = PassthroughWire.sending(reply) {
            Self.reply(fh: 9) { PassthroughWire.patchOpenReply($0, 2) }
        }
        #expect(inside.flags & 1 << 7 != 0 && inside.backing == 3)
        let after = Self.reply(fh: 9) { PassthroughWire.patchOpenReply($0, 2) }
        #expect(after.flags == 1 << 1 && after.backing == 0)
        let unmarked = PassthroughWire.sending(nil) { Self.reply(fh: 9) { PassthroughWire.patchOpenReply($0, 2) } }
        #expect(unmarked.flags == 1 << 1)
    }

    @Test("INIT: passthrough is agreed only when the kernel offered it and a stack depth was asked for")
    func initReply() {
        let header = SetIDClearing.inHeaderSize
        var request = [UInt8](repeating: 0, count: header + 64)
        request.withUnsafeMutableBytes {
            $0.storeBytes(of: SetIDClearing.Opcode.initialize.rawValue, toByteOffset: 4, as: UInt32.self)
            $0.storeBytes(of: UInt64(42), toByteOffset: 8, as: UInt64.self)
            $0.storeBytes(of: UInt32(1 << 30), toByteOffset: header + 12, as: UInt32.self)
            $0.storeBytes(of: UInt32(1 << 5), toByteOffset: header + 16, as: UInt32.self)
        }
        for depth: UInt32 in [0, 1] {
            let wire = WireState()
            request.withUnsafeBytes { SetIDClearing.inspect($0, wire) }
            let offered = wire.kernelOffersPassthrough.load(ordering: .relaxed)
            #expect(offered)
            wire.passthroughDepth.store(depth, ordering: .relaxed)
            var head = [UInt8](repeating: 0, count: 16)
            var body = [UInt8](repeating: 0, count: 64)
            head.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(42), toByteOffset: 8, as: UInt64.self) }
            head.withUnsafeMutableBytes { head in
                body.withUnsafeMutableBytes { body in
                    var vector = [
                        iovec(iov_base: head.baseAddress, iov_len: 16), iovec(iov_base: body.baseAddress, iov_len: 64),
                    ]
                    vector.withUnsafeMutableBufferPointer { SetIDClearing.patchInitReply($0.baseAddress!, 2, wire) }
                }
            }
            let agreed = body.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 32, as: UInt32.self) & 1 << 5 != 0 }
            #expect(agreed == (depth > 0))
            let marked = wire.passthroughAgreed.load(ordering: .relaxed)
            #expect(marked == (depth > 0))
            #expect(body.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 36, as: UInt32.self) } == depth)
        }
    }
}
