import CSystemShims
import CommandErrors
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore

/// Copies a file or folder so that the destination either appears whole or
/// not at all, and a killed copy leaves nothing behind (SPEC S19, S20, S34;
/// issue 15 finding 6). A file is written into an anonymous O_TMPFILE file
/// in the destination folder and linked into place once complete: a
/// `kill -9` frees it with the process. A folder (or a file on a file system
/// without O_TMPFILE) is built in a staging folder on the destination's file
/// system, outside the provider folder and hidden by the mount, and renamed
/// into place; its journal lets the next command, or the daemon, sweep it if
/// the process dies (`PartialCopies`). An existing
/// destination is refused unless `replace` is set. Interrupting (SIGINT,
/// SIGTERM) removes a staged copy at once.
public struct AtomicCopy {
    public var replace = false
    /// Called with (bytes done, bytes total) as the copy progresses.
    public var progress: ((Int64, Int64) -> Void)?
    /// Where staged copies go and are journaled; nil: beside the destination.
    public var partials: PartialCopies?

    public init(replace: Bool = false, progress: ((Int64, Int64) -> Void)? = nil) {
        self.replace = replace
        self.progress = progress
    }

    public func copy(_ source: String, to destination: String) throws(CommandError) {
        if !replace && HostFiles.exists(destination) {
            throw CommandError(.badData, "\(destination) already exists; pass --force to replace it")
        }
        do {
            var info = stat()
            guard source.withHostCString({ lstat($0, &info) }) == 0 else {
                throw POSIXError(.init(rawValue: errno) ?? .EIO)
            }
            if (info.st_mode & S_IFMT) == S_IFREG, try copyAnonymously(source, destination, mode: info.st_mode & 0o7777)
            {
                return
            }
            try copyStaged(source, destination, attempt: 0)
        } catch let error as CommandError {
            throw error
        } catch {
            throw CommandError(.ioError, "cannot copy \(source) to \(destination): \(error.localizedDescription)")
        }
    }

