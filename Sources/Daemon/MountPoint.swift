import Foundation
import Glibc
import PolicyStore

/// Checks on a mountpoint before mounting, and recovery of one left behind
/// by a daemon that died ("Transport endpoint is not connected").
public enum MountPoint {
    /// Resolves and checks `path`; unmounts a dead FUSE mount found there.
    public static func prepare(_ path: String) throws(ScopeFSError) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        let normalized = (absolute as NSString).standardizingPath
        var info = stat()
        if stat(normalized, &info) != 0 {
            let error = errno
            if error == ENOTCONN {
                try recoverDead(normalized)
                return normalized
            }
            throw ScopeFSError(.cannotMount, "mountpoint \(normalized) is not usable: \(String(cString: strerror(error)))")
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw ScopeFSError(.cannotMount, "mountpoint \(normalized) is not a directory")
        }
        if isMounted(normalized) && isDead(normalized) {
            // The kernel may still answer stat of the root from its cache.
            try recoverDead(normalized)
            return normalized
        }
        if isMounted(normalized) {
            throw ScopeFSError(.cannotMount, "\(normalized) is already a mountpoint; unmount it first (`scopefs unmount \(normalized)`)")
        }
        return normalized
    }

    /// statfs is never cached: a FUSE mount whose daemon died answers ENOTCONN.
    static func isDead(_ path: String) -> Bool {
        var info = statvfs()
        return statvfs(path, &info) != 0 && errno == ENOTCONN
    }

    /// A daemon that was killed leaves its mount behind; detach it.
    private static func recoverDead(_ path: String) throws(ScopeFSError) {
        if umount2(path, Int32(MNT_DETACH)) != 0 && !runFusermount(["-u", "-z", path]) {
            throw ScopeFSError(.cannotMount, "\(path) is a dead mount and could not be detached; run `fusermount3 -uz \(path)`")
        }
    }

    /// Whether `path` is a mountpoint (per /proc/self/mountinfo).
    public static func isMounted(_ path: String) -> Bool {
        table()?.contains { $0.path == path } ?? false
    }

    /// The "major:minor" device of the topmost mount at `path` (no stat:
    /// the daemon's own loop may not run yet).
    static func device(at path: String) -> String? {
        table()?.last { $0.path == path }?.device
    }

    /// Whether any mount of the device "major:minor" is in this namespace
    /// (true when the table cannot be read: never a reason to stop serving).
    static func isMounted(device: String) -> Bool {
        table()?.contains { $0.device == device } ?? true
    }

    /// The first mount of file system `type` (e.g. "cgroup2") in this
    /// namespace, by its mountpoint.
    static func firstMount(ofType type: String) -> String? {
        table()?.first { $0.type == type }?.path
    }

    /// This namespace's mounts, in mount order: where, which device, and the
    /// file system type (the field after the " - " separator).
    private static func table() -> [(path: String, device: String, type: Substring)]? {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", maxSplits: 5)
            guard fields.count > 4 else { return nil }
            let type = line.range(of: " - ").map { line[$0.upperBound...].prefix { $0 != " " } } ?? ""
            return (unescape(fields[4]), String(fields[2]), type)
        }
    }

    private static func unescape(_ field: Substring) -> String {
        field.replacingOccurrences(of: "\\040", with: " ").replacingOccurrences(of: "\\011", with: "\t")
            .replacingOccurrences(of: "\\012", with: "\n").replacingOccurrences(of: "\\134", with: "\\")
    }

    /// Unmounts a ScopeFS mount: as root directly, else with fusermount3.
    public static func unmount(_ path: String, lazy: Bool = false) -> Bool {
        if umount2(path, lazy ? Int32(MNT_DETACH) : 0) == 0 { return true }
        return runFusermount(lazy ? ["-u", "-z", path] : ["-u", path])
    }

    static func runFusermount(_ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/fusermount3")
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
