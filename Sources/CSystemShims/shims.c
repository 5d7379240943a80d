// Only this file sees _GNU_SOURCE: defining it in a header that Swift
// imports breaks Glibc's module (conflicting fd_set).
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "shims.h"

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
