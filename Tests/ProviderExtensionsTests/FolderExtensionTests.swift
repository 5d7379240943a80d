import Foundation
import Glibc
import ProviderExtensions
import Testing

/// The host against the real Python folder extension
/// (docs/examples/extensions/folder.py): every method of
/// docs/PROVIDERS.md through `ExtensionCalls` (SPEC S41, S43).
@Suite struct FolderExtensionTests {
    let fixture: Fixture
    let root: String
    let host: ExtensionHost

    init() throws {
        fixture = try Fixture()
        root = try fixture.makeFolder("root")
        try fixture.write("root/hello.txt", "hello world")
        try fixture.makeFolder("root/docs")
        host = fixture.folderHost(root: root)
        #expect(host.waitUntilRunning(timeout: 10))
    }

    @Test("initialize: the folder extension's capabilities, state running")
    func initialize() throws {
        guard case .running(let info) = host.state else {
            Issue.record("not running: \(host.state)")
            return
        }
        #expect(info.name == "folder")
        #expect(info.protocolVersion == "1.2", "the Python SDK speaks 1.2, the daemon offers it")
        #expect(info.capabilities.thumbnails, "the folder example serves previews (SPEC S50)")
        #expect(info.capabilities.changes == .poll)
        #expect(info.capabilities.ranges && info.capabilities.create && info.capabilities.rename)
        #expect(info.capabilities.maxPageSize == 500)
        #expect(info.capabilities.settableFields == ["name", "parent", "mtime", "mode"])
        #expect(fixture.recorder.count { $0.isStarted } == 1)
    }

    @Test("item and list: the root, its children, each with its parent")
    func itemAndList() throws {
        let rootItem = try host.item("root", RequestControl())
        #expect(rootItem.kind == .folder && rootItem.parent == nil && rootItem.name == "")
        let page = try host.list("root", page: nil, RequestControl())
        #expect(page.items.map(\.name).sorted() == ["docs", "hello.txt"])
        #expect(page.nextPage == nil)
        let hello = try #require(page.items.first { $0.name == "hello.txt" })
        #expect(hello.size == 11 && hello.kind == .file && hello.parent == "root")
        #expect(try host.item(hello.id, RequestControl()) == hello)
        let missing = failure { try host.item("i999999999", RequestControl()) }
        #expect(missing?.code == .noSuchItem && missing?.errno == ENOENT)
    }

    @Test("list pages: 501 children come in two pages of at most 500")
    func paging() throws {
        let many = try fixture.makeFolder("root/many")
        for index in 0..<501 { _ = FileManager.default.createFile(atPath: many + "/f\(index)", contents: nil) }
        let folder = try #require(try host.list("root", page: nil, RequestControl()).items.first { $0.name == "many" })
        let first = try host.list(folder.id, page: nil, RequestControl())
        #expect(first.items.count == 500)
        let next = try #require(first.nextPage)
        let second = try host.list(folder.id, page: next, RequestControl())
        #expect(second.items.count == 1 && second.nextPage == nil)
    }

