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
        let names = try namesInReplica(replicaRoot)
        #expect(names.contains(Array(Self.composed.utf8)), "the NFC name is in the replica")
        #expect(names.contains(Array(Self.decomposed.utf8)), "the NFD name is in the replica")
    }

    /// The replica folder's names as the kernel has them (readdir's bytes).
    private func namesInReplica(_ root: String) throws -> Set<[UInt8]> {
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
/// the replica's String-keyed maps take for one. One is shown; the other
/// is an event that says why, never dropped in silence (issue 50).
@Suite struct NormalisationTwinTests {
    @Test("ids that differ only by Unicode normalisation: one shown, the other an event")
    func twinsAreReported() throws {
        let fixture = try Fixture()
        let host = fixture.hostile("normalisation_twins")
        #expect(host.waitUntilRunning(timeout: 10))
        let replicaRoot = try fixture.makeFolder("replica")
        let staging = try fixture.makeFolder("staging")
        let messages = Mutex<[String]>([])
        let provider = try ExtensionProvider(
            providerID: "cloud", calls: host, folder: ReplicaFolder(root: replicaRoot),
            writer: ReplicaFolder(root: replicaRoot), store: ReplicaStore(), staging: staging,
            tunables: ReplicaTunables(), logger: fixture.recorder.logger,
            events: { event in messages.withLock { $0.append(event.message) } })
        try provider.pull()
        let said = messages.withLock { $0 }
        #expect(
            said.contains { $0.contains("differ only by Unicode normalisation") },
            "the second spelling was dropped without an event: \(said)")
    }
}
