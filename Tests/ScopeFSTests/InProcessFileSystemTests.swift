import Foundation
import FuseBridge
import Glibc
import Policy
import SystemPackage
import Testing

@testable import ScopeFS

/// `ScopeFileSystem` driven in-process, without a mount (issue 51,
/// finding 4): the handlers the kernel would call, on a temporary state
/// and provider folder, with a caller chosen by the test. What the
/// integration suite proves through /dev/fuse for real processes, these
/// prove for the handlers alone, in milliseconds: an app's open, read and
/// write of a granted file gated by its scope (SPEC S9), and revocation
/// cutting a descriptor opened before it, for reads and writes alike
/// (SPEC S14; the write-after-revoke hole was invisible to the unit tests).
@Suite struct InProcessFileSystemTests {
    @Test func anAppReadsAGrantedFileOnlyWithinItsScope() throws {
        let world = try InProcessWorld()
        defer { world.remove() }
        let file = try world.lookup(world.alpha, "Providers", "local", "docs", "report.txt")
        #expect(throws: Errno.notPermitted) { try world.fs.open(world.alpha, inode: file.inode, flags: O_RDONLY) }
        try world.startAccessing(world.alpha, "Providers", "local", "docs")
        let open = try world.fs.open(world.alpha, inode: file.inode, flags: O_RDONLY)
        defer { world.fs.release(inode: file.inode, handle: open.handle) }
        #expect(try world.read(world.alpha, file.inode, open.handle) == "quarterly figures\n")
    }

    @Test func anUngrantedNameIsNoSuchFileAndAnotherAppSeesNothing() throws {
        let world = try InProcessWorld()
        defer { world.remove() }
        #expect(throws: Errno.noSuchFileOrDirectory) {
            try world.lookup(world.alpha, "Providers", "local", "private.txt")
        }
        #expect(throws: Errno.noSuchFileOrDirectory) {
            try world.lookup(world.beta, "Providers", "local", "docs")
        }
        // Another app's folder is not even a name to the caller (S2).
        #expect(throws: Errno.noSuchFileOrDirectory) {
            try world.fs.lookup(world.beta, parent: NodeTable.rootInode, name: InProcessWorld.alphaID)
        }
    }

    @Test func revocationCutsADescriptorOpenedBeforeItForReadsAndWrites() throws {
        let world = try InProcessWorld()
        defer { world.remove() }
        let file = try world.lookup(world.alpha, "Providers", "local", "docs", "report.txt")
        try world.startAccessing(world.alpha, "Providers", "local", "docs")
        let reader = try world.fs.open(world.alpha, inode: file.inode, flags: O_RDONLY)
        let writer = try world.fs.open(world.alpha, inode: file.inode, flags: O_WRONLY)
        defer {
            world.fs.release(inode: file.inode, handle: reader.handle)
            world.fs.release(inode: file.inode, handle: writer.handle)
        }
        #expect(try world.read(world.alpha, file.inode, reader.handle) == "quarterly figures\n")
        _ = try world.fs.writeTarget(world.alpha, inode: file.inode, handle: writer.handle)
        world.fs.writeFinished(inode: file.inode, handle: writer.handle)

        let invalidation = world.fs.install(world.snapshot(docs: .revoked, generation: 2))
        #expect(invalidation.inodes.contains(file.inode), "a revoke must drop the file's cached pages (S14)")
        #expect(throws: Errno.notPermitted) { try world.read(world.alpha, file.inode, reader.handle) }
        #expect(throws: Errno.notPermitted) {
            try world.fs.writeTarget(world.alpha, inode: file.inode, handle: writer.handle)
        }
        #expect(throws: Errno.notPermitted) {
            try world.fs.open(world.alpha, inode: file.inode, flags: O_RDONLY)
        }

        // Restored, the same descriptors work again (S15).
        _ = world.fs.install(world.snapshot(docs: .active, generation: 3))
        #expect(try world.read(world.alpha, file.inode, reader.handle) == "quarterly figures\n")
    }

    @Test func aReadOnlyGrantRefusesAWriterAtItsOpen() throws {
        let world = try InProcessWorld(access: .read)
        defer { world.remove() }
        let file = try world.lookup(world.alpha, "Providers", "local", "docs", "report.txt")
        try world.startAccessing(world.alpha, "Providers", "local", "docs")
        #expect(throws: Errno.notPermitted) { try world.fs.open(world.alpha, inode: file.inode, flags: O_RDWR) }
        let reader = try world.fs.open(world.alpha, inode: file.inode, flags: O_RDONLY)
        world.fs.release(inode: file.inode, handle: reader.handle)
    }
}

