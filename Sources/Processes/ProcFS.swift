import Glibc
import Policy

/// What the daemon reads about a process from /proc. Used on a cache miss
/// only: the hot path never reads /proc (SPEC S36). A miss still comes with
/// every new process of an app (a build starts thousands), so the files are
/// scanned as bytes, never split into Swift strings.
package enum ProcFS {
    /// Whether a process is bubblewrap itself (by its executable): in a
    /// run's cgroup, but not the app's (`status`, issue 31).
    package static func isBubblewrap(pid: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let length = buffer.withUnsafeMutableBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { readlink("/proc/\(pid)/exe", $0.baseAddress!, $0.count) }
        }
        guard length > 0 else { return false }
        let target = String(decoding: buffer[..<length], as: UTF8.self)
        return target == "bwrap" || target.hasSuffix("/bwrap")
    }

    package struct Status {
        package var tgid: Int32
        package var parent: Int32
        package var uid: uid_t
    }

    /// `/proc/TID/status`: the thread group (process) a thread belongs to.
    package static func status(of thread: Int32) -> Status? {
        read("/proc/\(thread)/status").flatMap(parseStatus)
    }

    /// The Tgid, PPid and real uid lines of a status file.
    package static func parseStatus(_ text: [UInt8]) -> Status? {
        var tgid: Int64?
        var parent: Int64?
        var uid: Int64?
        var lineStart = 0
        while lineStart < text.count, tgid == nil || parent == nil || uid == nil {
            let lineEnd = text[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? text.count
            let line = text[lineStart..<lineEnd]
            if let value = field("Tgid:", of: line) {
                tgid = value
            } else if let value = field("PPid:", of: line) {
                parent = value
            } else if let value = field("Uid:", of: line) {
                uid = value  // the real uid, first of four
            }
            lineStart = lineEnd + 1
        }
        guard let tgid = tgid.flatMap(Int32.init(exactly:)), let parent = parent.flatMap(Int32.init(exactly:)),
            let uid = uid.flatMap(uid_t.init(exactly:))
        else { return nil }
        return Status(tgid: tgid, parent: parent, uid: uid)
    }

    /// The pid a process has in its own pid namespace, the innermost: the
    /// last number of the `NSpid:` line of `/proc/PID/status` (1 for a
    /// namespace's init, 2 for the command a bubblewrap sandbox runs).
    package static func innermostPid(of pid: Int32) -> Int32? {
        read("/proc/\(pid)/status").flatMap(parseInnermostPid)
    }

    /// The last number of a status file's `NSpid:` line.
    package static func parseInnermostPid(_ text: [UInt8]) -> Int32? {
        let numbers = value(of: "NSpid:", in: text)?.split { $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: " ") }
        return numbers?.last.flatMap { number($0) }.flatMap(Int32.init(exactly:))
    }

    /// The signals a process ignores: the `SigIgn:` mask of
    /// `/proc/PID/status` (bit N-1 for signal N).
    package static func ignoredSignals(of pid: Int32) -> UInt64? {
        read("/proc/\(pid)/status").flatMap(parseIgnoredSignals)
    }

    /// A status file's `SigIgn:` mask.
    package static func parseIgnoredSignals(_ text: [UInt8]) -> UInt64? {
        guard let digits = value(of: "SigIgn:", in: text)?.filter({ $0 != UInt8(ascii: "\t") }) else { return nil }
        return UInt64(String(decoding: digits, as: UTF8.self), radix: 16)
    }

    /// What follows `name` on the line of `text` that starts with it.
    private static func value(of name: StaticString, in text: [UInt8]) -> ArraySlice<UInt8>? {
        let prefix = UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        var lineStart = 0
        while lineStart < text.count {
            let lineEnd = text[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? text.count
            let line = text[lineStart..<lineEnd]
            if line.starts(with: prefix) { return line.dropFirst(prefix.count) }
            lineStart = lineEnd + 1
        }
        return nil
    }

    /// The pids of every process /proc shows.
    package static func processes() -> [Int32] {
        guard let folder = opendir("/proc") else { return [] }
        defer { closedir(folder) }
        var pids: [Int32] = []
        while let entry = readdir(folder) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if let pid = number(name[...]).flatMap(Int32.init(exactly:)), name.count == String(pid).utf8.count {
                pids.append(pid)
            }
        }
        return pids
    }

    /// Field 22 of `/proc/PID/stat`: the start time, which tells a reused pid
    /// from the process that had it before.
    package static func startTime(of pid: Int32) -> UInt64? {
        read("/proc/\(pid)/stat").flatMap(parseStartTime)
    }

    /// Field 22 of a stat file.
    package static func parseStartTime(_ text: [UInt8]) -> UInt64? {
        // The command name (field 2) may hold spaces and parentheses: count
        // fields from its closing parenthesis, after which field 3 starts.
        guard let close = text.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        var fieldNumber = 2
        var index = close + 1
        while index < text.count {
            if text[index] == UInt8(ascii: " ") {
                fieldNumber += 1
                if fieldNumber == 22 { return number(text[(index + 1)...]).flatMap(UInt64.init(exactly:)) }
            }
            index += 1
        }
        return nil
    }

    /// The cgroup v2 path of a thread or process (a number, or "self"): its
    /// "0::" line of `/proc/TID/cgroup`, as seen from the reader's cgroup
    /// namespace.
    package static func cgroup2Path(of thread: String) -> String? {
        read("/proc/\(thread)/cgroup").flatMap(parseCgroup2Path)
    }

    /// The path of a cgroup file's "0::" line.
    package static func parseCgroup2Path(_ text: [UInt8]) -> String? {
        var lineStart = 0
        while lineStart < text.count {
            let lineEnd = text[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? text.count
            let line = text[lineStart..<lineEnd]
            if line.starts(with: [UInt8(ascii: "0"), UInt8(ascii: ":"), UInt8(ascii: ":")]) {
                return String(decoding: line.dropFirst(3), as: UTF8.self)
            }
            lineStart = lineEnd + 1
        }
        return nil
    }

    /// A small /proc file as text.
    package static func readText(_ path: String) -> String? {
        read(path, capacity: 1 << 20).map { String(decoding: $0, as: UTF8.self) }
    }

    package static func key(of pid: Int32) -> ProcessKey? {
        startTime(of: pid).map { ProcessKey(pid: pid, startTime: $0) }
    }

    /// The process (thread group) a thread of a request belongs to.
    package static func processKey(ofThread thread: Int32) -> ProcessKey? {
        status(of: thread).flatMap { key(of: $0.tgid) }
    }

    /// Whether the process `key` names still runs: its pid not reused,
    /// and not a zombie, whose /proc files stay until it is reaped.
    package static func isRunning(_ key: ProcessKey) -> Bool {
        guard let text = read("/proc/\(key.pid)/stat"), parseStartTime(text) == key.startTime,
            let close = text.lastIndex(of: UInt8(ascii: ")")), close + 2 < text.count
        else { return false }
        // Field 3, the state, follows the command name's parenthesis.
        return ![UInt8(ascii: "Z"), UInt8(ascii: "X"), UInt8(ascii: "x")].contains(text[close + 2])
    }

    /// The number after `name` when the line starts with it.
    private static func field(_ name: StaticString, of line: ArraySlice<UInt8>) -> Int64? {
        let prefix = UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        guard line.starts(with: prefix) else { return nil }
        return number(line.dropFirst(prefix.count))
    }

    /// A decimal number after optional blanks.
    private static func number(_ text: ArraySlice<UInt8>) -> Int64? {
        let digits = text.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        var value: Int64 = 0
        var count = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { break }
            let (next, overflow) = value.multipliedReportingOverflow(by: 10)
            guard !overflow else { return nil }
            value = next + Int64(byte - UInt8(ascii: "0"))
            count += 1
        }
        return count > 0 ? value : nil
    }

    private static func read(_ path: String, capacity: Int = 4096) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: capacity)
        var total = 0
        while total < buffer.count {
            let count = buffer.withUnsafeMutableBytes {
                Glibc.read(descriptor, $0.baseAddress! + total, $0.count - total)
            }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            total += count
        }
        buffer.removeLast(buffer.count - total)
        return buffer
    }
}
