// Only this file sees _GNU_SOURCE: defining it in a header that Swift
// imports breaks Glibc's module (conflicting fd_set).
#define _GNU_SOURCE
#include <fcntl.h>
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
