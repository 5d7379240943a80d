// FUSE over io_uring: see include/fuse_ring.h for what this engine does
// and docs/DECISIONS.md (decision 91) for why it is shaped this way.
#define _GNU_SOURCE
#include "fuse_ring.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// MARK: The protocol (linux/fuse.h of 6.14+; Debian 12's header is older)

enum { in_header_size = 40, out_header_size = 16, op_area_size = 128 };
enum { cmd_register = 1, cmd_commit_and_fetch = 2 };

struct uring_ent_in_out {
    uint64_t flags;
    uint64_t commit_id;
    uint32_t payload_sz;
    uint32_t padding;
    uint64_t reserved;
};

struct uring_req_header {
    unsigned char in_out[128];  // fuse_in_header on fetch, fuse_out_header on commit
    unsigned char op_in[op_area_size];
    struct uring_ent_in_out ent;
};

// In the 80-byte command area of a 128-byte SQE.
struct uring_cmd_req {
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};

struct in_header {
    uint32_t len, opcode;
    uint64_t unique, nodeid;
    uint32_t uid, gid, pid;
    uint16_t total_extlen, padding;
};

struct out_header {
    uint32_t len;
    int32_t error;
    uint64_t unique;
};

_Static_assert(sizeof(struct in_header) == in_header_size, "fuse_in_header");
_Static_assert(sizeof(struct out_header) == out_header_size, "fuse_out_header");
_Static_assert(sizeof(struct uring_cmd_req) == 24, "fuse_uring_cmd_req");
_Static_assert(sizeof(struct uring_ent_in_out) == 32, "fuse_uring_ent_in_out");

// MARK: The engine

enum { tag_fetch = 1, tag_wake = 2 };

// The request is assembled in front of the payload, which the kernel
// writes in place: its fuse_in_header and op struct are copied into the
// page before it, so libfuse sees one contiguous request and no payload
// byte is copied.
enum { front_room = 4096 };

struct ring_thread {
    struct scopefs_ring *ring;
    unsigned qid;
    struct io_uring uring;
    // The SQ is filled by this thread, and by another only for a wake-up
    // (a NOP, which completes at once: a command that another task
    // submitted would be cancelled when that task exits).
    pthread_mutex_t submit_lock;
    pthread_t thread;
    int started;
    unsigned char *buffer;  // front_room + payload
    struct uring_req_header *headers;
    struct iovec iov[2];
    // The request this entry holds for the daemon (0: none), and a reply
    // another thread copied in, which this thread commits.
    _Atomic uint64_t unique;
    _Atomic uint64_t commit_pending;
};

struct scopefs_ring {
    unsigned queues, per_queue, count;
    size_t payload_size;
    int device;
    scopefs_ring_handler handler;
    void *context;
    _Atomic int stopping;
    _Atomic uint64_t served;
    _Atomic unsigned refused;
    _Atomic int error;
    struct ring_thread threads[];
};

static __thread struct ring_thread *current_thread;

unsigned scopefs_ring_queue_count(void) {
    // "0-1", "0-3,5", ...: the highest CPU number plus one.
    FILE *file = fopen("/sys/devices/system/cpu/possible", "re");
    if (!file) return (unsigned)sysconf(_SC_NPROCESSORS_CONF);
    char text[256] = {0};
    size_t length = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[length] = 0;
    long highest = -1;
    for (char *cursor = text; *cursor;) {
        if (*cursor < '0' || *cursor > '9') { cursor++; continue; }  // '-', ',', '\n'
        char *end;
        long value = strtol(cursor, &end, 10);
        if (value > highest) highest = value;
        cursor = end;
    }
    return highest >= 0 ? (unsigned)highest + 1 : 1;
}

scopefs_ring *scopefs_ring_create(unsigned per_queue, size_t payload_size, int *error) {
    unsigned queues = scopefs_ring_queue_count();
    if (per_queue == 0) per_queue = 1;
    unsigned count = queues * per_queue;
    scopefs_ring *ring = calloc(1, sizeof *ring + count * sizeof(struct ring_thread));
    if (!ring) { *error = ENOMEM; return NULL; }
    ring->queues = queues;
    ring->per_queue = per_queue;
    ring->payload_size = payload_size;
    ring->device = -1;
    for (unsigned index = 0; index < count; index++) {
        struct ring_thread *thread = &ring->threads[index];
        thread->ring = ring;
        thread->qid = index % queues;
        pthread_mutex_init(&thread->submit_lock, NULL);
        struct io_uring_params params = {.flags = IORING_SETUP_SQE128};
        int rc = io_uring_queue_init_params(4, &thread->uring, &params);
        if (rc == 0) {
            ring->count = index + 1;
            if (posix_memalign((void **)&thread->buffer, 4096, front_room + payload_size) != 0) rc = -ENOMEM;
            if (rc == 0 && posix_memalign((void **)&thread->headers, 64, sizeof(struct uring_req_header)) != 0) {
                rc = -ENOMEM;
            }
        }
        if (rc != 0) {
            *error = -rc;
            scopefs_ring_stop(ring);
            return NULL;
        }
        memset(thread->headers, 0, sizeof(struct uring_req_header));
        thread->iov[0] = (struct iovec){thread->headers, sizeof(struct uring_req_header)};
        thread->iov[1] = (struct iovec){thread->buffer + front_room, payload_size};
    }
    return ring;
}

