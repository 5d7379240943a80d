// The smallest ScopeFS provider extension written with the Swift SDK
// (ScopeFSExtension): a local folder.
//
//     scopefs-folder-extension ROOT
//
// It is the protocol's conformance subject (Tests/extensions), and follows
// the same rules as the Python example (docs/examples/extensions/folder.py):
//
// Identity: an item's id is its inode number ("i1234"), the root's "root".
// An inode stays the same across renames and moves inside ROOT, made here
// or behind the extension's back, so the daemon's bookmarks keep working
// (Apple's rule: an identifier survives a rename); a persisted path -> id
// map would lose an item renamed by another program. Finding the path of an
// id needs an index, kept in memory and rebuilt by a walk on a miss.
// Contents are written in place, since a rename over the file would give
// it a new inode, so a new id.
//
// Versions: content "mtime_ns:size:inode", metadata
// "parent/name:mode:mtime_ns"; both change when what they describe changes.
// Writes compare them right before writing (a window of one system call,
// documented in docs/PROVIDERS.md).
//
// Changes: snapshots of the whole tree compared (SnapshotChanges, "poll").
// Symbolic links are served as symlink items and never followed.
//
// Previews (protocol 1.2): a preview the saving app wrote (`thumbnailPath`
// of create and modify) is kept as ROOT/.scopefs-thumbnails/ID.png, a
// folder the listings leave out, and served by `thumbnail`; a file without
// one has none (the Python example also generates one).
import Foundation
import ScopeFSExtension

#if canImport(Glibc)
    import Glibc
#endif

final class FolderExtension: ReplicatedExtension, @unchecked Sendable {
    let name = "swift-folder"
    let version = "1.0"
    static let pageSize = 500

    private let root: String
    private let rootInode: UInt64
    private let lock = NSLock()
    private var paths: [ItemIdentifier: String]
    private var changeTracker: SnapshotChanges!

    init(root: String) throws {
        self.root = URL(fileURLWithPath: root).resolvingSymlinksInPath().path
        self.rootInode = UInt64(try Self.status(self.root).st_ino)
        self.paths = [.rootContainer: self.root]
        self.changeTracker = SnapshotChanges { [unowned self] in try self.snapshot() }
    }

    func initialize(
        providerIdentifier: String, stagingDirectory: URL, options: [String: String], connection: ExtensionConnection
    ) async throws -> Capabilities {
        var capabilities = Capabilities()
        capabilities.changes = .poll
        capabilities.ranges = true
        capabilities.create = true
        capabilities.modify = true
        capabilities.delete = true
        capabilities.rename = true
        capabilities.conditionalWrites = true
        capabilities.maxPageSize = Self.pageSize
        capabilities.settableFields = ["name", "parent", "mtime", "mode"]
        capabilities.symlinks = true
        capabilities.thumbnails = true
        return capabilities
    }

    // MARK: Ids and paths

    static func status(_ path: String) throws -> stat {
        var result = stat()
        guard lstat(path, &result) == 0 else { throw ExtensionError.fromErrno(errno) }
        return result
    }

    private func identifier(of inode: UInt64) -> ItemIdentifier {
        inode == rootInode ? .rootContainer : "i\(inode)"
    }

    private func isStill(_ identifier: ItemIdentifier, at path: String) -> Bool {
        guard let status = try? Self.status(path) else { return false }
        return self.identifier(of: UInt64(status.st_ino)) == identifier
    }

    private func path(of identifier: ItemIdentifier) throws -> String {
        if let path = lock.withLock({ paths[identifier] }), isStill(identifier, at: path) { return path }
        _ = try snapshot()  // rebuilds the index
        guard let path = lock.withLock({ paths[identifier] }), isStill(identifier, at: path) else {
            throw ExtensionError.noSuchItem("no item '\(identifier)'")
        }
        return path
    }

    /// The path of a folder id; a symlink is not a folder (never followed).
    private func folderPath(of identifier: ItemIdentifier) throws -> String {
        let path = try path(of: identifier)
        guard try Self.status(path).st_mode & S_IFMT == S_IFDIR else {
            throw ExtensionError.invalidParams("'\(identifier)' is not a folder")
        }
        return path
    }

