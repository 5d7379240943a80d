// Only this file sees _GNU_SOURCE: defining it in a header that Swift
// imports breaks Glibc's module (conflicting fd_set).
#define _GNU_SOURCE
#include <fcntl.h>
#include <errno.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/statfs.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <sched.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "shims.h"

const int scopefs_o_direct = O_DIRECT;
const int scopefs_o_path = O_PATH;
const int scopefs_o_tmpfile = O_TMPFILE;
const int scopefs_seek_data = SEEK_DATA;
const int scopefs_seek_hole = SEEK_HOLE;
const int scopefs_at_empty_path = AT_EMPTY_PATH;
const short scopefs_posix_spawn_setsid = POSIX_SPAWN_SETSID;
const int scopefs_netlink_connector = NETLINK_CONNECTOR;
const unsigned long scopefs_tiocsti = TIOCSTI;
const unsigned long scopefs_tioclinux = TIOCLINUX;
const unsigned long scopefs_clone_namespace_flags[7] = {
    CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
};
const int scopefs_clone_newns = CLONE_NEWNS;

int scopefs_identity_at(int dirfd, const char *path, struct scopefs_identity *identity) {
    struct statx info;
    if (statx(dirfd, path, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_INO | STATX_BTIME, &info) != 0) {
        return -1;
    }
    identity->device = makedev(info.stx_dev_major, info.stx_dev_minor);
    identity->inode = info.stx_ino;
    if (info.stx_mask & STATX_BTIME) {
        identity->birth_seconds = info.stx_btime.tv_sec;
        identity->birth_nanoseconds = info.stx_btime.tv_nsec;
    } else {
        identity->birth_seconds = 0;
        identity->birth_nanoseconds = 0;
    }
    identity->is_directory = S_ISDIR(info.stx_mode);
    return 0;
}

int scopefs_fchmodat2(int dirfd, const char *path, unsigned int mode, int flags) {
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452  /* Linux 6.6; glibc 2.36 has neither wrapper nor number */
#endif
    return (int)syscall(SYS_fchmodat2, dirfd, path, mode, flags);
}

/* Linux 6.13; the numbers are the generic table's, the same on every
   architecture. */
#ifndef SYS_setxattrat
#define SYS_setxattrat 463
#define SYS_getxattrat 464
#define SYS_listxattrat 465
#define SYS_removexattrat 466
#endif

/* include/uapi/linux/xattr.h of 6.13: where the value is and how big. */
struct scopefs_xattr_args {
    uint64_t value;
    uint32_t size;
    uint32_t flags;
};

ssize_t scopefs_getxattrat(int dirfd, const char *path, unsigned int at_flags, const char *name, void *value,
                           size_t size) {
    struct scopefs_xattr_args args = {(uint64_t)(uintptr_t)value, (uint32_t)size, 0};
    return syscall(SYS_getxattrat, dirfd, path, at_flags, name, &args, sizeof args);
}

ssize_t scopefs_listxattrat(int dirfd, const char *path, unsigned int at_flags, char *list, size_t size) {
    return syscall(SYS_listxattrat, dirfd, path, at_flags, list, size);
}

int scopefs_setxattrat(int dirfd, const char *path, unsigned int at_flags, const char *name, const void *value,
                       size_t size, int flags) {
    struct scopefs_xattr_args args = {(uint64_t)(uintptr_t)value, (uint32_t)size, (uint32_t)flags};
    return (int)syscall(SYS_setxattrat, dirfd, path, at_flags, name, &args, sizeof args);
}

int scopefs_removexattrat(int dirfd, const char *path, unsigned int at_flags, const char *name) {
    return (int)syscall(SYS_removexattrat, dirfd, path, at_flags, name);
}

/* A filesystem mark sees every write of the machine to that file system
   (builds, databases): the kernel's default queue of 16,384 events fills
   while the daemon waits for a core, and a full queue drops the rest, a
   granted file's write among them. The queue is unbounded (the daemon
   drops foreign events after one hash); bounded only where the kernel
   refuses that. */
int scopefs_fanotify_init(void) {
    const unsigned int flags = FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_CLOEXEC | FAN_NONBLOCK;
    int fanotify = fanotify_init(flags | FAN_UNLIMITED_QUEUE, O_RDONLY | O_LARGEFILE);
    if (fanotify < 0 && errno == EPERM) fanotify = fanotify_init(flags, O_RDONLY | O_LARGEFILE);
    return fanotify;
}

/* Names (create, delete, moves), attributes and content; FAN_ONDIR for
   folders. FAN_MODIFY (not only FAN_CLOSE_WRITE): a host writer that keeps
   its file open must not leave stale pages behind. */
static const uint64_t fanotify_mask =
    FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_ATTRIB | FAN_MODIFY | FAN_ONDIR;

int scopefs_fanotify_mark_filesystem(int fanotify, const char *path) {
    return fanotify_mark(fanotify, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, fanotify_mask, AT_FDCWD, path);
}

/* fsid, then handle type, then the handle's bytes: the order the event's
   info record has them in (after handle_bytes, which the length gives). */
static size_t make_key(unsigned char *key, size_t capacity, const void *fsid, int type, const void *bytes, size_t length) {
    if (8 + 4 + length > capacity) return 0;
    memcpy(key, fsid, 8);
    memcpy(key + 8, &type, 4);
    memcpy(key + 12, bytes, length);
    return 12 + length;
}