/// A state directory with containers for two apps, a provider folder with
/// `docs/report.txt` and an ungranted `private.txt`, and a file system
/// serving them; Alpha holds a folder grant on `docs`.
private struct InProcessWorld {
    static let alphaID = "com.example.alpha"
    static let betaID = "com.example.beta"
    let root: String
    let fs: ScopeFileSystem
    let access: Access
    /// Requests as the kernel would send them for one process of each app
    /// (told apart by the thread id the resolver maps).
    let alpha = Request(threadID: 1001, uid: getuid(), gid: getgid(), umask: 0o022)
    let beta = Request(threadID: 1002, uid: getuid(), gid: getgid(), umask: 0o022)

    init(access: Access = .readWrite) throws {
        var template = Array("/tmp/scopefs-inprocess-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Errno(rawValue: errno) }
        root = String(cString: made)
        self.access = access
        let manager = FileManager.default
        for folder in ["containers/\(Self.alphaID)", "containers/\(Self.betaID)", "provider/docs"] {
            try manager.createDirectory(atPath: "\(root)/\(folder)", withIntermediateDirectories: true)
        }
        try Data("quarterly figures\n".utf8).write(to: URL(fileURLWithPath: "\(root)/provider/docs/report.txt"))
        try Data("not granted\n".utf8).write(to: URL(fileURLWithPath: "\(root)/provider/private.txt"))
        let events = DiscardedEvents()
        let scopes = ScopeRegistry(mode: .strict, budget: 64, lineage: { [$0] }, events: events)
        fs = try ScopeFileSystem(
            configuration: MountConfiguration(openFiles: .revoke, containersPath: "\(root)/containers"),
            callers: ThreadCallers(), scopes: scopes, events: events, documents: NoDocumentServices(),
            snapshot: Self.policy(root: root, docs: .active, access: access, generation: 1))
    }

    func snapshot(docs state: GrantState, generation: UInt64) -> PolicySnapshot {
        Self.policy(root: root, docs: state, access: access, generation: generation)
    }

    private static func policy(root: String, docs state: GrantState, access: Access, generation: UInt64)
        -> PolicySnapshot
    {
        PolicySnapshot(
            generation: generation, apps: [App(id: alphaID, name: "Alpha"), App(id: betaID, name: "Beta")],
            providers: [Provider(id: "local", name: "Local", directory: "\(root)/provider")],
            grants: [
                Grant(
                    id: 1, app: alphaID, provider: "local", item: "item-docs", relativePath: "docs", isDirectory: true,
                    access: access, state: state, grantedAt: 0)
            ])
    }

    /// Looks up each name from the app's own folder at the root.
    @discardableResult
    func lookup(_ request: Request, _ names: String...) throws(Errno) -> Entry {
        let app = request.threadID == alpha.threadID ? Self.alphaID : Self.betaID
        var entry = try fs.lookup(request, parent: NodeTable.rootInode, name: app)
        for name in names { entry = try fs.lookup(request, parent: entry.inode, name: name) }
        return entry
    }

    func startAccessing(_ request: Request, _ names: String...) throws(Errno) {
        let app = request.threadID == alpha.threadID ? Self.alphaID : Self.betaID
        var entry = try fs.lookup(request, parent: NodeTable.rootInode, name: app)
        for name in names { entry = try fs.lookup(request, parent: entry.inode, name: name) }
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        try fs.setxattr(request, inode: entry.inode, name: ControlAttributeName.start.rawValue, value: empty, flags: 0)
    }

    func read(_ request: Request, _ inode: UInt64, _ handle: UInt64) throws(Errno) -> String {
        switch try fs.read(request, inode: inode, handle: handle, offset: 0, size: 4096) {
        case .bytes(let bytes):
            return String(decoding: bytes, as: UTF8.self)
        case .descriptor(let descriptor, let offset, let size):
            var buffer = [UInt8](repeating: 0, count: size)
            let count = pread(descriptor, &buffer, size, Int(offset))
            guard count >= 0 else { throw Errno(rawValue: errno) }
            return String(decoding: buffer.prefix(count), as: UTF8.self)
        }
    }

    func remove() { try? FileManager.default.removeItem(atPath: root) }
}

/// Thread 1001 is a process of Alpha, 1002 one of Beta.
private struct ThreadCallers: CallerResolver {
    func caller(of request: Request) -> Caller {
        switch request.threadID {
        case 1001: return .app(InProcessWorld.alphaID, ProcessKey(pid: 1001, startTime: 1))
        case 1002: return .app(InProcessWorld.betaID, ProcessKey(pid: 1002, startTime: 1))
        default: return .stranger
        }
    }
}

private struct DiscardedEvents: EventSink {
    func record(_ event: Event) {}
}