    /// Copies a file into an O_TMPFILE file and links it into place; false
    /// when the file system has no anonymous files (nothing was written).
    private func copyAnonymously(_ source: String, _ destination: String, mode: mode_t) throws -> Bool {
        let folder = RelativePath.parent(of: destination) ?? destination
        let name = RelativePath.lastComponent(of: destination)
        let directory = folder.withHostCString { open($0, scopefs_o_path | O_DIRECTORY | O_CLOEXEC) }
        guard directory >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(directory) }
        let output = openat(directory, ".", scopefs_o_tmpfile | O_WRONLY | O_CLOEXEC, mode)
        if output < 0 && [EOPNOTSUPP, EISDIR, EINVAL].contains(errno) { return false }
        guard output >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(output) }
        var done: Int64 = 0
        try copyContents(source, into: output, done: &done, total: Self.size(of: source))
        // The anonymous file gets a name only now, whole: linkat refuses an
        // existing name (EEXIST), as RENAME_NOREPLACE did.
        let anonymous = "/proc/self/fd/\(output)"
        guard replace else {
            guard name.withHostCString({ linkat(AT_FDCWD, anonymous, directory, $0, AT_SYMLINK_FOLLOW) }) == 0 else {
                if errno == EEXIST {
                    throw CommandError(.badData, "\(destination) already exists; pass --force to replace it")
                }
                throw POSIXError(.init(rawValue: errno) ?? .EIO)
            }
            return true
        }
        // Replacing: link under a staged name, then rename over the target.
        // The staged name exists only between these two calls.
        var attempt = 0
        var staged = stagingArea.stage(for: destination)
        while staged.path.withHostCString({ linkat(AT_FDCWD, anonymous, AT_FDCWD, $0, AT_SYMLINK_FOLLOW) }) != 0 {
            let failure = errno
            stagingArea.finish(staged)
            // EXDEV: the staging place shares the device but not the mount
            // (a bind mount): try the next place, nearer the destination.
            guard failure == EXDEV, staged.hasFallback else { throw POSIXError(.init(rawValue: failure) ?? .EIO) }
            attempt += 1
            staged = stagingArea.stage(for: destination, attempt: attempt)
        }
        defer { stagingArea.finish(staged) }
        guard Self.rename(staged.path, destination) == 0 else {
            let failure = errno
            staged.path.withHostCString { _ = unlink($0) }
            throw POSIXError(.init(rawValue: failure) ?? .EIO)
        }
        return true
    }

    /// Builds the copy under a staged name and renames it into place.
    private func copyStaged(_ source: String, _ destination: String, attempt: Int) throws {
        let area = stagingArea
        let staged = area.stage(for: destination, attempt: attempt)
        let cleanup = PartialCopyGuard {
            HostFiles.removeTree(staged.path)
            area.finish(staged)
        }
        defer {
            cleanup.disarm()
            area.finish(staged)
        }
        do {
            var done: Int64 = 0
            let total = Self.size(of: source)
            try copyTree(source, staged.path, done: &done, total: total)
            if replace, HostFiles.exists(destination) {
                guard Self.rename(staged.path, destination) == 0 else {
                    throw POSIXError(.init(rawValue: errno) ?? .EIO)
                }
            } else {
                // RENAME_NOREPLACE: a file that appeared meanwhile is not clobbered.
                guard Self.rename(staged.path, destination, flags: 1) == 0 else {
                    throw POSIXError(.init(rawValue: errno) ?? .EIO)
                }
            }
        } catch let error as POSIXError where error.code == .EXDEV && staged.hasFallback {
            // The staging place shares the device but not the mount (a bind
            // mount): stage at the next place, nearer the destination.
            HostFiles.removeTree(staged.path)
            try copyStaged(source, destination, attempt: attempt + 1)
        } catch {
            HostFiles.removeTree(staged.path)
            throw error
        }
    }

    /// The journaled staging folder, or (without a state) beside the destination.
    private var stagingArea: PartialCopies {
        partials ?? PartialCopies(stagingBesideDestinations: ())
    }

    private func copyTree(_ source: String, _ destination: String, done: inout Int64, total: Int64) throws {
        var info = stat()
        guard source.withHostCString({ lstat($0, &info) }) == 0 else {
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        switch info.st_mode & S_IFMT {
        case S_IFDIR:
            // Held open and walked through /proc/self/fd: a folder of the
            // source swapped for a link meanwhile redirects nothing (SPEC S33).
            let folder = source.withHostCString { open($0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            guard folder >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            defer { close(folder) }
            guard destination.withHostCString({ mkdir($0, info.st_mode & 0o7777) }) == 0 else {
                throw POSIXError(.init(rawValue: errno) ?? .EIO)
            }
            let pinned = "/proc/self/fd/\(folder)"
            guard let names = HostFiles.names(in: pinned) else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            for name in names {
                try copyTree(pinned + "/" + name, destination + "/" + name, done: &done, total: total)
            }
        case S_IFLNK:
            guard let target = HostFiles.symbolicLinkTarget(source),
                target.withHostCString({ target in destination.withHostCString { symlink(target, $0) } }) == 0
            else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        case S_IFREG:
            try copyFile(source, destination, mode: info.st_mode & 0o7777, done: &done, total: total)
        default:
            // A FIFO would block the copy (and the agent serving every app)
            // forever; a socket or a device has no bytes to copy (SPEC S34).
            throw CommandError(
                .badData,
                "\(RelativePath.lastComponent(of: source)) is not a file, folder or link (a FIFO, socket or device): it cannot be copied"
            )
        }
    }

    private func copyFile(_ source: String, _ destination: String, mode: mode_t, done: inout Int64, total: Int64) throws
    {
        let output = destination.withHostCString { open($0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode) }
        guard output >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(output) }
        try copyContents(source, into: output, done: &done, total: total)
    }

    /// Copies a file's bytes into `output` and makes them durable (fsync).
    private func copyContents(_ source: String, into output: Int32, done: inout Int64, total: Int64) throws {
        // O_NOFOLLOW: a file swapped for a link after it was checked is not
        // read; O_NONBLOCK: nor does one swapped for a FIFO block the open
        // (it changes nothing for a regular file).
        let input = source.withHostCString { open($0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard input >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(input) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = read(input, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            if count == 0 { break }
            var offset = 0
            while offset < count {
                let written = buffer.withUnsafeBytes { write(output, $0.baseAddress! + offset, count - offset) }
                guard written > 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
                offset += written
            }
            done += Int64(count)
            progress?(done, total)
        }
        guard fsync(output) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }

    /// `renameat2` with both paths as their host bytes (SPEC S33a).
    private static func rename(_ from: String, _ to: String, flags: UInt32 = 0) -> Int32 {
        from.withHostCString { from in to.withHostCString { renameat2(AT_FDCWD, from, AT_FDCWD, $0, flags) } }
    }

    static func size(of path: String) -> Int64 {
        guard let info = HostFiles.status(path) else { return 0 }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { return Int64(info.st_size) }
        let names = HostFiles.names(in: path) ?? []
        return names.reduce(0) { $0 + size(of: path + "/" + $1) }
    }
}

/// Removes a staged copy (and its journal) when the copying process is
/// interrupted; a kill -9 leaves it to `PartialCopies.sweep()`.
final class PartialCopyGuard: @unchecked Sendable {
    private let sources: [DispatchSourceSignal]

    init(cleanup: @escaping @Sendable () -> Void) {
        sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                cleanup()
                FileHandle.standardError.write(Data("scopefs: interrupted; the partial copy was removed\n".utf8))
                exit(128 + number)
            }
            source.resume()
            return source
        }
    }

    func disarm() {
        sources.forEach { $0.cancel() }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}
