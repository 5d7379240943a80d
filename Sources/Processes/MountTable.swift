import Glibc
import HostText

/// This mount namespace's mounts, from /proc/self/mountinfo: the daemon's
/// mountpoint checks, the mount-loss watches, and the cgroup2 hierarchy.
package enum MountTable {
    /// Whether `path` is a mountpoint.
    package static func isMounted(_ path: String) -> Bool {
        table()?.contains { $0.path.sameHostName(as: path) } ?? false
    }

    /// The "major:minor" device of the topmost mount at `path` (no stat:
    /// the daemon's own loop may not run yet).
    package static func device(at path: String) -> String? {
        table()?.last { $0.path.sameHostName(as: path) }?.device
    }

    /// Whether any mount of the device "major:minor" is in this namespace
    /// (true when the table cannot be read: never a reason to stop serving).
    package static func isMounted(device: String) -> Bool {
        table()?.contains { $0.device == device } ?? true
    }

    /// The first mount of file system `type` (e.g. "cgroup2") in this
    /// namespace, by its mountpoint.
    package static func firstMount(ofType type: String) -> String? {
        table()?.first { $0.type == type }?.path
    }

    /// The mountpoints of the mounts whose file system type passes `type`.
    package static func mountpoints(ofType type: (String) -> Bool) -> [String] {
        table()?.filter { type($0.type) }.map(\.path) ?? []
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
    package static func unescape(_ field: ArraySlice<UInt8>) -> [UInt8] {
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
}
