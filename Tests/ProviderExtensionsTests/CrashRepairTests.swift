import Foundation
import Glibc
import Logging
import Testing

@testable import ProviderExtensions

/// What a daemon killed mid-change leaves, and a remote edit under a
/// download (issue 47, finding 7, SPEC S42, S43): the replica's file and
/// its record agree again at the next start, and a download of an old
/// version never lands in the new one. In-process (`ModelRemote`).
@Suite final class CrashRepairTests {
    let base: String
    let replicaRoot: String
    let storePath: String
    let remote: ModelRemote
    let id: String
    let first: [UInt8] = Array("twenty-two bytes here\n".utf8)

    init() throws {
        base = NSTemporaryDirectory() + "scopefs-repair-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        replicaRoot = base + "/replica"
        storePath = base + "/replica.sqlite"
        for folder in [base, replicaRoot, base + "/staging"] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        remote = ModelRemote(staging: base + "/staging")
        id = remote.put(name: "a.txt", bytes: first, mtime: 1_700_000_000.25)
    }

    deinit { try? FileManager.default.removeItem(atPath: base) }

    /// A daemon's replica on the folder and store (what a start opens).
    func start() throws -> ExtensionProvider {
        var tunables = ReplicaTunables()
        tunables.wholeFileLimit = 8 << 10
        tunables.block = 4 << 10
        return try ExtensionProvider(
            providerID: "model", calls: remote, folder: ReplicaFolder(root: replicaRoot),
            writer: ReplicaFolder(root: replicaRoot), store: ReplicaStore(path: storePath),
            staging: base + "/staging", tunables: tunables,
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
            events: { _ in })
    }

    func inode() throws -> UInt64 {
        var info = stat()
        try #require(lstat(replicaRoot + "/a.txt", &info) == 0)
        return UInt64(info.st_ino)
    }

    func size() -> Int64 {
        var info = stat()
        return lstat(replicaRoot + "/a.txt", &info) == 0 ? Int64(info.st_size) : -1
    }

    @Test(
        "a file holding more than its record after a crash is a placeholder of the recorded version at the next start")
    func repairedAtStart() throws {
        let daemon = try start()
        try daemon.pull()
        try daemon.materializeWhole(inode: try inode(), app: nil, control: RequestControl())
        #expect(daemon.state(inode: try inode()) == "materialized")
        // The killed daemon's last writes: 5 MiB of another version's bytes
        // after the record's 22 (finding 7: 50 MB under a 22-byte record).
        let file = open(replicaRoot + "/a.txt", O_WRONLY)
        try #require(file >= 0)
        let junk = [UInt8](repeating: 0x5A, count: 5 << 20)
        #expect(pwrite(file, junk, junk.count, 0) == junk.count)
        close(file)
        let next = try start()
        #expect(size() == Int64(first.count), "the file still holds \(size()) bytes under a 22-byte record")
        #expect(next.state(inode: try inode()) == "dataless")
        try next.prepareRead(inode: try inode(), offset: 0, length: 4096, app: nil, control: RequestControl())
        #expect(FileManager.default.contents(atPath: replicaRoot + "/a.txt").map { [UInt8]($0) } == first)
    }

    @Test("a file the crash left with the right size but no bytes under a record that has them is fetched again")
    func emptiedFileIsFetchedAgain() throws {
        let daemon = try start()
        try daemon.pull()
        try daemon.materializeWhole(inode: try inode(), app: nil, control: RequestControl())
        // An eviction's truncate reached the disk, its record did not.
        let file = open(replicaRoot + "/a.txt", O_WRONLY)
        try #require(file >= 0 && ftruncate(file, 0) == 0 && ftruncate(file, off_t(first.count)) == 0)
        var times = [
            timespec(tv_sec: 0, tv_nsec: Int((1 << 30) - 2)), timespec(tv_sec: 1_700_000_000, tv_nsec: 250_000_000),
        ]
        futimens(file, &times)
        close(file)
        let next = try start()
        try next.prepareRead(inode: try inode(), offset: 0, length: 4096, app: nil, control: RequestControl())
        #expect(FileManager.default.contents(atPath: replicaRoot + "/a.txt").map { [UInt8]($0) } == first)
    }

    @Test("a download of the old version that answers after a remote edit leaves the new version's file alone")
    func lateDownloadOfAnOldVersion() throws {
        let big = [UInt8](repeating: 0x11, count: 40 << 10)
        remote.edit(id, to: big, mtime: 1_700_000_001)
        let daemon = try start()
        try daemon.pull()
        let small = Array("the new version\n".utf8)
        // The store read the 40 KiB version; before its answer comes, the
        // item shrinks and the sync thread applies it.
        remote.hook(.fetch) { [remote, id] in
            remote.edit(id, to: small, mtime: 1_700_000_002)
            try? daemon.pull()
        }
        let file = try inode()
        let opened = daemon.edition(inode: file)
        #expect(throws: ExtensionFailure.self) {
            try daemon.prepareRead(
                inode: file, offset: 0, length: 4096, app: nil, control: RequestControl(), edition: opened)
        }
        #expect(size() == Int64(small.count), "the old version's download wrote \(size()) bytes into the new one")
        // A descriptor opened now reads the new version, whole.
        try daemon.prepareRead(
            inode: file, offset: 0, length: 4096, app: nil, control: RequestControl(),
            edition: daemon.edition(inode: file))
        #expect(FileManager.default.contents(atPath: replicaRoot + "/a.txt").map { [UInt8]($0) } == small)
    }

    @Test("a write through a descriptor opened before a remote edit is refused, and nothing is marked dirty")
    func staleWriterIsRefused() throws {
        let daemon = try start()
        try daemon.pull()
        let file = try inode()
        try daemon.materializeWhole(inode: file, app: nil, control: RequestControl())
        let opened = daemon.edition(inode: file)
        remote.edit(id, to: Array("edited elsewhere\n".utf8), mtime: 1_700_000_003)
        try daemon.pull()
        #expect(
            !daemon.willWrite(inode: file, edition: opened), "the write would land in the new version's placeholder")
        #expect(daemon.state(inode: file) == "dataless")
        #expect(daemon.willWrite(inode: file, edition: daemon.edition(inode: file)))
        daemon.didWrite(inode: file)
    }
}
