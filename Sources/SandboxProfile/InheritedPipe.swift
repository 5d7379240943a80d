import CommandErrors
import Glibc

/// A pipe whose read end a spawned bubblewrap inherits, filled before the
/// spawn: the seccomp filter and the sandbox's options travel this way.
/// Both stay far below a pipe's 64 KiB, so writing never blocks.
public struct InheritedPipe: Sendable {
    /// The read end, left open across exec.
    public let descriptor: Int32

    public init(fill: (Int32) throws(CommandError) -> Void) throws(CommandError) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            throw CommandError(.internalError, "pipe: \(String(cString: strerror(errno)))")
        }
        do {
            try fill(ends[1])
        } catch {
            Glibc.close(ends[0])
            Glibc.close(ends[1])
            throw error
        }
        Glibc.close(ends[1])
        _ = fcntl(ends[0], F_SETFD, 0)
        descriptor = ends[0]
    }

    public func close() { Glibc.close(descriptor) }

    public static func writeAll(_ bytes: [UInt8], to descriptor: Int32) throws(CommandError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                throw CommandError(
                    .internalError, "cannot pass the sandbox's options: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }
}
