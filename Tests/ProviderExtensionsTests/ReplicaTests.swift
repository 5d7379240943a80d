import Foundation
import Glibc
import ProviderExtensions
import Testing

/// The replica against the real folder extension, without a mount: what
/// the mount serves after a pull, what a push sends, what a conflict keeps
/// (SPEC S42, S43). The integration tests drive the same through /dev/fuse.
@Suite struct ReplicaTests {
    let fixture: Fixture
    let remote: String
    let replicaRoot: String
    let staging: String
    let host: ExtensionHost
    let replica: ExtensionProvider

    init() throws {
        fixture = try Fixture()
        remote = try fixture.makeFolder("remote")
        try fixture.makeFolder("remote/docs")
        try fixture.write("remote/docs/a.txt", "first version\n")
        try Data(repeating: 7, count: 3 << 20).write(to: URL(filePath: remote + "/docs/big.bin"))
        replicaRoot = try fixture.makeFolder("replica")
        staging = try fixture.makeFolder("staging")
        host = fixture.host(["python3", Paths.folderExtension, remote], staging: staging)
        #expect(host.waitUntilRunning(timeout: 10))
        replica = try fixture.replica(of: host, in: replicaRoot, staging: staging)
    }

    private func status(_ path: String) -> stat? {
        var info = stat()
        return lstat(replicaRoot + "/" + path, &info) == 0 ? info : nil
    }

    @Test("a pull makes placeholders: the item's size, no blocks, state dataless")
    func placeholders() throws {
        let info = try #require(status("docs/big.bin"))
        #expect(info.st_size == 3 << 20)
        #expect(info.st_blocks == 0)
        #expect(replica.presentedBlocks(inode: UInt64(info.st_ino), size: Int64(info.st_size), blocks: 0) == 1)
        #expect(replica.state(inode: UInt64(info.st_ino)) == "dataless")
    }

    @Test("a read fetches the blocks it needs, not the file; then all of it")
    func rangedRead() throws {
        let info = try #require(status("docs/big.bin"))
        let inode = UInt64(info.st_ino)
        try replica.prepareRead(inode: inode, offset: 0, length: 4096, app: nil, control: RequestControl())
        #expect(replica.state(inode: inode) == "partial")
        let progress = try #require(replica.progress(inode: inode)).split(separator: "/").compactMap { Int($0) }
        #expect(progress[0] >= 4096 && progress[0] <= 256 << 10)
        try replica.materializeWhole(inode: inode, app: nil, control: RequestControl())
        #expect(replica.state(inode: inode) == "materialized")
        let bytes = try Data(contentsOf: URL(filePath: replicaRoot + "/docs/big.bin"))
        #expect(bytes == Data(repeating: 7, count: 3 << 20))
    }

    @Test("a never-download app gets EDEADLK and causes no fetch")
    func neverDownload() throws {
        replica.neverDownload = ["com.example.indexer"]
        let inode = UInt64(try #require(status("docs/a.txt")).st_ino)
        #expect(throws: ExtensionFailure.self) {
            try replica.prepareRead(
                inode: inode, offset: 0, length: 10, app: "com.example.indexer", control: RequestControl())
        }
        #expect(replica.state(inode: inode) == "dataless")
    }

