import Foundation
import Glibc
import ProviderExtensions
import Synchronization
import Testing

/// Names are bytes (SPEC S33a): two remote items whose names differ only by
/// Unicode normalisation (`café.txt` in NFC and in NFD) are two files of
/// the replica, as they are two files of the remote (issue 50). Swift's
/// String equality is canonical equivalence, so a map or comparison keyed
/// by String took them for one name and one was dropped without a word.
@Suite struct NameBytesTests {
    static let composed = "caf\u{E9}.txt"
    static let decomposed = "cafe\u{301}.txt"

    @Test("NFC and NFD spellings of one name are two items of the replica")
    func normalisationTwins() throws {
        let fixture = try Fixture()
        let remote = try fixture.makeFolder("remote")
        try Data("composed\n".utf8).write(to: URL(filePath: remote + "/" + Self.composed))
        try Data("decomposed\n".utf8).write(to: URL(filePath: remote + "/" + Self.decomposed))
        let listed = try FileManager.default.contentsOfDirectory(atPath: remote)
        #expect(Set(listed.map { Array($0.utf8) }).count == 2, "the remote folder holds both spellings")
        let replicaRoot = try fixture.makeFolder("replica")
        let staging = try fixture.makeFolder("staging")
        let host = fixture.host(["python3", Paths.folderExtension, remote], staging: staging)
        #expect(host.waitUntilRunning(timeout: 10))
        _ = try fixture.replica(of: host, in: replicaRoot, staging: staging)
        let names = try Self.namesInReplica(replicaRoot)
        #expect(names.contains(Array(Self.composed.utf8)), "the NFC name is in the replica")
        #expect(names.contains(Array(Self.decomposed.utf8)), "the NFD name is in the replica")
    }

    /// The replica folder's names as the kernel has them (readdir's bytes).
    static func namesInReplica(_ root: String) throws -> Set<[UInt8]> {
        guard let directory = opendir(root) else { throw POSIXError(.ENOENT) }
        defer { closedir(directory) }
        var names = Set<[UInt8]>()
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.prefix { $0 != 0 })
            }
            if name != Array(".".utf8) && name != Array("..".utf8) { names.insert(name) }
        }
        return names
    }
}

/// A store keyed by path (S3) lists `café.txt` in NFC and in NFD: two ids
/// the replica's String-keyed maps took for one, showing one (issue 50).
/// The replica keeps ids by their bytes (`ReplicaID`): both are items,
/// each at its own name, and nothing is reported.
@Suite struct NormalisationTwinTests {
    @Test("ids that differ only by Unicode normalisation are two items of the replica")
    func twinsAreTwoItems() throws {
        let fixture = try Fixture()
        let host = fixture.hostile("normalisation_twins")
        #expect(host.waitUntilRunning(timeout: 10))
        let replicaRoot = try fixture.makeFolder("replica")
        let staging = try fixture.makeFolder("staging")
        let messages = Mutex<[String]>([])
        let store = try ReplicaStore()
        let provider = try ExtensionProvider(
            providerID: "cloud", calls: host, folder: ReplicaFolder(root: replicaRoot),
            writer: ReplicaFolder(root: replicaRoot), store: store, staging: staging,
            tunables: ReplicaTunables(), logger: fixture.recorder.logger,
            events: { event in messages.withLock { $0.append(event.message) } })
        try provider.pull()
        let names = try NameBytesTests.namesInReplica(replicaRoot)
        #expect(names.contains(Array(NameBytesTests.composed.utf8)), "the NFC spelling is in the replica")
        #expect(names.contains(Array(NameBytesTests.decomposed.utf8)), "the NFD spelling is in the replica")
        let ids = try store.records().map { Array($0.item.id.utf8) }
        #expect(Set(ids).count == 3, "the root and two items, each with its own id: \(ids)")
        let said = messages.withLock { $0 }
        #expect(!said.contains { $0.contains("normalisation") || $0.contains("two items") }, "\(said)")
    }

    @Test("the replica's form of an id goes back to the extension's bytes")
    func idsRoundTrip() {
        for id in [NameBytesTests.composed, NameBytesTests.decomposed, "100%", "%C3%A9", "plain", "a/b%2", "日本"] {
            let kept = ReplicaID.kept(id)
            #expect(kept.utf8.allSatisfy { $0 < 0x80 }, "\(kept) is ASCII")
            #expect(Array(ReplicaID.wire(kept).utf8) == Array(id.utf8), "\(id) comes back")
        }
        #expect(ReplicaID.kept(NameBytesTests.composed) != ReplicaID.kept(NameBytesTests.decomposed))
        #expect(ReplicaID.kept("%C3%A9") != ReplicaID.kept("\u{E9}"))
    }

    @Test("a store saved before keeps its items across the change of form")
    func oldStoreIsMigrated() throws {
        let fixture = try Fixture()
        let folder = try fixture.makeFolder("store")
        let path = folder + "/replica.sqlite"
        let root = ExtensionItem(
            id: ExtensionItem.rootID, parent: nil, name: "", kind: .folder, size: 0, mtime: 0, mode: 0o755,
            version: ItemVersion(content: "1", metadata: "1"))
        do {
            let store = try ReplicaStore(path: path)
            try store.save([ReplicaRecord(item: root, inode: 1)])
        }
        // As a store of before: raw ids, the folder to list again, and the
        // second migration not applied.
        let python = #"""
            from sqlite3 import connect
            from sys import argv
            db = connect(argv[1])
            for i, (id, parent) in enumerate([("caf\u00e9", "root"), ("caf\u00e9/r\u00e9sum\u00e9.txt", "caf\u00e9"),
                                              ("100%", "root")]):
                db.execute("INSERT INTO items SELECT ?, ?, ?, kind, size, mtime, mode, content_version, metadata_version, "
                           "target, ?, cached_version, present, pinned, dirty, problem, last_used FROM items WHERE id = 'root'",
                           (id, parent, id.split("/")[-1], 10 + i))
            db.execute("INSERT INTO meta VALUES ('unapplied', ?)", ("caf\u00e9\nroot",))
            db.execute("DELETE FROM grdb_migrations WHERE identifier = 'v2-ids-by-bytes'")
            db.commit()
            """#
        let process = Process()
        process.executableURL = URL(filePath: "/usr/bin/python3")
        process.arguments = ["-c", python, path]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let store = try ReplicaStore(path: path)
        let records = try store.records()
        let pairs = Set(records.map { [Array($0.item.id.utf8), Array(($0.item.parent ?? "").utf8)] })
        let expected: Set<[[UInt8]]> = [
            [Array("root".utf8), []],
            [Array(ReplicaID.kept("caf\u{E9}").utf8), Array("root".utf8)],
            [Array(ReplicaID.kept("caf\u{E9}/r\u{E9}sum\u{E9}.txt").utf8), Array(ReplicaID.kept("caf\u{E9}").utf8)],
            [Array("100%25".utf8), Array("root".utf8)],
        ]
        #expect(pairs == expected)
        #expect(try store.value("unapplied") == ReplicaID.kept("caf\u{E9}") + "\nroot")
        #expect(records.first { $0.inode == 11 }?.item.name == "r\u{E9}sum\u{E9}.txt", "names are not touched")
    }
}
