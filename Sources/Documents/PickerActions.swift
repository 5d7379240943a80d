import CommandErrors
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore

/// The document picker's operations (SPEC S17–S20), as the commands and the
/// terminal picker perform them once the user has chosen.
public struct PickerActions: Sendable {
    public let state: StateDirectory
    public let repository: any IsolationStore

    public init(state: StateDirectory, repository: any IsolationStore) {
        self.state = state
        self.repository = repository
    }

    public struct Opened: Sendable, Codable {
        public var grant: GrantID
        /// The reference document's path inside the container (files only).
        public var reference: String?
        /// The app already had a grant of the item (it was reused).
        public var reusedGrant = false
        /// The reference already existed (it was reused, not written again).
        public var reusedReference = false
        /// What changed in a reused grant ("access read -> read-write").
        public var changes: [String] = []
    }

    /// Open (SPEC S17): an active grant, plus a reference document in
    /// `Container/Documents/` for a file. One grant and one reference per
    /// item per app: opening an item again reuses both, and only widens
    /// the grant (`GrantUpdate.widen`).
    public func open(
        app: AppID, provider: ProviderID, path: String, access: Access, session: Bool = false,
        wholeProvider: Bool = false
    ) throws(CommandError) -> Opened {
        let change = try repository.grant(
            app: app, provider: provider, path: path, access: access, session: session, update: .widen,
            wholeProvider: wholeProvider)
        let grant = change.grant
        var opened = Opened(
            grant: grant.id, reference: nil, reusedGrant: change.previous != nil, changes: change.changes)
        guard !grant.isDirectory else { return opened }
        if let existing = try references(app: app, to: [grant.item]).first {
            opened.reference = existing
            opened.reusedReference = true
            return opened
        }
        let name = RelativePath.lastComponent(of: grant.relativePath)
        opened.reference = try writeReference(
            ReferenceStub(provider: provider, item: grant.item, name: name), app: app, name: name)
        return opened
    }

    /// Forget: removes grants for good, with the reference documents that
    /// point at their items. Returns the grants and the removed references'
    /// container paths.
    public func forget(app: AppID, grant: GrantID?) throws(CommandError) -> (grants: [Grant], references: [String]) {
        let forgotten = try repository.forget(app: app, grant: grant)
        let references = try removeReferences(app: app, to: Set(forgotten.map(\.item)))
        return (forgotten, references)
    }

    /// Removes the app's reference documents to `items`; returns their
    /// container paths.
    public func removeReferences(app: AppID, to items: Set<ItemIdentifier>) throws(CommandError) -> [String] {
        guard !items.isEmpty else { return [] }
        let paths = try references(app: app, to: items)
        let container = state.containerPath(of: app)
        for path in paths where !ContainerFiles.removeFile(root: container, relative: path) {
            throw CommandError(
                .ioError, "cannot remove reference \(container)/\(path): \(String(cString: strerror(errno)))")
        }
        return paths
    }

    /// The container paths of the app's reference documents (anywhere in
    /// `Documents/`) that point at one of `items`, sorted.
    func references(app: AppID, to items: Set<ItemIdentifier>) throws(CommandError) -> [String] {
        let documents = try container(of: app) + "/Documents"
        return DocumentQuery.files(under: documents).sorted().filter { relative in
            DocumentQuery.stub(at: documents + "/" + relative).map { items.contains($0.item) } ?? false
        }.map { "Documents/" + $0 }
    }

    /// Import (SPEC S18): a copy in `Container/tmp/<app>-Inbox/`; no grant.
    /// The daemon removes the copy once the app has had it (`InboxKeeper`).
    public func importItem(app: AppID, provider providerID: ProviderID, path: String, copy: AtomicCopy)
        throws(CommandError) -> String
    {
        let (sourceFolder, sourceName) = try providerItem(providerID, path)
        let inbox = try PinnedFolder(
            root: try container(of: app), relative: MountLayout.inbox(of: app), create: true,
            what: "\(app)'s inbox")
        // Both folders stay open until the copy is done (ARC could close them after their last use).
        defer { withExtendedLifetime((sourceFolder, inbox)) {} }
        let name = Self.uniqueName(sourceName, in: inbox.path(of: ""))
        try journaled(copy).copy(
            try sourceFolder.existingItem(sourceName, what: "\(providerID):\(path)"), to: inbox.path(of: name))
        return MountLayout.inbox(of: app) + "/" + name
    }

    /// Export to service (SPEC S19): a copy in a provider folder; the app
    /// gets no access to it.
    public func export(app: AppID, containerPath: String, provider: ProviderID, folder: String, copy: AtomicCopy)
        throws(CommandError) -> String
    {
        let (sourceFolder, name) = try containerItem(app, containerPath)
        let destination = try providerFolder(provider, folder)
        defer { withExtendedLifetime((sourceFolder, destination)) {} }
        try journaled(copy).copy(
            try sourceFolder.existingItem(name, what: "\(app)'s \(containerPath)"), to: destination.path(of: name))
        return RelativePath.join(RelativePath.normalize(folder) ?? "", name)
    }

    /// Move to service (SPEC S20): the item leaves the container for a
    /// provider folder; the app gets a grant and a reference, as after Open.
    public func move(app: AppID, containerPath: String, provider: ProviderID, folder: String, copy: AtomicCopy)
        throws(CommandError) -> Opened
    {
        let destination = try export(
            app: app, containerPath: containerPath, provider: provider, folder: folder, copy: copy)
        // Removed without following a link, as it was copied.
        guard
            ContainerFiles.remove(
                root: try container(of: app), relative: RelativePath.normalize(containerPath) ?? containerPath)
        else {
            throw CommandError(
                .ioError,
                "copied to \(provider):\(destination) but cannot remove \(containerPath): \(String(cString: strerror(errno)))"
            )
        }
        return try open(app: app, provider: provider, path: destination, access: .readWrite, wholeProvider: true)
    }