static struct io_uring_sqe *command(struct ring_thread *thread, unsigned op, uint64_t commit_id) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&thread->uring);
    if (!sqe) return NULL;
    memset(sqe, 0, 128);
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = thread->ring->device;
    sqe->cmd_op = op;
    sqe->user_data = tag_fetch;
    struct uring_cmd_req *request = (struct uring_cmd_req *)sqe->cmd;
    request->commit_id = commit_id;
    request->qid = (uint16_t)thread->qid;
    if (op == cmd_register) {
        sqe->addr = (uint64_t)(uintptr_t)thread->iov;
        sqe->len = 2;
    }
    return sqe;
}

static int submit(struct ring_thread *thread, unsigned op, uint64_t commit_id) {
    pthread_mutex_lock(&thread->submit_lock);
    int rc = command(thread, op, commit_id) ? io_uring_submit(&thread->uring) : -EBUSY;
    pthread_mutex_unlock(&thread->submit_lock);
    return rc < 0 ? rc : 0;
}

static void wake(struct ring_thread *thread) {
    pthread_mutex_lock(&thread->submit_lock);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&thread->uring);
    if (sqe) {
        memset(sqe, 0, 128);
        io_uring_prep_nop(sqe);
        sqe->user_data = tag_wake;
        io_uring_submit(&thread->uring);
    }
    pthread_mutex_unlock(&thread->submit_lock);
}

static void fail(struct ring_thread *thread, int error) {
    atomic_fetch_add(&thread->ring->refused, 1);
    atomic_store(&thread->ring->error, error);
}

/// Runs the request the kernel put in this entry.
static void handle(struct ring_thread *thread) {
    struct in_header header;
    memcpy(&header, thread->headers->in_out, sizeof header);
    uint32_t payload = thread->headers->ent.payload_sz;
    size_t op_size = header.len >= in_header_size + payload ? header.len - in_header_size - payload : op_area_size + 1;
    if (op_size > op_area_size || payload > thread->ring->payload_size) {
        // Not a request this engine can lay out: answered EIO, never run.
        struct out_header reply = {.len = out_header_size, .error = -EIO, .unique = header.unique};
        memcpy(thread->headers->in_out, &reply, sizeof reply);
        thread->headers->ent.payload_sz = 0;
        if (submit(thread, cmd_commit_and_fetch, header.unique) != 0) fail(thread, EIO);
        return;
    }
    unsigned char *start = thread->buffer + front_room - op_size - in_header_size;
    memcpy(start, &header, in_header_size);
    memcpy(start + in_header_size, thread->headers->op_in, op_size);
    atomic_store(&thread->unique, header.unique);
    atomic_fetch_add(&thread->ring->served, 1);
    thread->ring->handler(start, header.len, thread->ring->context);
}

static void *serve(void *argument) {
    struct ring_thread *thread = argument;
    current_thread = thread;
    // The loop's thread takes the signals that end a session (FuseSession).
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGINT);
    sigaddset(&blocked, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &blocked, NULL);
    scopefs_ring *ring = thread->ring;
    int tries = 0;
    int rc = submit(thread, cmd_register, 0);
    if (rc != 0) { fail(thread, -rc); return NULL; }
    while (!atomic_load(&ring->stopping)) {
        uint64_t pending = atomic_exchange(&thread->commit_pending, 0);
        if (pending != 0 && submit(thread, cmd_commit_and_fetch, pending) != 0) break;
        struct io_uring_cqe *cqe;
        rc = io_uring_wait_cqe(&thread->uring, &cqe);
        if (rc == -EINTR) continue;
        if (rc < 0) break;
        uint64_t tag = cqe->user_data;
        int result = cqe->res;
        io_uring_cqe_seen(&thread->uring, cqe);
        if (tag == tag_wake) continue;
        if (result == -EAGAIN && tries++ < 1000) {
            // Not initialized yet: the INIT reply is still on its way in.
            usleep(1000);
            if (submit(thread, cmd_register, 0) != 0) break;
            continue;
        }
        if (result < 0) {
            // ENOTCONN or ECONNABORTED: the connection ended. Anything
            // else before a first request: the kernel refused the entry and
            // serves the connection through /dev/fuse.
            if (result != -ENOTCONN && result != -ECONNABORTED) fail(thread, -result);
            break;
        }
        handle(thread);
    }
    current_thread = NULL;
    return NULL;
}

