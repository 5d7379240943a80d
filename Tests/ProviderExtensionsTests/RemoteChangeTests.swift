import Foundation
import Glibc
import ProviderExtensions
import Testing

/// A remote that changes under a reader (issue 47, SPEC S42): no range
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
}
