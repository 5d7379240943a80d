#ifndef SCOPEFS_FUSE_RING_H
#define SCOPEFS_FUSE_RING_H
// FUSE over io_uring (Linux 6.14+, protocol 7.42): the kernel hands each
// request to a buffer the daemon registered on an io_uring, and takes the
// reply from the same buffer with the command that fetches the next one,
// so a round trip is one io_uring_enter instead of a read and a write on
// /dev/fuse. libfuse 3.14 does not speak it; this engine owns the rings
// and their threads, and hands each request to the bridge, which runs it
// through libfuse (fuse_session_process_buf) as if it came from the
// device. Replies come back through the bridge's writev hook
// (scopefs_ring_reply). Debian 12's linux/fuse.h predates the protocol,
// so its few structures are spelled in fuse_ring.c, as the uapi has them.
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/// FUSE_OVER_IO_URING (1 << 41): bit 9 of fuse_init_in/out.flags2. The
/// kernel offers it only while fuse's `enable_uring` parameter is Y.
#define SCOPEFS_FLAGS2_OVER_IO_URING (1u << 9)

typedef struct scopefs_ring scopefs_ring;

/// Runs one request (fuse_in_header, its op struct and payload, contiguous)
/// on the calling ring thread; the reply may come from any thread.
typedef void (*scopefs_ring_handler)(const void *request, size_t length, void *context);

/// Creates the rings: `threads_per_queue` threads, each with its own
/// io_uring and one entry, for each of the kernel's queues (one per
/// possible CPU). `payload_size` must hold the largest request and reply
/// (max_write, max_pages). NULL with *error = errno when the kernel or the
/// process refuses an io_uring.
scopefs_ring *scopefs_ring_create(unsigned threads_per_queue, size_t payload_size, int *error);

/// Starts the threads, once the INIT reply that agreed to the ring is
/// written: each registers its entry on `device` and serves requests
/// through `handler`. Returns 0 or -errno (the kernel then serves the
/// connection through /dev/fuse, as it does when a registration fails).
int scopefs_ring_start(scopefs_ring *ring, int device, scopefs_ring_handler handler, void *context);

/// The reply in `iov` goes to the entry whose request it answers, and the
/// entry is committed (and fetches the next request). Returns the bytes
/// taken, as writev would, or -1 with errno ENOENT when no entry holds
/// that request (a reply or notice for /dev/fuse).
ssize_t scopefs_ring_reply(scopefs_ring *ring, const struct iovec *iov, int count);

/// Ends the threads (after the unmount has torn the queues down) and frees
/// the ring; a thread still inside a handler after 5 s is left running and
/// the ring is not freed.
void scopefs_ring_stop(scopefs_ring *ring);

struct scopefs_ring_report {
    unsigned queues;
    unsigned threads;
    /// Requests the ring delivered.
    uint64_t served;
    /// Threads whose registration the kernel refused, and the last errno.
    unsigned refused;
    int error;
};

void scopefs_ring_report(const scopefs_ring *ring, struct scopefs_ring_report *report);

/// The kernel's queue count: its possible CPUs (the ring is ready only
/// when every queue has an entry).
unsigned scopefs_ring_queue_count(void);

#endif
