import Glibc
import Processes

/// Notices the mount leaving the daemon's mount namespace. Normally the
/// kernel tells the daemon itself (the loop ends on unmount), but while an
/// app's mount namespace holds a copy of the mount (`AppNamespace.app`,
/// `--sandbox`) the connection outlives `fusermount3 -u`, and the daemon
/// would serve a mount nobody outside those apps can reach. The daemon then
/// ends the connection, so `scopefs unmount` means the same with app views
/// as without: the mount is gone and the daemon exits.
enum MountFollower {
    /// Blocks until the mount of `device` ("major:minor", from
    /// `MountTable.device(at:)`) is gone from this namespace (then calls
    /// `unmounted`) or `stop()` is true.
    static func run(device: String, until stop: () -> Bool, unmounted: () -> Void) {
        let mountinfo = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)
        guard mountinfo >= 0 else { return }
        defer { close(mountinfo) }
        var changed = true  // check once before the first change
        while !stop() {
            if changed && !MountTable.isMounted(device: device) {
                unmounted()
                return
            }
            // The kernel flags the file with POLLPRI after each change to the
            // namespace's mount table; a poll reports each change once. The
            // timeout only lets `stop` be seen.
            var request = pollfd(fd: mountinfo, events: Int16(POLLPRI), revents: 0)
            changed =
                poll(&request, 1, DaemonTunables.mountWatchWaitMilliseconds) > 0
                && request.revents & Int16(POLLPRI) != 0
        }
    }
}
