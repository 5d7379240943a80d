#ifndef SCOPEFS_CSYSTEMSHIMS_H
#define SCOPEFS_CSYSTEMSHIMS_H
// GNU-only calls that Swift's Glibc module does not expose (they need
// _GNU_SOURCE, and defining it in a Swift-imported header breaks fd_set).
// The prototypes are glibc's own; the symbols are in libc.
#include <sys/types.h>
#include <sys/xattr.h>
#include <sys/socket.h>
#include <linux/netlink.h>

int fallocate(int fd, int mode, off_t offset, off_t len);
ssize_t copy_file_range(int fd_in, off_t *off_in, int fd_out, off_t *off_out, size_t len, unsigned int flags);
int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
ssize_t splice(int fd_in, __loff_t *off_in, int fd_out, __loff_t *off_out, size_t len, unsigned int flags);

#include <spawn.h>
int unshare(int flags);
int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *actions, const char *path);
/// Closes every descriptor from `from` up in the child (glibc 2.34): a
/// spawned extension inherits nothing of the daemon but its three pipes.
int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
/// pipe(2) with O_CLOEXEC/O_NONBLOCK set atomically, so no other thread's
/// spawn inherits a pipe end in between.
int pipe2(int pipefd[2], int flags);

int malloc_trim(size_t pad);

int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);

/// A descriptor that polls readable once the process `pid` has ended (glibc 2.36).
int pidfd_open(pid_t pid, unsigned int flags);

/// struct ucred (SO_PEERCRED) is hidden behind _GNU_SOURCE; same layout.
struct scopefs_ucred {
    pid_t pid;
    uid_t uid;
    gid_t gid;
};

#include <stdint.h>

/// A file's identity including its birth time: inode numbers are reused,
/// a birth time is not (statx, STATX_BTIME; 0 where the file system has none).
struct scopefs_identity {
    uint64_t device;
    uint64_t inode;
    int64_t birth_seconds;
    uint32_t birth_nanoseconds;
    int is_directory;
};

/// statx(dirfd, path, AT_SYMLINK_NOFOLLOW); 0 or -1 with errno.
int scopefs_identity_at(int dirfd, const char *path, struct scopefs_identity *identity);

/// The type of the file system of the file open as `fd` (fstatfs's
/// f_type, a linux/magic.h number), or -1 with errno.
long scopefs_file_system_type(int fd);

/// fchmodat2(2) (Linux 6.6+): with AT_EMPTY_PATH it changes the mode of an
/// O_PATH descriptor's file. -1 with ENOSYS on older kernels.
int scopefs_fchmodat2(int dirfd, const char *path, unsigned int mode, int flags);

/// getxattrat(2), listxattrat, setxattrat and removexattrat (Linux 6.13+):
/// an extended attribute of `path` under `dirfd` (`at_flags`:
/// AT_SYMLINK_NOFOLLOW), so the kernel walks one name instead of a
/// /proc/self/fd path. glibc 2.36 has neither wrappers nor numbers. -1 with
/// ENOSYS on older kernels; otherwise what the *xattr calls return.
ssize_t scopefs_getxattrat(int dirfd, const char *path, unsigned int at_flags, const char *name, void *value,
                           size_t size);
ssize_t scopefs_listxattrat(int dirfd, const char *path, unsigned int at_flags, char *list, size_t size);
int scopefs_setxattrat(int dirfd, const char *path, unsigned int at_flags, const char *name, const void *value,
                       size_t size, int flags);
int scopefs_removexattrat(int dirfd, const char *path, unsigned int at_flags, const char *name);

/// A file's handle (name_to_handle_at of the descriptor itself, AT_EMPTY_PATH):
/// its bytes into `bytes` (at most `capacity`), its type into `type`.
/// Returns the number of bytes, or -1 with errno (EOPNOTSUPP where the file
/// system has no handles, EOVERFLOW if `capacity` is too small).
int scopefs_handle_of(int fd, unsigned char *bytes, int capacity, int *type);

/// open_by_handle_at(mount_fd, handle, flags) for a handle from
/// scopefs_handle_of; -1 with errno (EPERM without CAP_DAC_READ_SEARCH,
/// ESTALE once the file is gone).
int scopefs_open_by_handle(int mount_fd, const unsigned char *bytes, int length, int type, int flags);