    @Test("thumbnail: a PNG preview of a file, taken out of staging; a saved one comes back (SPEC S50)")
    func thumbnails() throws {
        let hello = try #require(
            try host.list("root", page: nil, RequestControl()).items.first { $0.name == "hello.txt" })
        #expect(hello.thumbnail == true)
        let generated = try #require(try host.thumbnail(hello.id, size: 256, RequestControl()))
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        #expect(Array(generated.prefix(8)) == signature)
        #expect(try FileManager.default.contentsOfDirectory(atPath: host.stagingDirectory).isEmpty)
        let preview = signature + Array(repeating: 7, count: 40)
        let saved = fixture.path("preview.png")
        try Data(preview).write(to: URL(filePath: saved))
        let contents = fixture.path("contents")
        try Data("hello again".utf8).write(to: URL(filePath: contents))
        _ = try host.modify(
            hello.id, baseVersion: hello.version, fields: ChangedFields(), contents: contents, thumbnail: saved,
            RequestControl())
        #expect(try host.thumbnail(hello.id, size: 256, RequestControl()) == preview)
        let names = try host.list("root", page: nil, RequestControl()).items.map(\.name)
        #expect(!names.contains(".scopefs-thumbnails"), "the store's previews are not items")
    }

    @Test("fetch with a range: the staged bytes, moved out of staging, link count 1")
    func fetchRange() throws {
        let hello = try #require(
            try host.list("root", page: nil, RequestControl()).items.first { $0.name == "hello.txt" })
        let file = try host.fetch(
            hello.id, version: hello.version.content, range: ByteRange(offset: 6, length: 5), RequestControl())
        #expect(file.offset == 6 && file.length == 5 && file.version == hello.version.content)
        #expect(try String(contentsOfFile: file.path, encoding: .utf8) == "world")
        #expect(file.path.hasPrefix(host.receivedDirectory + "/"))
        var status = stat()
        #expect(lstat(file.path, &status) == 0 && status.st_nlink == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: host.stagingDirectory).isEmpty)
        let whole = try host.fetch(hello.id, version: nil, range: nil, RequestControl())
        #expect(try String(contentsOfFile: whole.path, encoding: .utf8) == "hello world")
        // A version that is gone is a conflict: ESTALE to a reader.
        let stale = failure { try host.fetch(hello.id, version: "0:0:0", range: nil, RequestControl()) }
        #expect(stale?.code == .conflict && stale?.errno == ESTALE)
    }

    @Test("create, modify and delete with base versions; a stale base is a conflict (SPEC S43)")
    func writes() throws {
        let contents = try fixture.write("upload", "first")
        let created = try host.create(
            ItemTemplate(parent: "root", name: "new.txt", kind: .file, mtime: nil, mode: 0o600), contents: contents,
            RequestControl())
        #expect(created.size == 5 && created.mode == 0o600)
        #expect(try String(contentsOfFile: root + "/new.txt", encoding: .utf8) == "first")
        let exists = failure {
            try host.create(
                ItemTemplate(parent: "root", name: "new.txt", kind: .file, mtime: nil, mode: nil), contents: nil,
                RequestControl())
        }
        #expect(exists?.code == .exists && exists?.errno == EEXIST)

        // Someone else edits it: the daemon's base version is now stale.
        usleep(20_000)
        try Data("changed elsewhere".utf8).write(to: URL(filePath: root + "/new.txt"))
        let second = try fixture.write("upload2", "second")
        let conflict = failure {
            try host.modify(
                created.id, baseVersion: created.version, fields: ChangedFields(), contents: second, RequestControl())
        }
        #expect(conflict?.code == .conflict && conflict?.errno == ESTALE)
        #expect(try String(contentsOfFile: root + "/new.txt", encoding: .utf8) == "changed elsewhere")

        let current = try host.item(created.id, RequestControl())
        let modified = try host.modify(
            created.id, baseVersion: current.version, fields: ChangedFields(name: "renamed.txt"), contents: second,
            RequestControl())
        #expect(modified.name == "renamed.txt" && modified.id == created.id)
        #expect(try String(contentsOfFile: root + "/renamed.txt", encoding: .utf8) == "second")

        let staleDelete = failure { try host.delete(created.id, baseVersion: current.version, RequestControl()) }
        #expect(staleDelete?.code == .conflict)
        try host.delete(created.id, baseVersion: modified.version, RequestControl())
        #expect(!FileManager.default.fileExists(atPath: root + "/renamed.txt"))
        #expect(failure { try host.item(created.id, RequestControl()) }?.code == .noSuchItem)
        // The error answers are events (docs/PROVIDERS.md, "Errors").
        #expect(fixture.recorder.events.contains { $0.name == "extension.conflict" })
    }

    @Test("a name the protocol forbids is refused before it is sent (EINVAL)")
    func invalidName() {
        for name in ["", ".", "..", "a/b", String(repeating: "n", count: 256)] {
            let refused = failure {
                try host.create(
                    ItemTemplate(parent: "root", name: name, kind: .file, mtime: nil, mode: nil), contents: nil,
                    RequestControl())
            }
            #expect(refused?.code == .invalidName && refused?.errno == EINVAL, "\(name)")
        }
    }

    @Test("currentAnchor and changes: a file made behind the extension's back is reported")
    func changes() throws {
        let anchor = try host.currentAnchor(RequestControl())
        try fixture.write("root/behind.txt", "made elsewhere")
        try FileManager.default.removeItem(atPath: root + "/docs")
        let changes = try host.changes(since: anchor, RequestControl())
        #expect(changes.updated.contains { $0.name == "behind.txt" })
        #expect(changes.deleted.count == 1)
        #expect(changes.anchor != anchor)
        let expired = failure { try host.changes(since: "never-given", RequestControl()) }
        #expect(expired?.code == .anchorExpired)
    }

    @Test("stop: shutdown and exit, status 0, state stopped; calls then fail unreachable")
    func stop() throws {
        host.stop()
        #expect(host.state == .stopped)
        #expect(fixture.recorder.events.contains(.exited(.code(0))))
        #expect(fixture.recorder.events.last == .stopped)
        let after = failure { try host.item("root", RequestControl()) }
        #expect(after?.code == .unreachable && after?.errno == EIO)
    }
}
