import CSystemShims
import Foundation
import Glibc
import PolicyStore

/// Copies a file or folder so that the destination either appears whole or
/// not at all: the copy is made under a hidden temporary name in the
/// destination folder and renamed into place (SPEC S19, S34). An existing
/// destination is refused unless `replace` is set. Interrupting (SIGINT,
/// SIGTERM) removes the partial copy.
public struct AtomicCopy {
    public var replace = false
    /// Called with (bytes done, bytes total) as the copy progresses.
    public var progress: ((Int64, Int64) -> Void)?

    public init(replace: Bool = false, progress: ((Int64, Int64) -> Void)? = nil) {
        self.replace = replace
        self.progress = progress
    }

    public func copy(_ source: String, to destination: String) throws(ScopeFSError) {
        let fileManager = FileManager.default
        if !replace && fileManager.fileExists(atPath: destination) {
            throw ScopeFSError(.badData, "\(destination) already exists; pass --force to replace it")
        }
        let folder = (destination as NSString).deletingLastPathComponent
        let temporary = folder + "/.\((destination as NSString).lastPathComponent).scopefs-partial-\(getpid())"
        let cleanup = PartialCopyGuard(path: temporary)
        defer { cleanup.disarm() }
        do {
            var done: Int64 = 0
            let total = Self.size(of: source)
            try copyTree(source, temporary, done: &done, total: total)
            if replace, fileManager.fileExists(atPath: destination) {
                guard rename(temporary, destination) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            } else {
                // RENAME_NOREPLACE: a file that appeared meanwhile is not clobbered.
                guard renameat2(AT_FDCWD, temporary, AT_FDCWD, destination, 1) == 0 else {
                    throw POSIXError(.init(rawValue: errno) ?? .EIO)
                }
            }
        } catch let error as ScopeFSError {
            try? fileManager.removeItem(atPath: temporary)
            throw error
        } catch {
            try? fileManager.removeItem(atPath: temporary)
            throw ScopeFSError(.ioError, "cannot copy \(source) to \(destination): \(error.localizedDescription)")
        }
    }

    private func copyTree(_ source: String, _ destination: String, done: inout Int64, total: Int64) throws {
        var info = stat()
        guard lstat(source, &info) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        switch info.st_mode & S_IFMT {
        case S_IFDIR:
            guard mkdir(destination, info.st_mode & 0o7777) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            for name in try FileManager.default.contentsOfDirectory(atPath: source) {
                try copyTree(source + "/" + name, destination + "/" + name, done: &done, total: total)
            }
        case S_IFLNK:
            let target = try FileManager.default.destinationOfSymbolicLink(atPath: source)
            guard symlink(target, destination) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        default:
            try copyFile(source, destination, mode: info.st_mode & 0o7777, done: &done, total: total)
        }
    }

    private func copyFile(_ source: String, _ destination: String, mode: mode_t, done: inout Int64, total: Int64) throws {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard output >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(output) }
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

    static func size(of path: String) -> Int64 {
        var info = stat()
        guard lstat(path, &info) == 0 else { return 0 }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { return Int64(info.st_size) }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.reduce(0) { $0 + size(of: path + "/" + $1) }
    }
}

/// Removes a partial copy when the copying process is interrupted.
final class PartialCopyGuard: @unchecked Sendable {
    private let sources: [DispatchSourceSignal]

    init(path: String) {
        sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                try? FileManager.default.removeItem(atPath: path)
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
