import Glibc
import Logging
import Processes

/// The mount's readahead window (issue 33). The kernel sends a FUSE file's
/// page-cache reads as READ requests no larger than the window of the
/// mount's own bdi, 128 KiB by default, although the daemon's 1 MiB
/// `max_write` already lets one request carry 256 pages: a cold read of
/// 512 MiB from a provider folder was 4,096 round trips. Only root may
/// widen it (`/sys/class/bdi/MAJOR:MINOR/read_ahead_kb`, which goes with
/// the mount); an owner without that right keeps the kernel's window.
/// Widened before the loop answers INIT: the INIT reply sets the window
/// to the smaller of the bdi's and the reply's own `max_readahead`
/// (`ScopeFileSystem.readaheadBytes`).
enum ReadaheadWindow {
    /// Widens the window of the mount at `mountpoint` to `kib` where it is
    /// smaller; says what it did at debug level.
    static func widen(mountpoint: String, to kib: Int, logger: Logger) {
        guard let device = MountTable.device(at: mountpoint) else { return }
        let path = "/sys/class/bdi/\(device)/read_ahead_kb"
        if let current = read(path), current >= kib { return }
        let descriptor = open(path, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            logger.debug("readahead window kept: \(path): \(String(cString: strerror(errno)))")
            return
        }
        defer { close(descriptor) }
        let text = "\(kib)\n"
        let written = text.withCString { Glibc.write(descriptor, $0, strlen($0)) }
        if written < 0 {
            logger.debug("readahead window kept: \(path): \(String(cString: strerror(errno)))")
        } else {
            logger.debug("readahead window of \(mountpoint): \(kib) KiB")
        }
    }

    /// The window in KiB, or nil.
    static func read(_ path: String) -> Int? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = Glibc.read(descriptor, &buffer, buffer.count)
        guard count > 0 else { return nil }
        return Int(String(decoding: buffer[..<count], as: UTF8.self).filter(\.isNumber))
    }
}
