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
// FUSE passthrough (Linux 6.9+): the kernel reads and writes a file that the
// daemon registered, without asking the daemon. Debian 12's headers
// (linux/fuse.h of 6.1) and libfuse 3.14 know neither the ioctls nor the
// struct, so they are spelled here once, as the kernel's uapi has them.
#include <linux/capability.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct scopefs_backing_map {
    int32_t fd;
    uint32_t flags;
    uint64_t padding;
};
#define SCOPEFS_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct scopefs_backing_map)
#define SCOPEFS_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

/// Registers `fd` as a backing file on the connection of `device` (a
/// /dev/fuse descriptor); returns its backing id, or -1 with errno (EPERM
/// without CAP_SYS_ADMIN or when passthrough was not agreed in INIT, ELOOP
/// when the file's file system stacks too deep).
static inline int scopefs_backing_open(int device, int fd) {
    struct scopefs_backing_map map = {.fd = fd, .flags = 0, .padding = 0};
    return ioctl(device, SCOPEFS_DEV_IOC_BACKING_OPEN, &map);
}

/// Forgets backing id `id`; opens that use it keep their backing file.
static inline int scopefs_backing_close(int device, int id) {
    uint32_t backing = (uint32_t)id;
    return ioctl(device, SCOPEFS_DEV_IOC_BACKING_CLOSE, &backing);
}

/// Whether this process holds CAP_SYS_ADMIN in its effective set, which
/// registering a backing file needs (in the initial user namespace).
static inline int scopefs_has_cap_sys_admin(void) {
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {{0}};
    if (syscall(SYS_capget, &header, data) != 0) return 0;
    return (data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN)) != 0;
}
// FUSE_NOTIFY_PRUNE (Linux 6.16+, protocol 7.45): asks the kernel to drop
// the dentries of the given nodes that nothing uses (no open file, no
// current directory, no cached child), so that it sends their FORGETs.
// libfuse 3.14 and Debian 12's headers predate it: the message is spelled
// here once, as the kernel's uapi has it, and written to /dev/fuse whole.
#include <errno.h>
#include <sys/uio.h>

#define SCOPEFS_NOTIFY_PRUNE 9

struct scopefs_out_header {
    uint32_t len;
    int32_t error;  // a notification's code
    uint64_t unique;  // 0 for notifications
};

struct scopefs_notify_prune_out {
    uint32_t count;
    uint32_t padding;
    uint64_t spare;
};

/// Sends one prune notification for `count` node ids on `device`;
/// returns 0, or -errno (EINVAL from a kernel that has no such message).
static inline int scopefs_notify_prune(int device, const uint64_t *nodes, uint32_t count) {
    struct scopefs_notify_prune_out out = {.count = count, .padding = 0, .spare = 0};
    size_t payload = (size_t)count * sizeof(uint64_t);
    struct scopefs_out_header header = {
        .len = (uint32_t)(sizeof(header) + sizeof(out) + payload), .error = SCOPEFS_NOTIFY_PRUNE, .unique = 0};
    struct iovec parts[3] = {
        {.iov_base = &header, .iov_len = sizeof(header)},
        {.iov_base = &out, .iov_len = sizeof(out)},
        {.iov_base = (void *)nodes, .iov_len = payload},
    };
    ssize_t written;
    do {
        written = writev(device, parts, 3);
    } while (written < 0 && errno == EINTR);
    return written < 0 ? -errno : 0;
}

#endif
