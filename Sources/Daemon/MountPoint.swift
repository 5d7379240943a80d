import CommandErrors
import Foundation
import Glibc
import Policy
import PolicyStore

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
    public static func isMounted(_ path: String) -> Bool {
        table()?.contains { $0.path.sameHostName(as: path) } ?? false
    }

    /// The "major:minor" device of the topmost mount at `path` (no stat:
    /// the daemon's own loop may not run yet).
    static func device(at path: String) -> String? {
        table()?.last { $0.path.sameHostName(as: path) }?.device
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
    ///
    /// Read as bytes: a mountpoint is a path, and any mount on the machine
    /// may have one that is not UTF-8 (SPEC S33a). Decoded as UTF-8, one
    /// such line made the whole table unreadable: `unmount` said "not
    /// mounted" and `mount` stacked a second mount (SPEC S34).
    private static func table() -> [(path: String, device: String, type: String)]? {
        guard let bytes = readAll("/proc/self/mountinfo") else { return nil }
        let space = UInt8(ascii: " ")
        return bytes.split(separator: UInt8(ascii: "\n")).compactMap { line in
            let fields = line.split(separator: space, maxSplits: 5, omittingEmptySubsequences: false)
            guard fields.count > 4 else { return nil }
            // The type is the field after the " - " separator (optional fields come before it).
            let rest = line.split(separator: space, omittingEmptySubsequences: false)
            let type =
                rest.firstIndex { $0.elementsEqual([UInt8(ascii: "-")]) }.flatMap { index in
                    index + 1 < rest.count ? String(decoding: rest[index + 1], as: UTF8.self) : nil
                } ?? ""
            return (String(hostBytes: unescape(fields[4])), String(decoding: fields[2], as: UTF8.self), type)
        }
    }

    /// The kernel writes space, tab, newline and backslash in a mountinfo
    /// path as `\ooo` octal escapes.
    static func unescape(_ field: ArraySlice<UInt8>) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(field.count)
        var index = field.startIndex
        while index < field.endIndex {
            let byte = field[index]
            if byte == UInt8(ascii: "\\"), field.endIndex - index >= 4,
                let value = octal(field[(index + 1)...(index + 3)])
            {
                result.append(value)
                index += 4
            } else {
                result.append(byte)
                index += 1
            }
        }
        return result
    }

    private static func octal(_ digits: ArraySlice<UInt8>) -> UInt8? {
        var value: UInt32 = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "7") else { return nil }
            value = value * 8 + UInt32(digit - UInt8(ascii: "0"))
        }
        return value <= 0xFF ? UInt8(value) : nil
    }

    /// A whole /proc file (mountinfo grows with the mounts: no fixed size).
    private static func readAll(_ path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 { return nil }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<count])
        }
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