    /// Before an export or move of several container items into one folder
    /// (SPEC S19, S20, S34): every item exists, no two share a name, the
    /// folder exists and, unless `replace`, no name is taken there. Checked
    /// for all before any is placed, so that the usual failures (a typo, a
    /// name collision) leave everything where it was.
    public func checkTransfer(
        app: AppID, containerPaths: [String], provider: ProviderID, folder: String, replace: Bool
    ) throws(CommandError) {
        let destination = try providerFolder(provider, folder)
        defer { withExtendedLifetime(destination) {} }
        var names: [String: String] = [:]
        for containerPath in containerPaths {
            let (sourceFolder, name) = try containerItem(app, containerPath)
            withExtendedLifetime(sourceFolder) {}
            if let earlier = names[name] {
                throw CommandError(
                    .usage, "\(earlier) and \(containerPath) have the same name; one folder cannot take both")
            }
            names[name] = containerPath
            let target = RelativePath.join(RelativePath.normalize(folder) ?? "", name)
            if !replace && HostFiles.exists(destination.path(of: name)) {
                throw CommandError(
                    .badData, "\(provider):\(target) already exists (for \(containerPath)); pass --force to replace it")
            }
        }
    }

    // MARK: Helpers

    /// Staged copies go to this state's `partial-copies/`, out of every
    /// app's sight, where the next command sweeps them if this one dies.
    private func journaled(_ copy: AtomicCopy) -> AtomicCopy {
        var copy = copy
        copy.partials = PartialCopies(state: state)
        return copy
    }

    /// Writes a stub under a name not yet taken ("a.txt", "a 2.txt", ...).
    private func writeReference(_ stub: ReferenceStub, app: AppID, name: String) throws(CommandError) -> String {
        // The app may have made Documents a link to a folder of the owner:
        // written only into the container's own folder, never through a link.
        let folder = try PinnedFolder(
            root: try container(of: app), relative: "Documents", create: true, what: "\(app)'s")
        defer { withExtendedLifetime(folder) {} }
        let documents = folder.path(of: "")
        for _ in 0..<1000 {
            let unique = Self.uniqueName(name, in: documents)
            let path = documents + unique
            let descriptor = unique.withHostCString {
                openat(folder.descriptor, $0, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
            }
            if descriptor < 0 && errno == EEXIST { continue }
            guard descriptor >= 0 else {
                throw CommandError(.ioError, "cannot create reference \(path): \(String(cString: strerror(errno)))")
            }
            let bytes = stub.bytes
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            close(descriptor)
            guard written == bytes.count else { throw CommandError(.ioError, "cannot write reference \(path)") }
            return "Documents/" + unique
        }
        throw CommandError(.ioError, "no free name for a reference to \(name) in \(documents)")
    }

    static func uniqueName(_ name: String, in folder: String) -> String {
        guard HostFiles.exists(folder + "/" + name) else { return name }
        let base = (name as NSString).deletingPathExtension
        let ext = (name as NSString).pathExtension
        for number in 2... {
            let candidate = ext.isEmpty ? "\(base) \(number)" : "\(base) \(number).\(ext)"
            if !HostFiles.exists(folder + "/" + candidate) { return candidate }
        }
        return name
    }

    private func container(of app: AppID) throws(CommandError) -> String {
        guard try repository.apps().contains(where: { $0.id == app }) else { throw CommandError.unknownApp(app) }
        return state.containerPath(of: app)
    }

    /// The folder holding a container item, reached without following
    /// links (the app controls its container), and the item's name.
    private func containerItem(_ app: AppID, _ path: String) throws(CommandError) -> (PinnedFolder, String) {
        guard let relative = RelativePath.normalize(path), !relative.isEmpty else {
            throw CommandError(.badData, "container path \(path) leaves the container")
        }
        let (folder, name) = try PinnedFolder.parent(
            root: try container(of: app), relative: relative, what: "\(app)'s \(relative)")
        _ = try folder.existingItem(name, what: "\(app)'s \(relative)")
        return (folder, name)
    }

    /// A provider item's folder and name, reached without following links:
    /// an app with a read-write grant can plant them there (SPEC S33).
    private func providerItem(_ providerID: ProviderID, _ path: String) throws(CommandError) -> (PinnedFolder, String) {
        let root = try providerPath(providerID, "")
        guard let relative = RelativePath.normalize(path), !relative.isEmpty else {
            throw CommandError(.badData, "\(providerID):\(path) names no item of the provider")
        }
        return try PinnedFolder.parent(root: root, relative: relative, what: "\(providerID):\(relative)")
    }

    private func providerFolder(_ providerID: ProviderID, _ path: String) throws(CommandError) -> PinnedFolder {
        let root = try providerPath(providerID, "")
        guard let relative = RelativePath.normalize(path) else {
            throw CommandError(.badData, "path \(path) leaves provider \(providerID)")
        }
        return try PinnedFolder(root: root, relative: relative, create: false, what: "\(providerID):\(relative)")
    }

    private func providerPath(_ providerID: ProviderID, _ path: String) throws(CommandError) -> String {
        guard let provider = try repository.providers().first(where: { $0.id == providerID }) else {
            throw CommandError.unknownProvider(providerID)
        }
        guard let relative = RelativePath.normalize(path) else {
            throw CommandError(.badData, "path \(path) leaves provider \(providerID)")
        }
        let full = relative.isEmpty ? provider.directory : provider.directory + "/" + relative
        guard HostFiles.exists(full) else {
            throw CommandError(.noInput, "\(providerID):\(relative) does not exist (\(full))")
        }
        return full
    }
}