int scopefs_directory_key(int fd, unsigned char *key, size_t capacity) {
    struct statfs info;
    if (fstatfs(fd, &info) != 0) return -1;
    union {
        struct file_handle handle;
        unsigned char space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
    } buffer;
    buffer.handle.handle_bytes = MAX_HANDLE_SZ;
    int mount_id;
    if (name_to_handle_at(fd, "", &buffer.handle, &mount_id, AT_EMPTY_PATH) != 0) return -1;
    size_t length = make_key(key, capacity, &info.f_fsid, buffer.handle.handle_type, buffer.handle.f_handle,
                             buffer.handle.handle_bytes);
    if (length == 0) { errno = EOVERFLOW; return -1; }
    return (int)length;
}

long scopefs_fanotify_event(const void *buffer, size_t length, size_t offset, struct scopefs_host_event *event) {
    const unsigned char *base = (const unsigned char *)buffer;
    if (offset + sizeof(struct fanotify_event_metadata) > length) return -1;
    const struct fanotify_event_metadata *metadata = (const void *)(base + offset);
    if (metadata->event_len < sizeof(*metadata) || offset + metadata->event_len > length) return -1;
    memset(event, 0, sizeof(*event));
    event->watch = -1;
    event->mask = metadata->mask;
    event->pid = metadata->pid;
    event->overflow = (metadata->mask & FAN_Q_OVERFLOW) != 0;
    static _Thread_local unsigned char key[SCOPEFS_DIRECTORY_KEY_MAX];  /* valid until the next call */
    size_t at = metadata->metadata_len;
    while (at + sizeof(struct fanotify_event_info_header) <= metadata->event_len) {
        const struct fanotify_event_info_header *header = (const void *)(base + offset + at);
        if (header->len < sizeof(*header) || at + header->len > metadata->event_len) break;
        if (header->info_type == FAN_EVENT_INFO_TYPE_DFID_NAME || header->info_type == FAN_EVENT_INFO_TYPE_DFID) {
            const struct fanotify_event_info_fid *fid = (const void *)header;
            const struct file_handle *handle = (const void *)fid->handle;
            size_t fixed = sizeof(*fid) + sizeof(struct file_handle);
            if (fixed + handle->handle_bytes <= header->len) {
                event->key_length = make_key(key, sizeof(key), &fid->fsid, handle->handle_type, handle->f_handle,
                                             handle->handle_bytes);
                event->key = event->key_length > 0 ? key : NULL;
                if (header->info_type == FAN_EVENT_INFO_TYPE_DFID_NAME && fixed + handle->handle_bytes < header->len) {
                    const char *name = (const char *)handle->f_handle + handle->handle_bytes;
                    size_t room = header->len - fixed - handle->handle_bytes;
                    event->name = memchr(name, 0, room) ? name : NULL;
                }
            }
            break;
        }
        at += header->len;
    }
    return (long)(offset + metadata->event_len);
}

int scopefs_inotify_init(void) { return inotify_init1(IN_NONBLOCK | IN_CLOEXEC); }

int scopefs_inotify_watch(int inotify, const char *path) {
    return inotify_add_watch(inotify, path,
        IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_MODIFY | IN_ONLYDIR);
}

int scopefs_inotify_unwatch(int inotify, int watch) { return inotify_rm_watch(inotify, watch); }

long scopefs_inotify_event(const void *buffer, size_t length, size_t offset, struct scopefs_host_event *event) {
    const unsigned char *base = (const unsigned char *)buffer;
    if (offset + sizeof(struct inotify_event) > length) return -1;
    const struct inotify_event *raw = (const void *)(base + offset);
    size_t size = sizeof(struct inotify_event) + raw->len;
    if (offset + size > length) return -1;
    memset(event, 0, sizeof(*event));
    event->mask = raw->mask;
    event->watch = raw->wd;
    event->overflow = (raw->mask & IN_Q_OVERFLOW) != 0;
    event->name = raw->len > 0 ? raw->name : NULL;
    event->cookie = raw->cookie;
    return (long)(offset + size);
}

int scopefs_handle_of(int fd, unsigned char *bytes, int capacity, int *type) {
    union {
        struct file_handle handle;
        unsigned char space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
    } buffer;
    buffer.handle.handle_bytes = MAX_HANDLE_SZ;
    int mount_id;
    if (name_to_handle_at(fd, "", &buffer.handle, &mount_id, AT_EMPTY_PATH) != 0) return -1;
    if ((int)buffer.handle.handle_bytes > capacity) {
        errno = EOVERFLOW;
        return -1;
    }
    memcpy(bytes, buffer.handle.f_handle, buffer.handle.handle_bytes);
    *type = buffer.handle.handle_type;
    return (int)buffer.handle.handle_bytes;
}

int scopefs_open_by_handle(int mount_fd, const unsigned char *bytes, int length, int type, int flags) {
    union {
        struct file_handle handle;
        unsigned char space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
    } buffer;
    if (length < 0 || length > MAX_HANDLE_SZ) {
        errno = EINVAL;
        return -1;
    }
    buffer.handle.handle_bytes = (unsigned int)length;
    buffer.handle.handle_type = type;
    memcpy(buffer.handle.f_handle, bytes, (size_t)length);
    return open_by_handle_at(mount_fd, &buffer.handle, flags);
}

long scopefs_file_system_type(int fd) {
    struct statfs info;
    if (fstatfs(fd, &info) != 0) return -1;
    return (long)info.f_type;
}

int scopefs_ofd_lock(int fd) {
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    return fcntl(fd, F_OFD_SETLK, &lock);
}

int scopefs_ofd_locked(int fd) {
    struct flock lock = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return -1;
    return lock.l_type != F_UNLCK;
}
