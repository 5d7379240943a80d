import CommandErrors
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore

/// `scopefs query` (SPEC S28): an app's documents as NSMetadataQuery lists
/// them — its own documents in `Container/Documents` and the external
/// documents its reference documents point at.
public struct DocumentQuery: Sendable {
    public enum SearchScope: String, Sendable, CaseIterable {
        /// NSMetadataQueryUbiquitousDocumentsScope: the app's own documents.
        case documents
        /// NSMetadataQueryAccessibleUbiquitousExternalDocumentsScope: references.
        case external
        case all
    }

    public struct Result: Codable, Sendable, Equatable {
        /// The document (for a reference: the original's path in the mount).
        public var url: String
        /// Where it lives in the app's container (for a reference: the stub).
        public var urlInLocalContainer: String
        public var isExternalDocument: Bool
        /// The provider's display name for external documents, the app's for its own.
        public var containerDisplayName: String
        // camelCase like every `--json`; docs/CLI.md lists the
        // NSMetadataItem attribute each field stands for.
    }

    public let state: StateDirectory
    public let repository: any IsolationStore
    /// Brings items' recorded paths up to date first; nil on a fleet's
    /// store, whose items only the owner's role may change.
    public let locator: ItemLocator?

    public init(state: StateDirectory, repository: any IsolationStore, locator: ItemLocator?) {
        self.state = state
        self.repository = repository
        self.locator = locator
    }

    /// `mount` is the mount's path, or nil when no daemon serves the state
    /// directory (paths are then given relative to the mount, as `/<app>/...`).
    public func run(app: AppID, scope: SearchScope, nameGlob: String?, mount: String?) throws(CommandError) -> [Result]
    {
        guard try repository.apps().contains(where: { $0.id == app }) else { throw CommandError.unknownApp(app) }
        try locator?.refresh()
        let snapshot = try repository.snapshot(generation: 0)
        return Self.results(
            app: app, scope: scope, nameGlob: nameGlob, snapshot: snapshot, state: state,
            prefix: (mount ?? "") + "/" + app + "/")
    }

    /// The results from a snapshot the caller already holds (the daemon's,
    /// for an app's live query); paths are `prefix` + the path in the app's
    /// view (`Container/Documents/...`, `Providers/P/...`).
    public static func results(
        app: AppID, scope: SearchScope, nameGlob: String?, snapshot: PolicySnapshot, state: StateDirectory,
        prefix: String
    ) -> [Result] {
        let appName = snapshot.apps[app]?.name ?? app
        let documents = state.containerPath(of: app) + "/" + MountLayout.documents
        var results: [Result] = []
        for relative in Self.files(under: documents) {
            let name = (relative as NSString).lastPathComponent
            if let glob = nameGlob, fnmatch(glob, name, 0) != 0 { continue }
            let local = prefix + MountLayout.containerPath(MountLayout.documents + "/" + relative)
            if let stub = Self.stub(at: documents + "/" + relative) {
                guard scope != .documents else { continue }
                // Only references to items the app holds a grant on answer
                // (issue 28 finding 3): a stub the app wrote itself tells nothing.
                let location = snapshot.referencedLocation(app: app, provider: stub.provider, item: stub.item)
                let path = location.map { prefix + MountLayout.providerPath(provider: stub.provider, path: $0.path) }
                let providerName = location == nil ? nil : snapshot.providers[stub.provider]?.name
                results.append(
                    Result(
                        url: path ?? "", urlInLocalContainer: local, isExternalDocument: true,
                        containerDisplayName: providerName ?? stub.provider))
            } else if scope != .external {
                results.append(
                    Result(
                        url: local, urlInLocalContainer: local, isExternalDocument: false, containerDisplayName: appName
                    ))
            }
        }
        return results.sorted { $0.urlInLocalContainer < $1.urlInLocalContainer }
    }

    package static func stub(at path: String) -> ReferenceStub? {
        let descriptor = path.withHostCString { open($0, O_RDONLY | O_CLOEXEC) }
        guard descriptor >= 0 else { return nil }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: ReferenceStub.maximumSize + 1) else { return nil }
        return ReferenceStub.parse(Array(data))
    }

    /// Regular files below `root`, relative to it, hidden files skipped.
    /// Read with readdir: names are bytes (SPEC S33a).
    package static func files(under root: String) -> [String] {
        var files: [String] = []
        var folders = [""]
        while let folder = folders.popLast() {
            for name in HostFiles.names(in: folder.isEmpty ? root : root + "/" + folder) ?? [] {
                let relative = RelativePath.join(folder, name)
                guard let info = HostFiles.status(root + "/" + relative) else { continue }
                switch info.st_mode & S_IFMT {
                case S_IFREG where name.utf8.first != UInt8(ascii: "."): files.append(relative)
                case S_IFDIR: folders.append(relative)
                default: break
                }
            }
        }
        return files
    }
}
