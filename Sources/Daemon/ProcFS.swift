import Glibc
import Policy

/// What the daemon reads about a process from /proc. Used on a cache miss
/// only: the hot path never reads /proc (SPEC S36).
enum ProcFS {
    struct Status {
        var tgid: Int32
        var parent: Int32
        var uid: uid_t
    }

    /// `/proc/TID/status`: the thread group (process) a thread belongs to.
    static func status(of thread: Int32) -> Status? {
        guard let text = read("/proc/\(thread)/status") else { return nil }
        var tgid: Int32?
        var parent: Int32?
        var uid: uid_t?
        for line in text.split(separator: "\n") {
            if line.hasPrefix("Tgid:") {
                tgid = Int32(line.dropFirst(5).trimmingWhitespace)
            } else if line.hasPrefix("PPid:") {
                parent = Int32(line.dropFirst(5).trimmingWhitespace)
            } else if line.hasPrefix("Uid:") {
                uid = line.dropFirst(4).split(whereSeparator: { $0 == "\t" || $0 == " " }).first.flatMap { uid_t($0) }
            }
        }
        guard let tgid, let parent, let uid else { return nil }
        return Status(tgid: tgid, parent: parent, uid: uid)
    }

    /// Field 22 of `/proc/PID/stat`: the start time, which tells a reused pid
    /// from the process that had it before.
    static func startTime(of pid: Int32) -> UInt64? {
        guard let text = read("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        // Fields after the command name start at field 3.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 19 else { return nil }
        return UInt64(fields[19])
    }

    static func key(of pid: Int32) -> ProcessKey? {
        startTime(of: pid).map { ProcessKey(pid: pid, startTime: $0) }
    }

    private static func read(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        var total = 0
        while total < buffer.count {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + total, $0.count - total) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            total += count
        }
        return String(decoding: buffer[..<total], as: UTF8.self)
    }
}

extension Substring {
    var trimmingWhitespace: Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result = result.dropFirst() }
        while let last = result.last, last == " " || last == "\t" || last == "\n" { result = result.dropLast() }
        return result
    }
}
