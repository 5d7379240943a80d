import Glibc
import Synchronization
import SystemPackage

/// The outcome of walking a node's parent links up to its container or
/// provider root (`NodeTable.path(of:)`).
///
/// The links are the table's memory of where each node was last seen; a
/// host change the table missed, or a bookkeeping bug, can leave them in a
/// cycle. The walk is bounded so that such a table costs one request an
/// EIO and a line in the daemon log, never a loop with the table's lock
/// held (SPEC S34: an app cannot stall or crash the daemon).
enum PathWalk: Equatable {
    /// More components than any path the kernel could hand back: a path of
    /// PATH_MAX bytes has at most PATH_MAX / 2 of them.
    static let maximumDepth = Int(PATH_MAX)

    case found(String)
    /// Stopped after `maximumDepth` steps: a parent cycle, or a folder
    /// nested deeper than any path can name.
    case tooDeep

    /// The path, or EIO, logged.
    func path(of inode: UInt64) throws(Errno) -> String {
        switch self {
        case .found(let path):
            return path
        case .tooDeep:
            throw InternalError.report(
                "the parent links of inode \(inode) do not reach its root within \(Self.maximumDepth) steps "
                    + "(a cycle, or a folder nested deeper than a path can name); answered EIO")
        }
    }
}

/// Errors that can only mean the daemon's own state is wrong: logged to
/// standard error (the daemon log) and answered with EIO, never a crash.
enum InternalError {
    /// How many were reported; only the first few, then every 1000th, are
    /// written, so that one bad node asked about in a loop cannot flood
    /// the log.
    private static let count = Atomic<Int>(0)

    static func report(_ message: String) -> Errno {
        let seen = count.add(1, ordering: .relaxed).newValue
        if seen <= 10 || seen % 1000 == 0 {
            let line = "scopefs: internal error (\(seen) so far): \(message)\n"
            _ = line.withCString { Glibc.write(STDERR_FILENO, $0, strlen($0)) }
        }
        return .ioError
    }
}
