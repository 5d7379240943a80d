#ifndef SCOPEFS_CFUSE3_SHIM_H
#define SCOPEFS_CFUSE3_SHIM_H
// 314 means libfuse 3.14: below 312 the headers turn fuse_session_loop_mt
// and fuse_parse_cmdline into macros that Swift cannot import.
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <stddef.h>
#include <sys/types.h>

// FUSE_BUFVEC_INIT is a macro; these build the one-buffer vectors that
// zero-copy reads and writes need, so Swift never spells the struct layout.

/// Replies to a read with `size` bytes of `fd` at `pos`, spliced when the
/// kernel allows it (SPEC S37).
static inline int scopefs_reply_fd(fuse_req_t req, int fd, off_t pos, size_t size) {
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    buf.buf[0].fd = fd;
    buf.buf[0].pos = pos;
    return fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

/// Copies a write request's buffers into `fd` at `pos`; returns bytes or -errno.
static inline ssize_t scopefs_write_to_fd(struct fuse_bufvec *in, int fd, off_t pos) {
    struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
    out.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    out.buf[0].fd = fd;
    out.buf[0].pos = pos;
    return fuse_buf_copy(&out, in, 0);
}

static inline size_t scopefs_bufvec_size(const struct fuse_bufvec *bufv) {
    return fuse_buf_size(bufv);
}
#endif
