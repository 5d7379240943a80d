import Foundation
import Glibc
import Logging
import Testing

@testable import ProviderExtensions

/// The replica's store is the index as it is, whatever order saves run in
/// (issue 47, lost writes after a daemon kill, SPEC S43). A download's
/// save carried the record it read before an app's first write and ran
/// after that write's: the store said "clean" while the index said
/// "dirty", and a daemon killed then never uploaded the write (the model's
/// seeds 40 and 41).
@Suite final class ReplicaSaveTests {
    let base: String
    let replicaRoot: String
    let storePath: String
    let remote: ModelRemote

    init() throws {
        base = NSTemporaryDirectory() + "scopefs-save-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        replicaRoot = base + "/replica"
        storePath = base + "/replica.sqlite"
        for folder in [base, replicaRoot, base + "/staging"] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        remote = ModelRemote(staging: base + "/staging")
        remote.put(name: "a.txt", bytes: Array("the remote's version\n".utf8), mtime: 1_700_000_000.25)
    }

    deinit { try? FileManager.default.removeItem(atPath: base) }

    func start() throws -> ExtensionProvider {
        try ExtensionProvider(
            providerID: "model", calls: remote, folder: ReplicaFolder(root: replicaRoot),
            writer: ReplicaFolder(root: replicaRoot), store: ReplicaStore(path: storePath),
            staging: base + "/staging", logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
            events: { _ in })
    }

    @Test("a save that carries a copy read before an app's first write keeps the write's dirty mark")
    func lateSaveKeepsTheDirtyMark() throws {
        let daemon = try start()
        try daemon.pull()
        var info = stat()
        try #require(lstat(replicaRoot + "/a.txt", &info) == 0)
        let inode = UInt64(info.st_ino)
        // What a download read before the write, and saves after it.
        let copy = try #require(daemon.lock.withLock { daemon.index.all.first { $0.inode == inode } })
        #expect(daemon.willWrite(inode: inode))
        daemon.didWrite(inode: inode)
        daemon.save([copy])
        // The next daemon (this one killed) finds the write to upload.
        let stored = try ReplicaStore(path: storePath).records().first { $0.inode == inode }
        #expect(stored?.dirty != 0, "the store lost the dirty mark: the write would never go up")
        let next = try start()
        #expect(next.state(inode: inode) == "dirty")
    }
}
