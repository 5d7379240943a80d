import CSystemShims
import Foundation
import Glibc
import Synchronization
import SystemPackage
import Testing

@testable import ScopeFS

/// The backing-store rules and wrappers against a real temporary directory
/// (no mount, no root): SPEC S33 (no symlink in
/// the backing store is followed), S35 (renames and xattrs as on the host),
/// and the set-id clearing rule of a write by a caller without CAP_FSETID.
@Suite struct BackingStoreTests {
    /// A fresh directory with an O_PATH descriptor on it, removed afterwards.
    final class Scratch {
        let path: String
        let descriptor: Int32

        init() throws {
            path = NSTemporaryDirectory() + "scopefs-backing-\(getpid())-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            descriptor = open(path, Sys.pathOnly | O_DIRECTORY | O_CLOEXEC)
        }

        deinit {
            close(descriptor)
            try? FileManager.default.removeItem(atPath: path)
        }

        func write(_ name: String, _ text: String) {
            _ = FileManager.default.createFile(atPath: path + "/" + name, contents: Data(text.utf8))
        }

        func read(_ name: String) -> String? {
            FileManager.default.contents(atPath: path + "/" + name).map { String(decoding: $0, as: UTF8.self) }
        }

        func mode(_ name: String) -> mode_t {
            var info = stat()
            lstat(path + "/" + name, &info)
            return info.st_mode & 0o7777
        }
    }

    static func contents(of descriptor: Int32) throws -> String {
        String(decoding: try Sys.pread(descriptor, 100, 0), as: UTF8.self)
    }