    private func item(at path: String, parent knownParent: ItemIdentifier?) throws -> Item {
        let status = try Self.status(path)
        let identifier = identifier(of: UInt64(status.st_ino))
        lock.withLock { paths[identifier] = path }
        let kind: ItemKind
        switch status.st_mode & S_IFMT {
        case S_IFDIR: kind = .folder
        case S_IFLNK: kind = .symlink
        case S_IFREG: kind = .file
        default: throw ExtensionError.noSuchItem("not a file, folder or symlink")  // devices, sockets
        }
        let isRoot = identifier == .rootContainer
        let name = isRoot ? "" : (path as NSString).lastPathComponent
        var parent = knownParent
        if parent == nil && !isRoot {
            let parentPath = (path as NSString).deletingLastPathComponent
            parent = self.identifier(of: UInt64(try Self.status(parentPath).st_ino))
            lock.withLock { paths[parent!] = parentPath }
        }
        let mtimeNanoseconds = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
        let mode = Int(status.st_mode & 0o7777)
        let size = kind == .folder ? 0 : Int64(status.st_size)
        let parentText = isRoot ? "None" : parent!
        return Item(
            identifier: identifier, parentIdentifier: isRoot ? nil : parent, filename: name, kind: kind, size: size,
            modificationTime: Double(mtimeNanoseconds) / 1e9, mode: mode,
            itemVersion: ItemVersion(
                contentVersion: kind == .folder ? "folder" : "\(mtimeNanoseconds):\(size):\(status.st_ino)",
                metadataVersion: "\(parentText)/\(name):\(String(mode, radix: 8)):\(mtimeNanoseconds)"),
            symlinkTarget: kind == .symlink ? try readLink(path) : nil)
    }

