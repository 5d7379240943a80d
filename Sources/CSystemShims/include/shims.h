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
static const int scopefs_clone_newns = 0x00020000;

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

/// fchmodat2(2) (Linux 6.6+): with AT_EMPTY_PATH it changes the mode of an
/// O_PATH descriptor's file. -1 with ENOSYS on older kernels.
int scopefs_fchmodat2(int dirfd, const char *path, unsigned int mode, int flags);

/// O_DIRECT and O_PATH are hidden behind _GNU_SOURCE too (values for Linux).
static const int scopefs_o_direct = 040000;
static const int scopefs_o_path = 010000000;

/// O_TMPFILE (an anonymous file in a directory, linked into place with
/// linkat); its value differs between architectures, so libc's own.
extern const int scopefs_o_tmpfile;
#endif
