import Glibc
import Policy
import Synchronization

/// "Lose the writes that were not fsynced" (issue 48), as LazyFS does for
/// a crash: while an owner's `unsynced` rule is in force (`scopefs fault
/// add --op write --unsynced`), the first change to a file after its last
/// fsync keeps a copy of the file as it was; an fsync drops the copy (the
/// file is durable as it is); `lose` puts every copy back, so the files
/// are as the last fsync left them, as after a power cut. Writes go to the
/// host file as always: only the copies are extra, in memory, and only
/// for files an app changes while a rule is in force (a test fixture).
public final class UnsyncedWrites: Sendable {
    struct Copy {
        /// The host file, opened for reading and writing (its own open
        /// file description: the app's may be closed when it is lost).
        var descriptor: Int32
        var bytes: [UInt8]
        var app: AppID?
    }

    /// By the kernel's inode of the view the app changed it through.
    private let copies = Mutex<[UInt64: Copy]>([:])

    /// A file larger than this is not kept (and its writes are not lost):
    /// the copies are in memory.
    public static let largestFile = 64 << 20

    init() {}

    /// Before a change to the file open as `descriptor` (any access mode),
    /// reached as `inode` by `app`: keeps a copy if there is none yet.
    func willChange(inode: UInt64, descriptor: Int32, app: AppID?) {
        if copies.withLock({ $0[inode] != nil }) { return }
        // The magic link names the open file itself (no path walk, so no
        // O_NOFOLLOW: that would refuse the link).
        let reopened = open("/proc/self/fd/\(descriptor)", O_RDWR | O_CLOEXEC)
        guard reopened >= 0 else { return }
        guard let bytes = Self.contents(of: reopened) else {
            close(reopened)
            return
        }
        let kept: Bool = copies.withLock { copies in
            guard copies[inode] == nil else { return false }
            copies[inode] = Copy(descriptor: reopened, bytes: bytes, app: app)
            return true
        }
        if !kept { close(reopened) }
    }

    /// Before an open with O_TRUNC of `name` in the folder `parent`: the
    /// content the truncation is about to drop.
    func willTruncate(inode: UInt64, parent: Int32, name: String, app: AppID?) {
        if copies.withLock({ $0[inode] != nil }) { return }
        let descriptor = openat(parent, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        willChange(inode: inode, descriptor: descriptor, app: app)
    }

    /// After an fsync of `inode`: what it holds is durable.
    func synced(inode: UInt64) {
        if let copy = copies.withLock({ $0.removeValue(forKey: inode) }) { close(copy.descriptor) }
    }

    /// Puts back every copy (of `app`'s changes only, when given): the
    /// files are as their last fsync left them. Returns the inodes whose
    /// cached pages must go.
    public func lose(app: AppID?) -> [UInt64] {
        let taken: [(UInt64, Copy)] = copies.withLock { copies in
            let chosen = copies.filter { app == nil || $0.value.app == app }
            for inode in chosen.keys { copies[inode] = nil }
            return Array(chosen)
        }
        for (_, copy) in taken {
            _ = ftruncate(copy.descriptor, off_t(copy.bytes.count))
            var written = 0
            while written < copy.bytes.count {
                let count = copy.bytes[written...].withUnsafeBytes {
                    pwrite(copy.descriptor, $0.baseAddress, $0.count, off_t(written))
                }
                if count <= 0 { break }
                written += count
            }
            close(copy.descriptor)
        }
        return taken.map(\.0)
    }

    /// Forgets every copy (the rules were cleared): nothing is lost.
    public func forgetAll() {
        let all = copies.withLock { copies in
            defer { copies = [:] }
            return Array(copies.values)
        }
        for copy in all { close(copy.descriptor) }
    }

    private static func contents(of descriptor: Int32) -> [UInt8]? {
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, Int(info.st_size) <= largestFile
        else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < bytes.count {
            let count = bytes[done...].withUnsafeMutableBytes {
                pread(descriptor, $0.baseAddress, $0.count, off_t(done))
            }
            if count < 0 { return nil }
            if count == 0 { break }
            done += count
        }
        return Array(bytes[..<done])
    }
}
