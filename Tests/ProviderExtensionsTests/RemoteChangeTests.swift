import Foundation
import Glibc
import ProviderExtensions
import Synchronization
import Testing

/// A remote that changes under a reader (issue 47, SPEC S42, S49): no range
/// arithmetic traps. The real folder extension, without a mount; the
/// integration tests drive readers through /dev/fuse
/// (test_extension_remote_races.py).
@Suite struct RemoteChangeTests {
    let fixture: Fixture
    let remote: String
    let control: String
    let replicaRoot: String
    let host: ExtensionHost
    let replica: ExtensionProvider

    init() throws {
        fixture = try Fixture()
        remote = try fixture.makeFolder("remote")
        try Data(repeating: 7, count: 3 << 20).write(to: URL(filePath: remote + "/big.bin"))
        replicaRoot = try fixture.makeFolder("replica")
        let staging = try fixture.makeFolder("staging")
        control = try fixture.makeFolder("control")
        // The folder example with switches (a slow fetch), as the mount's tests use it.
        host = fixture.host(
            ["python3", Paths.root + "/Tests/integration/extensions/controlled_folder.py", remote, control],
            staging: staging)
        #expect(host.waitUntilRunning(timeout: 10))
        replica = try fixture.replica(of: host, in: replicaRoot, staging: staging)
    }

    private func inode(_ path: String) throws -> UInt64 {
        var info = stat()
        try #require(lstat(replicaRoot + "/" + path, &info) == 0)
        return UInt64(info.st_ino)
    }

    @Test("a reader waiting for a download when the item shrinks below it fetches nothing more and does not trap")
    func shrinkUnderAWaitingReader() throws {
        let file = try inode("big.bin")
        // The fetch stages the old version's bytes, then answers a second later.
        try "1".write(toFile: control + "/linger-fetch", atomically: true, encoding: .utf8)
        let replica = self.replica
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            // At 2.5 MiB: past the end the item will have.
            try? replica.prepareRead(inode: file, offset: 5 << 19, length: 4096, app: nil, control: RequestControl())
            done.signal()
        }
        while !((try? String(contentsOfFile: control + "/calls", encoding: .utf8)) ?? "").contains("staged") {
            usleep(20_000)
        }
        // The remote shrinks to 1.5 MiB (more than a whole-file fetch)
        // while the reader waits for its block.
        #expect(truncate(remote + "/big.bin", 3 << 19) == 0)
        try replica.pull()
        #expect(done.wait(timeout: .now() + 20) == .success, "the reader never came back")
        try? FileManager.default.removeItem(atPath: control + "/linger-fetch")
        // The item is the new version, and reads within it work.
        try replica.prepareRead(
            inode: file, offset: (3 << 19) - 4096, length: 4096, app: nil, control: RequestControl())
        #expect(replica.state(inode: file) == "partial")
    }

    @Test("a remote change that fails to apply here is applied at the next pull, not dropped with the anchor")
    func failedApplyIsRetried() throws {
        let own = try fixture.makeFolder("replica-of-a-flaky-writer")
        let writer = FlakyWriter(ReplicaFolder(root: own))
        let flaky = try ExtensionProvider(
            providerID: "cloud", calls: host, folder: ReplicaFolder(root: own), writer: writer,
            store: ReplicaStore(), staging: fixture.path("staging"), logger: fixture.recorder.logger,
            events: { _ in })
        try flaky.pull()
        try Data(repeating: 9, count: 1000).write(to: URL(filePath: remote + "/big.bin"))
        writer.failingResets.withLock { $0 = 2 }  // the pass and its retry within the same pull
        try flaky.pull()
        var info = stat()
        #expect(lstat(own + "/big.bin", &info) == 0 && info.st_size == 3 << 20, "the failed apply changed it")
        try flaky.pull()
        #expect(lstat(own + "/big.bin", &info) == 0 && info.st_size == 1000, "the change was dropped")
    }
}

/// What status and events show of a replica's failure (issue 47, finding
/// 8: they printed `system(5, "...")`).
@Test("a replica failure reads as what failed and the errno's text")
func replicaFailureText() {
    #expect(
        "\(ReplicaFolder.Failure.system(EIO, "cannot empty docs/a.txt"))"
            == "cannot empty docs/a.txt: Input/output error")
}

/// A replica writer whose next `failingResets` resets fail (a full disk,
/// an I/O error), as the writer child can.
final class FlakyWriter: ReplicaWriting {
    let base: ReplicaFolder
    let failingResets = Mutex(0)

    init(_ base: ReplicaFolder) { self.base = base }

    func reset(_ path: String, inode: UInt64, size: Int64, mtime: Double, mode: UInt32) throws(ReplicaFolder.Failure) {
        let fail = failingResets.withLock { count in
            defer { count = max(0, count - 1) }
            return count > 0
        }
        if fail { throw .system(EIO, "the test's writer fails this reset") }
        try base.reset(path, inode: inode, size: size, mtime: mtime, mode: mode)
    }

    func placeholder(_ path: String, size: Int64, mtime: Double, mode: UInt32) throws(ReplicaFolder.Failure)
        -> UInt64
    { try base.placeholder(path, size: size, mtime: mtime, mode: mode) }
    func setAttributes(_ path: String, mtime: Double, mode: UInt32) throws(ReplicaFolder.Failure) {
        try base.setAttributes(path, mtime: mtime, mode: mode)
    }
    func makeFolder(_ path: String, mode: UInt32, mtime: Double) throws(ReplicaFolder.Failure) -> UInt64 {
        try base.makeFolder(path, mode: mode, mtime: mtime)
    }
    func makeSymlink(_ path: String, target: String) throws(ReplicaFolder.Failure) -> UInt64 {
        try base.makeSymlink(path, target: target)
    }
    func rename(_ from: String, to: String) throws(ReplicaFolder.Failure) { try base.rename(from, to: to) }
    func remove(_ path: String) throws(ReplicaFolder.Failure) { try base.remove(path) }
    func copy(_ from: String, to: String) throws(ReplicaFolder.Failure) -> UInt64 { try base.copy(from, to: to) }
}
