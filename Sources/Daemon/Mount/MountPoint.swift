import CommandErrors
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore
import Processes

/// Checks on a mountpoint before mounting, and recovery of one left behind
/// by a daemon that died ("Transport endpoint is not connected").
public enum MountPoint {
    /// Resolves and checks `path`; unmounts a dead FUSE mount found there.
    public static func prepare(_ path: String) throws(CommandError) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        let normalized = (absolute as NSString).standardizingPath
        var info = stat()
        if stat(normalized, &info) != 0 {
            let error = errno
            if error == ENOTCONN {
                try recoverDead(normalized)
                return normalized
            }
            throw CommandError(
                .cannotMount, "mountpoint \(normalized) is not usable: \(String(cString: strerror(error)))")
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw CommandError(.cannotMount, "mountpoint \(normalized) is not a directory")
        }
        if isMounted(normalized) && isDead(normalized) {
            // The kernel may still answer stat of the root from its cache.
            try recoverDead(normalized)
            return normalized
        }
        if isMounted(normalized) {
            throw CommandError(
                .cannotMount,
                "\(normalized) is already a mountpoint; unmount it first (`scopefs unmount \(normalized)`)")
        }
        return normalized
    }

    /// Detaches a dead FUSE mount at `path` (its daemon was killed), and
    /// leaves anything else as it is: what a portal, which may find its
    /// own earlier mount there, does before it mounts. True when it did.
    public static func clearDead(_ path: String) throws(CommandError) -> Bool {
        var info = stat()
        let unreachable = stat(path, &info) != 0 && errno == ENOTCONN
        guard unreachable || (isMounted(path) && isDead(path)) else { return false }
        try recoverDead(path)
        return true
    }

    /// statfs is never cached: a FUSE mount whose daemon died answers ENOTCONN.
    static func isDead(_ path: String) -> Bool {
        var info = statvfs()
        return statvfs(path, &info) != 0 && errno == ENOTCONN
    }

    /// A daemon that was killed leaves its mount behind; detach it.
    private static func recoverDead(_ path: String) throws(CommandError) {
        if umount2(path, Int32(MNT_DETACH)) != 0 && !runFusermount(["-u", "-z", path]) {
            throw CommandError(
                .cannotMount, "\(path) is a dead mount and could not be detached; run `fusermount3 -uz \(path)`")
        }
    }

    /// Whether `path` is a mountpoint (per /proc/self/mountinfo).
    public static func isMounted(_ path: String) -> Bool { MountTable.isMounted(path) }

    /// Unmounts a ScopeFS mount: as root directly, else with fusermount3.
    public static func unmount(_ path: String, lazy: Bool = false) -> Bool {
        if umount2(path, lazy ? Int32(MNT_DETACH) : 0) == 0 { return true }
        return runFusermount(lazy ? ["-u", "-z", path] : ["-u", path])
    }

    /// How long fusermount3 may take: it looks at the mountpoint, which
    /// a wedged daemon would make it wait on for good (issue 50).
    static let fusermountLimit = 5.0

    static func runFusermount(_ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/fusermount3")
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        let deadline = Date().addingTimeInterval(fusermountLimit)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return false
        }
        return process.terminationStatus == 0
    }
}