int scopefs_ring_start(scopefs_ring *ring, int device, scopefs_ring_handler handler, void *context) {
    ring->device = device;
    ring->handler = handler;
    ring->context = context;
    for (unsigned index = 0; index < ring->count; index++) {
        struct ring_thread *thread = &ring->threads[index];
        int rc = pthread_create(&thread->thread, NULL, serve, thread);
        if (rc != 0) {
            // A queue left without an entry would hold every request back:
            // a refused registration (an iovec count the kernel rejects)
            // turns the ring off for the connection.
            fail(thread, rc);
            struct io_uring_sqe *sqe = command(thread, cmd_register, 0);
            if (sqe) {
                sqe->len = 1;
                io_uring_submit(&thread->uring);
            }
            return -rc;
        }
        thread->started = 1;
    }
    return 0;
}

ssize_t scopefs_ring_reply(scopefs_ring *ring, const struct iovec *iov, int count) {
    if (!ring || count < 1 || iov[0].iov_len < out_header_size) {
        errno = ENOENT;
        return -1;
    }
    struct out_header header;
    memcpy(&header, iov[0].iov_base, sizeof header);
    if (header.unique == 0) {
        errno = ENOENT;
        return -1;
    }
    struct ring_thread *thread = current_thread;
    if (!thread || thread->ring != ring || atomic_load(&thread->unique) != header.unique) {
        thread = NULL;
        for (unsigned index = 0; index < ring->count && !thread; index++) {
            if (atomic_load(&ring->threads[index].unique) == header.unique) thread = &ring->threads[index];
        }
    }
    uint64_t expected = header.unique;
    if (!thread || !atomic_compare_exchange_strong(&thread->unique, &expected, 0)) {
        errno = ENOENT;
        return -1;
    }
    // The reply's body, wherever libfuse split it, into the payload.
    size_t written = 0, body = 0;
    unsigned char *payload = thread->buffer + front_room;
    for (int index = 0; index < count; index++) {
        const unsigned char *base = iov[index].iov_base;
        size_t length = iov[index].iov_len;
        written += length;
        if (index == 0) {
            base += out_header_size;
            length -= out_header_size;
        }
        if (body + length > ring->payload_size) {
            header.error = -EIO;
            body = 0;
            break;
        }
        memcpy(payload + body, base, length);
        body += length;
    }
    if (header.error != 0) body = 0;
    header.len = (uint32_t)(out_header_size + body);
    memcpy(thread->headers->in_out, &header, sizeof header);
    thread->headers->ent.payload_sz = (uint32_t)body;
    thread->headers->ent.commit_id = header.unique;
    if (thread == current_thread) {
        if (submit(thread, cmd_commit_and_fetch, header.unique) != 0) {
            errno = EIO;
            return -1;
        }
    } else {
        atomic_store(&thread->commit_pending, header.unique);
        wake(thread);
    }
    return (ssize_t)written;
}

void scopefs_ring_stop(scopefs_ring *ring) {
    if (!ring) return;
    atomic_store(&ring->stopping, 1);
    int stuck = 0;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    for (unsigned index = 0; index < ring->count; index++) {
        struct ring_thread *thread = &ring->threads[index];
        if (!thread->started) continue;
        wake(thread);
        if (pthread_timedjoin_np(thread->thread, NULL, &deadline) != 0) stuck = 1;
    }
    if (stuck) return;
    for (unsigned index = 0; index < ring->count; index++) {
        struct ring_thread *thread = &ring->threads[index];
        io_uring_queue_exit(&thread->uring);
        free(thread->buffer);
        free(thread->headers);
        pthread_mutex_destroy(&thread->submit_lock);
    }
    free(ring);
}

void scopefs_ring_report(const scopefs_ring *ring, struct scopefs_ring_report *report) {
    memset(report, 0, sizeof *report);
    if (!ring) return;
    report->queues = ring->queues;
    report->threads = ring->count;
    report->served = atomic_load(&ring->served);
    report->refused = atomic_load(&ring->refused);
    report->error = atomic_load(&ring->error);
}
