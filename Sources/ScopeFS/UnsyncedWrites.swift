import Foundation
import Glibc
import Policy
import Synchronization

/// "Lose the writes that were not fsynced" (issue 48), as LazyFS does for
/// a crash: while an owner's `unsynced` rule is in force (`scopefs fault
/// add --op write --unsynced`), the first change to a file after its last
/// fsync keeps a copy of the file as it was; an fsync drops the copy (the
/// file is durable as it is); `lose` puts every copy back, so the files
/// are as the last fsync left them, as after a power cut. Writes go to the
/// host file as always: only the copies are extra, and only for files an
/// app changes while a rule is in force (a test fixture). Each copy is
/// also written to the state directory (`keep(in:)`), so that a daemon
/// killed meanwhile loses those writes at the next mount, as a crash does.
public final class UnsyncedWrites: Sendable {
    struct Copy {
        /// The host file, opened for reading and writing (its own open
        /// file description: the app's may be closed when it is lost).
        var descriptor: Int32
        var bytes: [UInt8]
        var app: AppID?
        /// Its files' base path in the journal folder (nil: none is kept).
        var journal: String?
    }

    /// By the kernel's inode of the view the app changed it through.
    private let copies = Mutex<[UInt64: Copy]>([:])
    /// Where copies are journalled (`keep(in:)`); nil: in memory only.
    private let folder = Mutex<String?>(nil)

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
        let journal = journalled(bytes, of: reopened)
        let kept: Bool = copies.withLock { copies in
            guard copies[inode] == nil else { return false }
            copies[inode] = Copy(descriptor: reopened, bytes: bytes, app: app, journal: journal)
            return true
        }
        if !kept {
            close(reopened)
            if let journal { Self.unlinkJournal(journal) }
        }
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
        if let copy = copies.withLock({ $0.removeValue(forKey: inode) }) { drop(copy) }
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
            drop(copy)
        }
        return taken.map(\.0)
    }

    /// Forgets every copy (the rules were cleared): nothing is lost.
    public func forgetAll() {
        let all = copies.withLock { copies in
            defer { copies = [:] }
            return Array(copies.values)
        }
        for copy in all { drop(copy) }
    }

    private func drop(_ copy: Copy) {
        close(copy.descriptor)
        if let journal = copy.journal { Self.unlinkJournal(journal) }
    }

    // MARK: The journal

    /// Journals copies in `directory` from now on, after putting back the
    /// ones a killed daemon left there (the file at the path it had, if it
    /// is still the same file). Returns how many went back.
    public func keep(in directory: String) -> Int {
        folder.withLock { $0 = directory }
        var restored = 0
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasSuffix(Self.header) {
            let base = directory + "/" + String(name.dropLast(Self.header.count))
            if Self.restore(header: base + Self.header, bytes: base + Self.body) { restored += 1 }
            unlink(base + Self.header)
            unlink(base + Self.body)
        }
        return restored
    }

    private static let header = ".where"
    private static let body = ".bytes"
    private let counter = Atomic<UInt64>(0)

    /// Writes the copy and where its file is (path, device, inode); the
    /// journal's base path, nil when there is no journal or it failed.
    private func journalled(_ bytes: [UInt8], of descriptor: Int32) -> String? {
        guard let directory = folder.withLock({ $0 }) else { return nil }
        var info = stat()
        guard fstat(descriptor, &info) == 0, let path = Self.path(of: descriptor) else { return nil }
        mkdir(directory, 0o700)  // made once a copy is first kept
        let base = directory + "/\(getpid())-\(counter.add(1, ordering: .relaxed).newValue)"
        let place = "\(info.st_dev) \(info.st_ino)\n\(path)"
        guard Self.write(bytes, to: base + Self.body), Self.write(Array(place.utf8), to: base + Self.header) else {
            unlink(base + Self.body)
            return nil
        }
        return base
    }

    private static func unlinkJournal(_ base: String) {
        unlink(base + header)
        unlink(base + body)
    }

    private static func restore(header: String, bytes: String) -> Bool {
        guard let place = read(header).flatMap({ String(bytes: $0, encoding: .utf8) }), let content = read(bytes)
        else { return false }
        let lines = place.split(separator: "\n", maxSplits: 1).map(String.init)
        let identity = lines.first?.split(separator: " ").compactMap { UInt64($0) } ?? []
        guard lines.count == 2, identity.count == 2 else { return false }
        let descriptor = open(lines[1], O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, UInt64(info.st_dev) == identity[0], UInt64(info.st_ino) == identity[1]
        else { return false }
        guard ftruncate(descriptor, off_t(content.count)) == 0 else { return false }
        return content.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) } == content.count
    }

    private static func path(of descriptor: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/fd/\(descriptor)", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func write(_ bytes: [UInt8], to path: String) -> Bool {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        return written == bytes.count && fsync(descriptor) == 0
    }

    private static func read(_ path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        return contents(of: descriptor)
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