    @Test("an entry opens by name; a symlink swapped in for it is not followed (ELOOP)")
    func openEntryRefusesSymlinks() throws {
        let scratch = try Scratch()
        scratch.write("real.txt", "inside")
        let outside = try Scratch()
        outside.write("secret.txt", "outside")
        symlink(outside.path + "/secret.txt", scratch.path + "/swapped.txt")

        let descriptor = try BackingStore.openEntry(scratch.descriptor, "real.txt", flags: O_RDONLY)
        defer { close(descriptor) }
        #expect(try Self.contents(of: descriptor) == "inside")
        #expect(throws: Errno.tooManySymbolicLinkLevels) {
            try BackingStore.openEntry(scratch.descriptor, "swapped.txt", flags: O_RDONLY)
        }
        #expect(throws: Errno.tooManySymbolicLinkLevels) {
            try BackingStore.createEntry(scratch.descriptor, "swapped.txt", flags: O_WRONLY, mode: 0o644)
        }
        #expect(outside.read("secret.txt") == "outside")
    }

    @Test("an app's open flags reach the host without create, O_DIRECT or close-on-exec changes")
    func backingFlags() {
        let flags = BackingStore.backingFlags(O_RDWR | O_CREAT | O_EXCL | O_APPEND | Sys.direct)
        #expect(flags == O_RDWR | O_APPEND)
        #expect(BackingStore.opensForWriting(O_WRONLY))
        #expect(BackingStore.opensForWriting(O_RDONLY | O_TRUNC))
        #expect(!BackingStore.opensForWriting(O_RDONLY))
    }

    @Test("renameat2 RENAME_EXCHANGE swaps two entries; RENAME_NOREPLACE keeps the target")
    func exchange() throws {
        let scratch = try Scratch()
        scratch.write("a", "first")
        scratch.write("b", "second")
        try Sys.renameAt(scratch.descriptor, "a", scratch.descriptor, "b", Sys.renameExchange)
        #expect(scratch.read("a") == "second")
        #expect(scratch.read("b") == "first")
        #expect(throws: Errno.fileExists) {
            try Sys.renameAt(scratch.descriptor, "a", scratch.descriptor, "b", 1)  // RENAME_NOREPLACE
        }
        #expect(throws: Errno.noSuchFileOrDirectory) {
            try Sys.renameAt(scratch.descriptor, "a", scratch.descriptor, "missing", Sys.renameExchange)
        }
    }

    @Test(
        "xattrs of a folder go through its own descriptor; of an entry, never through a final symlink",
        .serialized, arguments: [false, true])
    func extendedAttributes(procPaths: Bool) throws {
        // Both ways give the same answers: the *xattrat calls, and the
        // /proc paths that kernels before 6.13 get.
        let before = Sys.xattrAtMissing.exchange(procPaths, ordering: .relaxed)
        defer { Sys.xattrAtMissing.store(before, ordering: .relaxed) }
        let scratch = try Scratch()
        try FileManager.default.createDirectory(atPath: scratch.path + "/folder", withIntermediateDirectories: false)
        let folder = open(scratch.path + "/folder", Sys.pathOnly | O_DIRECTORY | O_CLOEXEC)
        defer { close(folder) }
        let path = try BackingStore.xattrPath(directory: folder, parent: scratch.descriptor, name: "folder")
        let value = Array("blue".utf8)
        let failure: Errno? = value.withUnsafeBytes { bytes in
            do { try Sys.setxattr(path, "user.colour", bytes, 0) } catch { return error as? Errno ?? .ioError }
            return nil
        }
        #expect(failure == nil)
        #expect(try Sys.getxattr(path, "user.colour") == value)
        var stored = [UInt8](repeating: 0, count: 16)
        let count = getxattr(scratch.path + "/folder", "user.colour", &stored, stored.count)
        #expect(count == 4, "the attribute is on the folder itself")
        #expect(try Sys.listxattr(path).split(separator: 0).contains { Array($0) == Array("user.colour".utf8) })

        // An entry that is a symlink to a file with the attribute: the
        // call acts on the link (which holds no user.* attribute), not on
        // the file it points to.
        scratch.write("target.txt", "x")
        _ = value.withUnsafeBytes { setxattr(scratch.path + "/target.txt", "user.colour", $0.baseAddress, 4, 0) }
        symlink("target.txt", scratch.path + "/link")
        let entry = try BackingStore.xattrPath(directory: nil, parent: scratch.descriptor, name: "link")
        #expect(throws: Errno.self) { try Sys.getxattr(entry, "user.colour") }
        let file = try BackingStore.xattrPath(directory: nil, parent: scratch.descriptor, name: "target.txt")
        #expect(try Sys.getxattr(file, "user.colour") == value)
        #expect(throws: Errno.staleNFSFileHandle) { try BackingStore.xattrPath(directory: nil, parent: nil, name: "x") }
    }

    @Test("a write by a caller without CAP_FSETID: setuid goes, setgid when the group executes or is not the caller's")
    func setIDRule() {
        let file = S_IFREG
        #expect(BackingStore.modeAfterUnprivilegedWrite(file | 0o4755, callerInGroup: true) == 0o755)
        #expect(BackingStore.modeAfterUnprivilegedWrite(file | 0o2755, callerInGroup: true) == 0o755)
        // Group cannot execute: mandatory locking's marker, kept for members.
        #expect(BackingStore.modeAfterUnprivilegedWrite(file | 0o2745, callerInGroup: true) == nil)
        #expect(BackingStore.modeAfterUnprivilegedWrite(file | 0o2745, callerInGroup: false) == 0o745)
        #expect(BackingStore.modeAfterUnprivilegedWrite(file | 0o6711, callerInGroup: true) == 0o711)
        #expect(BackingStore.modeAfterUnprivilegedWrite(file | 0o0755, callerInGroup: false) == nil)
        #expect(BackingStore.modeAfterUnprivilegedWrite(S_IFDIR | 0o2775, callerInGroup: false) == nil)
    }

    @Test("set-id clearing changes the file open as the descriptor")
    func clearSetIDBitsOnAFile() throws {
        let scratch = try Scratch()
        scratch.write("tool", "#!/bin/sh\n")
        chmod(scratch.path + "/tool", 0o6755)
        #expect(scratch.mode("tool") == 0o6755)
        let descriptor = try BackingStore.openEntry(scratch.descriptor, "tool", flags: O_WRONLY)
        defer { close(descriptor) }
        try BackingStore.clearSetIDBits(descriptor) { _ in true }
        #expect(scratch.mode("tool") == 0o755)
        try BackingStore.clearSetIDBits(descriptor) { _ in true }
        #expect(scratch.mode("tool") == 0o755)
    }
}