    private func readLink(_ path: String) throws -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count >= 0 else { throw ExtensionError.fromErrno(errno) }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A folder's children sorted by name, as bytes (the page token compares the same way).
    private func children(of folder: String, identifier: ItemIdentifier) throws -> [Item] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: folder)
        } catch {
            throw ExtensionError.noSuchItem("cannot list '\(identifier)'")
        }
        let shown = folder == root ? names.filter { $0 != Self.thumbnails } : names
        return shown.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.compactMap { name in
            try? item(at: folder + "/" + name, parent: identifier)  // gone meanwhile, or a kind not served
        }
    }

    private func snapshot() throws -> [ItemIdentifier: Item] {
        var tree: [ItemIdentifier: Item] = [.rootContainer: try item(at: root, parent: nil)]
        var pending = [(root, ItemIdentifier.rootContainer)]
        while let (path, identifier) = pending.popLast() {
            guard let children = try? children(of: path, identifier: identifier) else { continue }
            for child in children {
                tree[child.identifier] = child
                if child.kind == .folder { pending.append((path + "/" + child.filename, child.identifier)) }
            }
        }
        return tree
    }

    // MARK: Reading

    func item(for identifier: ItemIdentifier, request: RequestContext) async throws -> Item {
        try item(at: path(of: identifier), parent: nil)
    }

    func enumerateItems(in container: ItemIdentifier, page: String?, pageSize: Int, request: RequestContext)
        async throws -> ItemPage
    {
        // The page token is the last name sent: stable while names come and go.
        var items = try children(of: folderPath(of: container), identifier: container)
        if let page { items = items.filter { page.utf8.lexicographicallyPrecedes($0.filename.utf8) } }
        let chunk = Array(items.prefix(pageSize))
        return ItemPage(items: chunk, nextPage: items.count > pageSize ? chunk.last?.filename : nil)
    }

    func currentSyncAnchor(request: RequestContext) async throws -> String {
        try await changeTracker.currentAnchor()
    }

    func enumerateChanges(since anchor: String, request: RequestContext) async throws -> ItemChanges {
        try await changeTracker.changes(since: anchor)
    }

    func fetchContents(for identifier: ItemIdentifier, version: String?, range: ByteRange?, request: RequestContext)
        async throws -> FetchedContents
    {
        let path = try path(of: identifier)
        let current = try item(at: path, parent: nil)
        guard current.kind == .file else { throw ExtensionError.invalidParams("only files have contents to fetch") }
        if let version, version != current.itemVersion.contentVersion {
            throw ExtensionError(
                .conflict, "the item changed", data: .object(["version": .string(current.itemVersion.contentVersion)]))
        }
        let offset = min(range?.offset ?? 0, current.size)
        let length = min(range?.length ?? current.size, current.size - offset)
        let source = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard source >= 0 else { throw ExtensionError.fromErrno(errno) }
        defer { close(source) }
        let (staged, url) = try request.makeStagingFile()
        do {
            defer { close(staged) }
            var copied: Int64 = 0
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while copied < length {
                try request.checkCancelled()
                let wanted = Int(min(Int64(buffer.count), length - copied))
                let count = buffer.withUnsafeMutableBytes {
                    pread(source, $0.baseAddress!, wanted, off_t(offset + copied))
                }
                if count < 0 { throw ExtensionError.fromErrno(errno) }
                if count == 0 { break }
                try writeAll(staged, buffer, count)
                copied += Int64(count)
                request.progress(completed: copied, total: length)
            }
            if try item(at: path, parent: nil).itemVersion.contentVersion != current.itemVersion.contentVersion {
                throw ExtensionError(.conflict, "the item changed while it was read")
            }
            return FetchedContents(
                url: url, contentVersion: current.itemVersion.contentVersion, offset: offset, length: copied)
        } catch {
            unlink(url.path)
            throw error
        }
    }

    // MARK: Previews

    /// Where saved previews are kept, left out of every listing.
    static let thumbnails = ".scopefs-thumbnails"

    private func thumbnailPath(of identifier: ItemIdentifier) -> String {
        root + "/" + Self.thumbnails + "/" + identifier + ".png"
    }

    func fetchThumbnail(for identifier: ItemIdentifier, size: Int, request: RequestContext) async throws
        -> StagedThumbnail?
    {
        guard try item(at: path(of: identifier), parent: nil).kind == .file,
            let data = FileManager.default.contents(atPath: thumbnailPath(of: identifier))
        else { return nil }
        let (staged, url) = try request.makeStagingFile()
        defer { close(staged) }
        let bytes = [UInt8](data)
        do {
            try writeAll(staged, bytes, bytes.count)
        } catch {
            unlink(url.path)
            throw error
        }
        return StagedThumbnail(url: url, length: Int64(bytes.count))
    }

    func saveThumbnail(for identifier: ItemIdentifier, from url: URL, request: RequestContext) async throws {
        let folder = root + "/" + Self.thumbnails
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let kept = thumbnailPath(of: identifier)
        let data = try Data(contentsOf: url)
        try data.write(to: URL(fileURLWithPath: kept), options: .atomic)
    }

    // MARK: Writing

    func createItem(basedOn template: ItemTemplate, contents: URL?, request: RequestContext) async throws -> Item {
        let path = try folderPath(of: template.parentIdentifier) + "/" + template.filename
        switch template.kind {
        case .folder:
            guard mkdir(path, mode_t(template.mode ?? 0o755)) == 0 else { throw ExtensionError.fromErrno(errno) }
        case .symlink:
            guard symlink(template.symlinkTarget ?? "", path) == 0 else { throw ExtensionError.fromErrno(errno) }
        case .file:
            let out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
            guard out >= 0 else { throw ExtensionError.fromErrno(errno) }
            defer { close(out) }
            if let contents { try copy(contents.path, to: out) }
        }
        if let mode = template.mode, template.kind != .symlink, chmod(path, mode_t(mode)) != 0 {
            throw ExtensionError.fromErrno(errno)
        }
        if let mtime = template.modificationTime { try setModificationTime(path, mtime) }
        return try item(at: path, parent: template.parentIdentifier)
    }

    func modifyItem(
        _ identifier: ItemIdentifier, baseVersion: ItemVersion, changedFields: ChangedFields, contents: URL?,
        request: RequestContext
    ) async throws -> Item {
        var path = try path(of: identifier)
        let current = try item(at: path, parent: nil)
        if contents != nil && baseVersion.contentVersion != current.itemVersion.contentVersion {
            throw ExtensionError.conflict("the contents changed since the base version", current: current)
        }
        if !changedFields.isEmpty && baseVersion.metadataVersion != current.itemVersion.metadataVersion {
            throw ExtensionError.conflict("the metadata changed since the base version", current: current)
        }
        if let contents {
            guard current.kind == .file else { throw ExtensionError.invalidParams("only files have contents") }
            // In place, so that the inode, and so the id, stays.
            let out = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
            guard out >= 0 else { throw ExtensionError.fromErrno(errno) }
            defer { close(out) }
            guard ftruncate(out, 0) == 0 else { throw ExtensionError.fromErrno(errno) }
            try copy(contents.path, to: out)
        }
        if changedFields.filename != nil || changedFields.parentIdentifier != nil {
            guard identifier != .rootContainer else { throw ExtensionError.invalidParams("the root is not renamed") }
            let folder = try folderPath(of: changedFields.parentIdentifier ?? current.parentIdentifier!)
            let destination = folder + "/" + (changedFields.filename ?? current.filename)
            if destination != path {
                var existing = stat()
                if lstat(destination, &existing) == 0 {
                    throw ExtensionError(.filenameCollision, "'\(changedFields.filename ?? current.filename)' exists")
                }
                guard rename(path, destination) == 0 else { throw ExtensionError.fromErrno(errno) }
                path = destination
            }
        }
        if let mode = changedFields.mode, current.kind != .symlink, chmod(path, mode_t(mode)) != 0 {
            throw ExtensionError.fromErrno(errno)
        }
        if let mtime = changedFields.modificationTime { try setModificationTime(path, mtime) }
        return try item(at: path, parent: nil)
    }

    func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion, request: RequestContext) async throws {
        guard identifier != .rootContainer else { throw ExtensionError.invalidParams("the root is not deleted") }
        let path = try path(of: identifier)
        let current = try item(at: path, parent: nil)
        if baseVersion.contentVersion != current.itemVersion.contentVersion {
            throw ExtensionError.conflict("the item changed since the base version", current: current)
        }
        let result = current.kind == .folder ? rmdir(path) : unlink(path)
        guard result == 0 else { throw ExtensionError.fromErrno(errno) }  // ENOTEMPTY: directoryNotEmpty
    }

    // MARK: Helpers

    private func copy(_ source: String, to out: Int32) throws {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw ExtensionError.fromErrno(errno, "contents") }
        defer { close(input) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress!, $0.count) }
            if count < 0 { throw ExtensionError.fromErrno(errno) }
            if count == 0 { return }
            try writeAll(out, buffer, count)
        }
    }

    private func writeAll(_ descriptor: Int32, _ buffer: [UInt8], _ count: Int) throws {
        var done = 0
        while done < count {
            let written = buffer.withUnsafeBytes { write(descriptor, $0.baseAddress! + done, count - done) }
            if written < 0 { throw ExtensionError.fromErrno(errno) }
            done += written
        }
    }

    private func setModificationTime(_ path: String, _ seconds: Double) throws {
        let whole = seconds.rounded(.down)
        let time = timespec(tv_sec: Int(whole), tv_nsec: Int(((seconds - whole) * 1e9).rounded()))
        let times = [time, time]
        guard utimensat(AT_FDCWD, path, times, AT_SYMLINK_NOFOLLOW) == 0 else { throw ExtensionError.fromErrno(errno) }
    }
}

let arguments = CommandLine.arguments
var isFolder: ObjCBool = false
guard arguments.count == 2, FileManager.default.fileExists(atPath: arguments[1], isDirectory: &isFolder),
    isFolder.boolValue
else {
    FileHandle.standardError.write(Data("usage: scopefs-folder-extension ROOT (an existing folder)\n".utf8))
    exit(2)
}
do {
    ExtensionServer.run(try FolderExtension(root: arguments[1]))
} catch {
    FileHandle.standardError.write(Data("scopefs-folder-extension: \(error)\n".utf8))
    exit(1)
}