    @Test("an edit is pushed with its base version; a remote change meanwhile gives a conflict copy")
    func conflict() throws {
        let inode = UInt64(try #require(status("docs/a.txt")).st_ino)
        try replica.materializeWhole(inode: inode, app: nil, control: RequestControl())
        replica.willWrite(inode: inode)
        try Data("local edit\n".utf8).write(to: URL(filePath: replicaRoot + "/docs/a.txt"))
        // The write is on disk and the app closed the file (the mount's didWrite and release).
        replica.didWrite(inode: inode)
        replica.settled(inode: inode)
        try Data("remote edit!\n".utf8).write(to: URL(filePath: remote + "/docs/a.txt"))
        try replica.push()
        let names = try FileManager.default.contentsOfDirectory(atPath: replicaRoot + "/docs").sorted()
        let copy = try #require(names.first { $0.hasPrefix("a (conflict ") && $0.hasSuffix(").txt") })
        #expect(try String(contentsOfFile: replicaRoot + "/docs/" + copy, encoding: .utf8) == "local edit\n")
        #expect(replica.state(inode: inode) == "dataless")
        try replica.push()
        #expect(try String(contentsOfFile: remote + "/docs/" + copy, encoding: .utf8) == "local edit\n")
        #expect(try String(contentsOfFile: remote + "/docs/a.txt", encoding: .utf8) == "remote edit!\n")
    }

    @Test("an upload whose answer was lost is not a conflict with itself")
    func sameContentIsNoConflict() throws {
        let inode = UInt64(try #require(status("docs/a.txt")).st_ino)
        try replica.materializeWhole(inode: inode, app: nil, control: RequestControl())
        replica.willWrite(inode: inode)
        try Data("saved twice\n".utf8).write(to: URL(filePath: replicaRoot + "/docs/a.txt"))
        // The write is on disk and the app closed the file (the mount's didWrite and release).
        replica.didWrite(inode: inode)
        replica.settled(inode: inode)
        // The upload landed, but the daemon died before it noted the answer.
        try Data("saved twice\n".utf8).write(to: URL(filePath: remote + "/docs/a.txt"))
        try replica.push()
        let names = try FileManager.default.contentsOfDirectory(atPath: replicaRoot + "/docs")
        #expect(!names.contains { $0.contains("conflict") })
        #expect(replica.state(inode: inode) == "materialized")
    }

    @Test("new folders and files go up parents first, many at a time, and all arrive")
    func manyCreations() throws {
        try FileManager.default.createDirectory(
            atPath: replicaRoot + "/new/deeper", withIntermediateDirectories: true)
        for index in 0..<40 {
            try Data("file \(index)\n".utf8).write(to: URL(filePath: replicaRoot + "/new/f\(index).txt"))
        }
        try Data("deep\n".utf8).write(to: URL(filePath: replicaRoot + "/new/deeper/d.txt"))
        try replica.push()
        let made = try FileManager.default.contentsOfDirectory(atPath: remote + "/new").sorted()
        #expect(made.count == 41 && made.contains("deeper"))
        #expect(try String(contentsOfFile: remote + "/new/f39.txt", encoding: .utf8) == "file 39\n")
        #expect(try String(contentsOfFile: remote + "/new/deeper/d.txt", encoding: .utf8) == "deep\n")
        #expect(replica.status.queued == 0 && replica.status.errors == 0)
    }

    @Test("remote renames and deletes move and remove replica files; the inode stays")
    func remoteChanges() throws {
        let before = try #require(status("docs/a.txt")).st_ino
        try FileManager.default.moveItem(atPath: remote + "/docs/a.txt", toPath: remote + "/moved.txt")
        try FileManager.default.removeItem(atPath: remote + "/docs/big.bin")
        try replica.pull()
        #expect(status("docs/a.txt") == nil && status("docs/big.bin") == nil)
        #expect(status("moved.txt")?.st_ino == before)
    }

    @Test("a remote item's set-id and sticky bits never reach the replica, and are not pushed back")
    func noSetIDBits() throws {
        // Issue 46, 5b: the replica kept an extension's mode 06777, so a
        // remote item became a set-id file on the host (the owner's, root's
        // when the daemon runs as root). Permission bits only (SPEC S42).
        try fixture.write("remote/docs/setid.sh", "#!/bin/sh\n")
        try fixture.makeFolder("remote/docs/sticky")
        #expect(chmod(remote + "/docs/setid.sh", 0o6777) == 0)
        #expect(chmod(remote + "/docs/sticky", 0o7777) == 0)
        #expect(chmod(remote + "/docs/a.txt", 0o6755) == 0)
        try replica.pull()
        let file = try #require(status("docs/setid.sh"))
        #expect(file.st_mode & 0o7777 == 0o777, "\(String(file.st_mode & 0o7777, radix: 8))")
        let folder = try #require(status("docs/sticky"))
        #expect(folder.st_mode & 0o7777 == 0o777, "\(String(folder.st_mode & 0o7777, radix: 8))")
        // A remote chmod of an item the replica has (no new content).
        let changed = try #require(status("docs/a.txt"))
        #expect(changed.st_mode & 0o7777 == 0o755, "\(String(changed.st_mode & 0o7777, radix: 8))")
        // The content downloaded keeps the mode the placeholder had.
        try replica.materializeWhole(inode: UInt64(file.st_ino), app: nil, control: RequestControl())
        #expect(try #require(status("docs/setid.sh")).st_mode & 0o7777 == 0o777)
        // The replica's bits are not a local chmod to send up.
        try replica.push()
        var remoteInfo = stat()
        #expect(lstat(remote + "/docs/setid.sh", &remoteInfo) == 0 && remoteInfo.st_mode & 0o7777 == 0o6777)
        #expect(lstat(remote + "/docs/sticky", &remoteInfo) == 0 && remoteInfo.st_mode & 0o7777 == 0o7777)
        #expect(replica.status.queued == 0 && replica.status.errors == 0)
    }
}

@Suite struct ByteRangesTests {
    @Test("ranges merge, cover and report what is missing")
    func ranges() {
        var ranges = ByteRanges()
        ranges.insert(0..<10)
        ranges.insert(20..<30)
        ranges.insert(10..<15)
        #expect(ranges.ranges == [0..<15, 20..<30])
        #expect(ranges.covers(2, 14) && !ranges.covers(2, 21))
        #expect(ranges.firstMissing(from: 0, to: 40) == 15)
        #expect(ranges.missingRunEnd(from: 15, limit: 40) == 20)
        #expect(ByteRanges(encoded: ranges.encoded) == ranges)
        #expect(ranges.byteCount == 25)
    }
}
