import CSystemShims
import Glibc
import PolicyStore

/// How an app process run with `--no-sandbox` sees the mount (SPEC S3, S5).
/// The view is set up in a private mount namespace of the launching thread,
/// which `posix_spawn` clones from, so the app and all its descendants
/// inherit it. (The sandbox, `Sandbox`, shows the app's directory alone.)
public enum AppNamespace: Sendable {
    /// `MOUNT` holds only `MOUNT/<app>`: a small read-only tmpfs over the
    /// mountpoint with the app's directory bind-mounted into it. A path walk
    /// then enters the app's directory as the root of a mount, which the
    /// kernel never revalidates, instead of looking up `MOUNT/<app>`, whose
    /// entry S3 forbids caching, on every walk. Other apps are not even
    /// listed. Falls back to `.shared` where a mount namespace cannot be
    /// made (it needs CAP_SYS_ADMIN).
    case app
    /// The mount as every process sees it; `MOUNT/<app>` is looked up
    /// again on every path walk (its entry timeout is 0).
    case shared

    /// Enters the view for `app` of the mount at `mountpoint`; returns the
    /// view in force (`.app` may fall back to `.shared`).
    package static func enter(_ view: AppNamespace, app: String, mountpoint: String) -> AppNamespace {
        let appDirectory = mountpoint + "/" + app
        switch view {
        case .shared:
            return .shared
        case .app:
            return enterAppView(appDirectory: appDirectory, mountpoint: mountpoint, app: app) ? .app : .shared
        }
    }

    private static func enterAppView(appDirectory: String, mountpoint: String, app: String) -> Bool {
        // Not permitted (no CAP_SYS_ADMIN): the shared view is still correct.
        guard unshare(scopefs_clone_newns) == 0 else { return false }
        // Host mounts and unmounts stop propagating in: this namespace keeps
        // its copy of the mount until the daemon ends the connection.
        guard Glibc.mount(nil, "/", nil, UInt(MS_REC | MS_PRIVATE), nil) == 0 else { return false }
        // Opened in the new namespace: a bind mount's source must be a mount
        // of the caller's namespace. This process is registered, so the
        // daemon answers the lookup of MOUNT/<app>.
        let directory = open(appDirectory, scopefs_o_path | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { return false }
        defer { close(directory) }
        let flags = UInt(MS_NOSUID | MS_NODEV | MS_NOEXEC)
        guard Glibc.mount("scopefs-view", mountpoint, "tmpfs", flags, "mode=0755,size=4k,nr_inodes=4") == 0 else {
            return false
        }
        let target = mountpoint + "/" + app
        guard mkdir(target, 0o755) == 0,
            Glibc.mount("/proc/self/fd/\(directory)", target, nil, UInt(MS_BIND), nil) == 0
        else {
            umount2(mountpoint, Int32(MNT_DETACH))
            return false
        }
        // Nothing can be created next to the app's directory.
        _ = Glibc.mount(nil, mountpoint, nil, UInt(MS_REMOUNT | MS_RDONLY) | flags, nil)
        return true
    }
}
