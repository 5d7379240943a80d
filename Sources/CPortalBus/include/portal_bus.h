// The document portal's D-Bus object on sd-bus (Debian's libsystemd-dev).
// sd-bus describes an object with a vtable built from C macros, which Swift
// cannot expand; this shim builds it once and sends every method call to
// one handler, which Swift supplies (Sources/Portal/DocumentsObject.swift).
#ifndef SCOPEFS_PORTAL_BUS_H
#define SCOPEFS_PORTAL_BUS_H

#include <systemd/sd-bus.h>

/// Handles one method call of org.freedesktop.portal.Documents; the method
/// is `sd_bus_message_get_member(message)`. sd-bus has already checked the
/// arguments' signature against the vtable (a mismatch is answered with
/// org.freedesktop.DBus.Error.InvalidArgs before this runs).
typedef int (*scopefs_portal_handler)(sd_bus_message *message, void *context, sd_bus_error *error);

/// Adds the Documents object (interface version 5) at `path`, calling
/// `handler` with `context` for each method; its `version` property is 5.
int scopefs_portal_add_object(
    sd_bus *bus, sd_bus_slot **slot, const char *path, scopefs_portal_handler handler, void *context);

/// Adds org.freedesktop.impl.portal.FileChooser at `path` (OpenFile,
/// SaveFile, SaveFiles to `chooser`) and org.freedesktop.impl.portal.Request
/// on every object below /org/freedesktop/portal/desktop/request (Close to
/// `request`), both with `context`.
int scopefs_portal_add_chooser(
    sd_bus *bus, const char *path, scopefs_portal_handler chooser, scopefs_portal_handler request,
    void *context);

/// Adds org.freedesktop.portal.FileTransfer (version 1) at `path`, calling
/// `handler` with `context` for each method.
int scopefs_portal_add_transfer(sd_bus *bus, const char *path, scopefs_portal_handler handler, void *context);

/// Emits FileTransfer's TransferClosed(key) from `path` (sd_bus_emit_signal
/// is variadic, which Swift cannot call).
int scopefs_portal_emit_transfer_closed(sd_bus *bus, const char *path, const char *key);

/// Who sent `message`: pid and effective uid, from the bus's credentials
/// (SO_PEERCRED of the caller's connection). 0 or a negative errno.
int scopefs_portal_caller(sd_bus_message *message, pid_t *pid, uid_t *uid);

/// What a descriptor passed in a call shows of its file. The descriptor
/// proves the caller can reach the file, as xdg-document-portal reads it:
/// `readable`/`writable` come from its access mode, or for an O_PATH
/// descriptor (which needs no permission on the file itself) from
/// access(2) on the path, as the portal's own user, which is the caller's.
struct scopefs_portal_fd_info {
    char path[4096];
    int is_directory;
    int is_regular;
    int readable;
    int writable;
    int is_o_path;
};

/// Fills `info` for `fd`: the path /proc/self/fd names, checked to still
/// be the descriptor's file (same device and inode, not deleted). 0, or
/// -EBADF (not a descriptor), -ELOOP (a symlink itself, O_NOFOLLOW),
/// -ENOENT (file gone or renamed away), -ENAMETOOLONG.
int scopefs_portal_inspect_fd(int fd, struct scopefs_portal_fd_info *info);

/// What a descriptor of a FUSE mount shows of itself, without its path
/// (which names another mount namespace's mounts when a sandboxed app
/// sent it): its device, whether a folder, what it was opened for
/// (O_PATH: neither), and the named attribute's value (ScopeFS's
/// `user.scopefs.*`).
struct scopefs_portal_fd_mount {
    int on_fuse;
    unsigned long long device;
    int is_directory;
    int readable;
    int writable;
};

/// Fills `info` for `fd`: 0, or -EBADF.
int scopefs_portal_inspect_mount_fd(int fd, struct scopefs_portal_fd_mount *info);

/// fgetxattr(2) of `fd`: the value's length, or -errno (-ERANGE when
/// `size` is too small; `value` NULL and `size` 0 asks for the length).
long scopefs_portal_fd_attribute(int fd, const char *name, void *value, unsigned long size);

#endif
