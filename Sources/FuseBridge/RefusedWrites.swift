import CFuse3
import Dispatch
import Glibc
import Synchronization
import SystemPackage

/// Writes of a request's buffers into the backing file, and what happens
/// when the backing store refuses some of them (issue 15, SPEC S32, S35).
///
/// A write that the kernel sends from its page cache (writeback of a shared
/// mapping's dirty pages, `fi->writepage`) has no caller to hand a short
/// count to: the kernel takes a short reply as done, so the refused bytes
/// would be lost without an error. Such a write is answered with the errno
/// of the refused part, which the kernel reports to `msync`/`fsync`.
/// Either way the written range is dropped from the kernel's cache, so that
/// no process reads pages the backing file never got (natively the writer
/// would get SIGBUS; FUSE learns of the failure only at writeback).
enum RefusedWrites {
    /// Writes all of `buffers` at `offset`; the count written, or the errno
    /// of the first refusal when nothing was written or the write came from
    /// the page cache.
    static func write(
        _ buffers: UnsafeMutablePointer<fuse_bufvec>, to descriptor: Int32, at offset: off_t, fromPageCache: Bool,
        inode: UInt64, context: BridgeContext
    ) throws(Errno) -> Int {
        let total = scopefs_bufvec_size(buffers)
        var written = 0
        var refusal: Int32 = 0
        // fuse_buf_copy stops at the first short copy and advances the
        // source past what it copied: going on finds the errno.
        while written < total {
            let count = scopefs_write_to_fd(buffers, descriptor, offset + off_t(written))
            if count < 0 {
                refusal = Int32(-count)
                break
            }
            if count == 0 {
                refusal = EIO
                break
            }
            written += count
        }
        guard refusal != 0 else { return written }
        context.dropCachedRange(inode: inode, offset: offset, length: total)
        if written == 0 || fromPageCache { throw Errno(rawValue: refusal) }
        return written
    }
}

extension BridgeContext {
    /// Drops `length` bytes at `offset` of `inode` from the kernel's page
    /// cache, on a thread of its own: the kernel waits for the writeback of
    /// those pages to end, which needs the reply that the calling request
    /// thread has yet to send (docs/DECISIONS.md, decision 21; SPEC S37).
    func dropCachedRange(inode: UInt64, offset: off_t, length: Int) {
        invalidations.async { [self] in
            let pointer = session.load(ordering: .acquiring)
            guard pointer != 0 else { return }
            _ = fuse_lowlevel_notify_inval_inode(
                OpaquePointer(bitPattern: pointer), fuse_ino_t(inode), offset, off_t(length))
        }
    }
}