/// Constants hidden behind _GNU_SOURCE (or missing from Swift's Glibc
/// module). Their values differ between architectures (O_DIRECT is O_DIRECTORY
/// on arm64), so they are libc's own, defined in shims.c, never literals.
extern const int scopefs_o_direct;
extern const int scopefs_o_path;
/// O_TMPFILE: an anonymous file in a directory, linked into place with linkat.
extern const int scopefs_o_tmpfile;
extern const int scopefs_at_empty_path;
/// lseek's whences for sparse files (SEEK_DATA, SEEK_HOLE).
extern const int scopefs_seek_data;
extern const int scopefs_seek_hole;
extern const short scopefs_posix_spawn_setsid;
extern const int scopefs_netlink_connector;
extern const unsigned long scopefs_tiocsti;
extern const unsigned long scopefs_tioclinux;
/// clone(2) flags that make a new namespace, in one mask.
extern const unsigned long scopefs_clone_namespace_flags[7];
extern const int scopefs_clone_newns;

/// Host-change channels (docs/DECISIONS.md, decision 33, "Host changes: one
/// channel, exact invalidation"): fanotify with directory file handles and names for a
/// daemon with CAP_SYS_ADMIN, else inotify.
#include <stddef.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>

/// fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME, ...), non-blocking,
/// close-on-exec: a descriptor, or -1 with errno.
int scopefs_fanotify_init(void);
/// Marks the whole file system holding `path` for the changes that can make
/// a cached entry or attribute wrong (names, attributes, content), on
/// folders too. 0 or -1 with errno.
int scopefs_fanotify_mark_filesystem(int fanotify, const char *path);
/// The longest directory key `scopefs_directory_key` makes.
#define SCOPEFS_DIRECTORY_KEY_MAX 192
/// The key fanotify reports a directory by: its file system's fsid, the
/// handle type and the handle's bytes (name_to_handle_at). Its length, or
/// -1 with errno.
int scopefs_directory_key(int fd, unsigned char *key, size_t capacity);

/// One event decoded from what read(2) returned.
struct scopefs_host_event {
    /// What changed (FAN_* or IN_* bits); `overflow` set when events were lost.
    uint64_t mask;
    int overflow;
    /// fanotify: the process that made the change; inotify: 0.
    int32_t pid;
    /// inotify: the watch descriptor; fanotify: -1.
    int32_t watch;
    /// fanotify: the directory's key (as `scopefs_directory_key`); else NULL.
    const unsigned char *key;
    size_t key_length;
    /// The entry's name in that directory; NULL or "" for the folder itself.
    const char *name;
    /// inotify: the cookie joining the two halves of a rename; fanotify: 0.
    uint32_t cookie;
};
/// Decodes the fanotify event at `offset` of `buffer`; returns the offset
/// of the next one, or -1 when no whole event is left.
long scopefs_fanotify_event(const void *buffer, size_t length, size_t offset, struct scopefs_host_event *event);
/// The same for inotify.
long scopefs_inotify_event(const void *buffer, size_t length, size_t offset, struct scopefs_host_event *event);
/// inotify_init1(IN_NONBLOCK | IN_CLOEXEC).
int scopefs_inotify_init(void);
/// inotify_add_watch(path) for the changes that matter to cached entries
/// and attributes: a watch descriptor or -1 with errno.
int scopefs_inotify_watch(int inotify, const char *path);
int scopefs_inotify_unwatch(int inotify, int watch);

/// A word of a page shared between processes (`ServedPolicyPage`), read
/// and written whole: the daemon stores, the portal's layout loads.
static inline uint64_t scopefs_shared_load(const uint64_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }
static inline void scopefs_shared_store(uint64_t *word, uint64_t value) {
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
}
static inline void scopefs_shared_add(uint64_t *word, uint64_t value) {
    __atomic_fetch_add(word, value, __ATOMIC_ACQ_REL);
}
/// An open file description lock (F_OFD_SETLK) on all of `fd`'s file, for
/// writing: held until the description is closed, by the process's exit
/// too. 0, or -1 with errno (EAGAIN: another description holds one).
int scopefs_ofd_lock(int fd);
/// Whether another open file description holds a lock on `fd`'s file
/// (F_OFD_GETLK, which takes none): 1, 0, or -1 with errno.
int scopefs_ofd_locked(int fd);
#endif
