#define _GNU_SOURCE
#include "portal_bus.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

// One object of each kind per process: the handlers live here so the
// vtables' entries (which take the object's userdata) can reach them.
static scopefs_portal_handler current_handler;
static scopefs_portal_handler chooser_handler;
static scopefs_portal_handler request_handler;
static scopefs_portal_handler transfer_handler;

static int dispatch_transfer(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    if (transfer_handler == NULL) return -ENOSYS;
    return transfer_handler(message, userdata, error);
}

static int get_transfer_version(
    sd_bus *bus, const char *path, const char *interface, const char *property, sd_bus_message *reply,
    void *userdata, sd_bus_error *error) {
    (void)bus, (void)path, (void)interface, (void)property, (void)userdata, (void)error;
    return sd_bus_message_append_basic(reply, 'u', &(uint32_t){1});
}

// The signatures of xdg-desktop-portal's data/org.freedesktop.portal.FileTransfer.xml, version 1.
static const sd_bus_vtable transfer_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("version", "u", get_transfer_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_METHOD("StartTransfer", "a{sv}", "s", dispatch_transfer, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("AddFiles", "saha{sv}", "", dispatch_transfer, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("RetrieveFiles", "sa{sv}", "as", dispatch_transfer, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("StopTransfer", "s", "", dispatch_transfer, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL("TransferClosed", "s", 0),
    SD_BUS_VTABLE_END,
};

int scopefs_portal_add_transfer(sd_bus *bus, const char *path, scopefs_portal_handler handler, void *context) {
    transfer_handler = handler;
    return sd_bus_add_object_vtable(bus, NULL, path, "org.freedesktop.portal.FileTransfer", transfer_vtable, context);
}

int scopefs_portal_emit_transfer_closed(sd_bus *bus, const char *path, const char *key) {
    return sd_bus_emit_signal(bus, path, "org.freedesktop.portal.FileTransfer", "TransferClosed", "s", key);
}

static int dispatch(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    if (current_handler == NULL) return -ENOSYS;
    return current_handler(message, userdata, error);
}

static int dispatch_chooser(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    if (chooser_handler == NULL) return -ENOSYS;
    return chooser_handler(message, userdata, error);
}

static int dispatch_request(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    if (request_handler == NULL) return -ENOSYS;
    return request_handler(message, userdata, error);
}

static int get_version(
    sd_bus *bus, const char *path, const char *interface, const char *property, sd_bus_message *reply,
    void *userdata, sd_bus_error *error) {
    (void)bus, (void)path, (void)interface, (void)property, (void)userdata, (void)error;
    return sd_bus_message_append_basic(reply, 'u', &(uint32_t){5});
}

// The signatures of xdg-desktop-portal's data/org.freedesktop.portal.Documents.xml, version 5.
static const sd_bus_vtable documents_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("version", "u", get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_METHOD("GetMountPoint", "", "ay", dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Add", "hbb", "s", dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("AddNamed", "haybb", "s", dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("AddFull", "ahusas", "asa{sv}", dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("AddNamedFull", "hayusas", "sa{sv}", dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("GrantPermissions", "ssas", "", dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("RevokePermissions", "ssas", "", dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Delete", "s", "", dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Lookup", "ay", "s", dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Info", "s", "aya{sas}", dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("List", "s", "a{say}", dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("GetHostPaths", "as", "a{say}", dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END,
};

int scopefs_portal_add_object(
    sd_bus *bus, sd_bus_slot **slot, const char *path, scopefs_portal_handler handler, void *context) {
    current_handler = handler;
    return sd_bus_add_object_vtable(bus, slot, path, "org.freedesktop.portal.Documents", documents_vtable, context);
}

// The signatures of xdg-desktop-portal's
// data/org.freedesktop.impl.portal.FileChooser.xml (1.16): handle,
// app_id, parent_window, title, options; the reply is response, results.
static const sd_bus_vtable chooser_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("OpenFile", "osssa{sv}", "ua{sv}", dispatch_chooser, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("SaveFile", "osssa{sv}", "ua{sv}", dispatch_chooser, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("SaveFiles", "osssa{sv}", "ua{sv}", dispatch_chooser, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END,
};

// org.freedesktop.impl.portal.Request: the frontend closes a request the
// client gave up on.
static const sd_bus_vtable request_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Close", "", "", dispatch_request, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END,
};

int scopefs_portal_add_chooser(
    sd_bus *bus, const char *path, scopefs_portal_handler chooser, scopefs_portal_handler request,
    void *context) {
    chooser_handler = chooser;
    request_handler = request;
    int r = sd_bus_add_object_vtable(
        bus, NULL, path, "org.freedesktop.impl.portal.FileChooser", chooser_vtable, context);
    if (r < 0) return r;
    // Every request handle lives below /org/freedesktop/portal/desktop/request.
    return sd_bus_add_fallback_vtable(
        bus, NULL, "/org/freedesktop/portal/desktop/request", "org.freedesktop.impl.portal.Request",
        request_vtable, NULL, context);
}

int scopefs_portal_caller(sd_bus_message *message, pid_t *pid, uid_t *uid) {
    sd_bus_creds *creds = NULL;
    int r = sd_bus_query_sender_creds(message, SD_BUS_CREDS_PID | SD_BUS_CREDS_EUID | SD_BUS_CREDS_AUGMENT, &creds);
    if (r < 0) return r;
    r = sd_bus_creds_get_pid(creds, pid);
    if (r >= 0) r = sd_bus_creds_get_euid(creds, uid);
    sd_bus_creds_unref(creds);
    return r < 0 ? r : 0;
}

int scopefs_portal_inspect_fd(int fd, struct scopefs_portal_fd_info *info) {
    memset(info, 0, sizeof *info);
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -EBADF;
    struct stat by_fd, by_path;
    if (fstat(fd, &by_fd) != 0) return -EBADF;
    // An O_PATH|O_NOFOLLOW descriptor of a symlink names the link, not a file.
    if (S_ISLNK(by_fd.st_mode)) return -ELOOP;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(proc, info->path, sizeof info->path - 1);
    if (length < 0) return -errno;
    if ((size_t)length >= sizeof info->path - 1) return -ENAMETOOLONG;
    info->path[length] = 0;
    // Not a path (a socket, a pipe, an anonymous inode) or a deleted file.
    if (info->path[0] != '/') return -ENOENT;
    if (stat(info->path, &by_path) != 0 || by_path.st_dev != by_fd.st_dev || by_path.st_ino != by_fd.st_ino)
        return -ENOENT;
    info->is_directory = S_ISDIR(by_fd.st_mode);
    info->is_regular = S_ISREG(by_fd.st_mode);
    info->is_o_path = (flags & O_PATH) == O_PATH;
    if (info->is_o_path) {
        info->readable = access(info->path, R_OK) == 0;
        info->writable = access(info->path, W_OK) == 0;
    } else {
        int mode = flags & O_ACCMODE;
        info->readable = mode == O_RDONLY || mode == O_RDWR;
        info->writable = mode == O_WRONLY || mode == O_RDWR;
    }
    return 0;
}

// linux/magic.h's FUSE_SUPER_MAGIC.
#define SCOPEFS_FUSE_SUPER_MAGIC 0x65735546

int scopefs_portal_inspect_mount_fd(int fd, struct scopefs_portal_fd_mount *info) {
    memset(info, 0, sizeof *info);
    int flags = fcntl(fd, F_GETFL);
    struct stat status;
    struct statfs system;
    if (flags < 0 || fstat(fd, &status) != 0 || fstatfs(fd, &system) != 0) return -EBADF;
    info->on_fuse = system.f_type == SCOPEFS_FUSE_SUPER_MAGIC;
    info->device = status.st_dev;
    info->is_directory = S_ISDIR(status.st_mode);
    if ((flags & O_PATH) != O_PATH) {
        int mode = flags & O_ACCMODE;
        info->readable = mode == O_RDONLY || mode == O_RDWR;
        info->writable = mode == O_WRONLY || mode == O_RDWR;
    }
    return 0;
}

long scopefs_portal_fd_attribute(int fd, const char *name, void *value, unsigned long size) {
    ssize_t length = fgetxattr(fd, name, value, size);
    return length < 0 ? -errno : length;
}
