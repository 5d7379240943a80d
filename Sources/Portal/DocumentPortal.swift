import CPortalBus
import CommandErrors
import Control
import Foundation
import Glibc
import HostText
import Policy
import PolicyStore
import Processes

/// The Documents interface's methods on Swift values: what each does to
/// the document table and to ScopeFS's grants (docs/PORTAL.md). The D-Bus
/// side (`DocumentsObject`) only reads arguments and writes replies.
final class DocumentPortal: Sendable {
    /// AddFull's flags (xdg-desktop-portal's DocumentAddFullFlags).
    struct AddFlags: OptionSet {
        let rawValue: UInt32
        static let reuseExisting = AddFlags(rawValue: 1)
        static let persistent = AddFlags(rawValue: 2)
        static let asNeededByApp = AddFlags(rawValue: 4)
        static let exportDirectory = AddFlags(rawValue: 8)
        static let known: AddFlags = [.reuseExisting, .persistent, .asNeededByApp, .exportDirectory]
    }

    /// The permissions the portal names, and what ScopeFS keeps of them.
    enum Permission: String, CaseIterable {
        case read
        case write
        case grantPermissions = "grant-permissions"
        case delete
    }

    let mountPoint: String
    let table: DocumentTable
    let grants: DocumentGrants
    /// Who a bus caller or a layout request is: the daemon serving the
    /// state directory tells app processes by its own attribution (SPEC
    /// S5). A root owner's apps, and their bus proxies, run as the app
    /// account.
    let callers: CallerIdentity

    init(state: StateDirectory, mountPoint: String, policy: PortalPolicy) {
        self.mountPoint = mountPoint
        self.table = DocumentTable(file: state.path + "/portal-documents.json")
        self.grants = DocumentGrants(state: state, policy: policy)
        let appAccount = geteuid() == 0 ? AppAccount.forOwner(0) : nil
        self.callers = CallerIdentity(
            source: .daemon(
                { pid in ControlClient.identify(pid: pid, state: state).map { $0.mapError { $0 as any Error } } },
                registrations: RegistrationWatch(state: state)),
            appUIDs: Set(appAccount.map { [$0.uid] } ?? []))
    }

    /// Ends what an earlier portal's transient documents gave: they lasted
    /// its lifetime (as xdg-document-portal's do), so their session grants
    /// end now, whether it stopped cleanly or was killed; without this an
    /// app kept access a restart had taken from the document table.
    /// Returns how many documents ended, or what failed.
    func endEarlierTransients() -> Result<Int, PortalError> {
        do throws(PortalError) {
            for document in table.ended { try grants.forgetSessions(document) }
            do { try table.forgetEnded() } catch { throw .failed("cannot save the document store: \(error)") }
            return .success(table.ended.count)
        } catch {
            return .failure(error)
        }
    }

    // MARK: Adding documents

    /// Add, AddNamed, AddFull and AddNamedFull: one document per file,
    /// checked all before any is added (nothing is granted when one fails).
    /// `app` ("" for none) gets `permissions`.
    func add(
        _ files: [ExportedFile], flags: AddFlags, app: AppID, permissions: [String]
    ) throws(PortalError) -> [PortalDocument] {
        guard flags.isSubset(of: .known) else {
            throw .invalidArgument("unknown flags 0x\(String(flags.subtracting(.known).rawValue, radix: 16))")
        }
        let access = try Self.access(of: permissions)
        if !app.isEmpty { try Self.validate(app: app) }
        var located: [(file: ExportedFile, provider: ProviderID, relativePath: String)] = []
        for file in files {
            if file.isDirectory && !flags.contains(.exportDirectory) {
                throw .notAllowed("\(file.path) is a folder: export folders with AddFull's export-directory flag")
            }
            try refuseMountAncestor(file.path)
            let (provider, relativePath) = try grants.locate(file.path)
            located.append((file, provider, relativePath))
        }
        var documents: [PortalDocument] = []
        for entry in located {
            let document: PortalDocument
            do {
                document = try table.add(
                    hostPath: entry.file.path, provider: entry.provider, relativePath: entry.relativePath,
                    isDirectory: entry.file.isDirectory, persistent: flags.contains(.persistent))
            } catch {
                throw .failed("cannot save the document store: \(error)")
            }
            if !app.isEmpty, let access {
                // Write access only where the caller's descriptor showed it could write.
                try allow(document, app: app, access: entry.file.writable ? access : .read)
            }
            documents.append(document)
        }
        return documents
    }

    // MARK: Permissions

    func grantPermissions(_ id: String, app: AppID, permissions: [String]) throws(PortalError) {
        let document = try document(id)
        try Self.validate(app: app)
        guard let access = try Self.access(of: permissions) else { return }
        try allow(document, app: app, access: access)
    }

    /// Gives `app` `access` to the document: a ScopeFS grant of its item,
    /// or, while its file does not exist, a pending permission.
    private func allow(_ document: PortalDocument, app: AppID, access: Access) throws(PortalError) {
        if document.fileExists { return try grants.grant(document, to: app, access: access) }
        try grants.register(app)
        do { try table.setPending(document.id, app: app, access) } catch {
            throw .failed("cannot save the document store: \(error)")
        }
    }

    /// The document's file appeared (an app made it through the layout):
    /// its pending permissions become ScopeFS grants of the new item.
    func fileAppeared(_ document: PortalDocument) {
        guard document.pending != nil, document.fileExists, let taken = try? table.takePending(document.id) else {
            return
        }
        for (app, access) in taken.sorted(by: { $0.key < $1.key }) {
            try? grants.grant(document, to: app, access: access)
        }
    }

    func revokePermissions(_ id: String, app: AppID, permissions: [String]) throws(PortalError) {
        let document = try document(id)
        try Self.validate(app: app)
        let asked = try Self.permissions(permissions)
        if let pending = document.pending?[app], asked.contains(.read) || asked.contains(.write) {
            let narrowed: Access? = asked.contains(.read) ? nil : (pending == .readWrite ? .read : pending)
            do { try table.setPending(document.id, app: app, narrowed) } catch {
                throw .failed("cannot save the document store: \(error)")
            }
        }
        if asked.contains(.read) {
            try grants.revoke(document, from: app, keepRead: false)
        } else if asked.contains(.write) {
            try grants.revoke(document, from: app, keepRead: true)
        }
    }

    func delete(_ id: String) throws(PortalError) {
        let document = try document(id)
        try grants.forgetAll(document)
        do { try table.remove(id) } catch { throw .failed("cannot save the document store: \(error)") }
    }

    // MARK: Reading the store

    /// The id of the document of `path` (a host path, or a path inside the
    /// mount layout), "" when there is none.
    func lookup(_ path: String) throws(PortalError) -> String {
        guard path.hasPrefix("/") else { throw .invalidArgument("\(path) is not an absolute path") }
        guard !path.split(separator: "/").contains(where: { $0 == ".." || $0 == "." }) else {
            throw .invalidArgument("\(path) has . or .. components")
        }
        // In the layout only a document's own file names it (a save's
        // temporary beside it names nothing).
        if path.hasHostPrefix(mountPoint + "/") {
            return hostPathInLayout(path).flatMap { table.document(at: $0)?.id } ?? ""
        }
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        return table.document(at: resolved)?.id ?? table.document(at: path)?.id ?? ""
    }

    /// Info: the document's host path and each app's permissions (active
    /// grants only: a revoked grant gives nothing).
    func info(_ id: String) throws(PortalError) -> (path: String, apps: [AppID: [String]]) {
        let document = try document(id)
        var apps: [AppID: [String]] = [:]
        for grant in try grants.grants(of: document) + document.pendingGrants {
            // What the one access rule gives the app through it (S47).
            switch DocumentGrants.access(grant, app: grant.app) {
            case .readWrite: apps[grant.app] = ["read", "write"]
            case .read: apps[grant.app] = apps[grant.app] ?? ["read"]
            case nil: continue
            }
        }
        return (document.hostPath, apps)
    }

    /// List: every document ("" app) or those `app` holds an active grant of.
    func list(app: AppID) throws(PortalError) -> [String: String] {
        var listed: [String: String] = [:]
        for document in table.documents.values {
            if !app.isEmpty {
                let held = try (grants.grants(of: document) + document.pendingGrants).contains {
                    $0.app == app && DocumentGrants.access($0, app: app) != nil
                }
                if !held { continue }
            }
            listed[document.id] = document.hostPath
        }
        return listed
    }

    /// GetHostPaths: the host paths of the ids that name documents (others are left out).
    func hostPaths(_ ids: [String]) -> [String: String] {
        var paths: [String: String] = [:]
        for id in ids { if let document = table.documents[id] { paths[id] = document.hostPath } }
        return paths
    }

    // MARK: Checks

    private func document(_ id: String) throws(PortalError) -> PortalDocument {
        guard let document = table.documents[id] else { throw .notFound("no document \(id)") }
        return document
    }

    /// The host path that `path` names through the layout: a document's
    /// file (`MOUNT/DOC_ID/NAME`, `MOUNT/by-app/APP/DOC_ID/NAME`) or what
    /// is below a folder document; nil for anything else (the layout's own
    /// folders, a save's temporary).
    func hostPathInLayout(_ path: String) -> String? {
        guard path.hasHostPrefix(mountPoint + "/") else { return nil }
        var components = HostName.string(path.utf8.dropFirst(mountPoint.utf8.count + 1)).split(separator: "/")
        if components.first == "by-app", components.count >= 2 { components.removeFirst(2) }
        guard components.count >= 2, let document = table.documents[String(components[0])],
            String(components[1]).sameHostName(as: document.name), components.count == 2 || document.isDirectory
        else { return nil }
        return ([document.hostPath] + components.dropFirst(2).map(String.init)).joined(separator: "/")
    }

    /// The mount layout cannot hold itself: exporting the mount point, a
    /// folder above it or anything inside it is refused.
    private func refuseMountAncestor(_ path: String) throws(PortalError) {
        if path == "/" || mountPoint.sameHostName(as: path) || mountPoint.hasHostPrefix(path + "/")
            || path.hasHostPrefix(mountPoint + "/")
        {
            throw .notAllowed("\(path) holds or is inside the document mount \(mountPoint)")
        }
    }

    /// A portal app id is a Flatpak application id (as xdg-document-portal
    /// checks it): a ScopeFS app id of at least two dot-separated elements,
    /// each of letters, digits, `_` and `-`, none starting with a digit.
    static func validate(app: AppID) throws(PortalError) {
        do { try Identifier.validate(app, what: "app") } catch { throw .invalidArgument(error.message) }
        let elements = app.split(separator: ".", omittingEmptySubsequences: false)
        let valid =
            elements.count >= 2 && app.utf8.count <= 255
            && elements.allSatisfy { element in
                guard let first = element.first, !first.isNumber else { return false }
                return element.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
            }
        guard valid else {
            throw .invalidArgument(
                "invalid app id '\(app)': a Flatpak application id has two or more elements (e.g. org.example.Editor)")
        }
    }

    static func permissions(_ names: [String]) throws(PortalError) -> Set<Permission> {
        var set = Set<Permission>()
        for name in names {
            guard let permission = Permission(rawValue: name) else {
                throw .invalidArgument("unknown permission \(name) (read, write, grant-permissions, delete)")
            }
            set.insert(permission)
        }
        return set
    }

    /// The ScopeFS access `permissions` amount to: write is read-write,
    /// read alone is read; nil when neither is named (nothing to grant).
    static func access(of names: [String]) throws(PortalError) -> Access? {
        let set = try permissions(names)
        if set.contains(.write) { return .readWrite }
        return set.contains(.read) ? .read : nil
    }
}

/// A file a caller passed a descriptor of, as the descriptor proved it.
struct ExportedFile {
    var path: String
    var isDirectory: Bool
    var writable: Bool

    /// The file of `fd` (or `name` in the folder of `fd` for the Named
    /// methods), refused unless the descriptor shows the caller could open
    /// it: readable by its access mode, or for O_PATH by the file's mode.
    init(descriptor fd: Int32, name: String? = nil) throws(PortalError) {
        var info = scopefs_portal_fd_info()
        let result = scopefs_portal_inspect_fd(fd, &info)
        guard result == 0 else {
            throw .invalidArgument(
                "the descriptor names no file the caller can reach (\(String(cString: strerror(-result))))")
        }
        let path = withUnsafeBytes(of: &info.path) {
            HostName.string(cString: $0.bindMemory(to: CChar.self).baseAddress!)
        }
        guard info.is_regular != 0 || info.is_directory != 0 else {
            throw .notAllowed("\(path) is neither a regular file nor a folder")
        }
        guard info.readable != 0 else { throw .notAllowed("the caller could not open \(path) for reading") }
        if let name {
            guard info.is_directory != 0 else { throw .invalidArgument("the descriptor of a Named call is a folder's") }
            guard !name.isEmpty, name != ".", name != "..", !name.contains("/") else {
                throw .invalidArgument("\(name) is not a file name (no /, . or ..)")
            }
            let full = (path == "/" ? "" : path) + "/" + name
            var status = stat()
            guard full.withHostCString({ lstat($0, &status) }) == 0 else {
                // A name to be made ("Save As"): the document waits for its
                // file, which the caller could make where it may write the folder.
                guard errno == ENOENT else { throw .notFound("\(full): \(String(cString: strerror(errno)))") }
                self.init(
                    path: full, isDirectory: false,
                    writable: path.withHostCString({ access($0, W_OK) }) == 0 && info.writable != 0)
                return
            }
            guard (status.st_mode & S_IFMT) == S_IFREG else { throw .notAllowed("\(full) is not a regular file") }
            self.init(
                path: full, isDirectory: false,
                writable: full.withHostCString({ access($0, W_OK) }) == 0 && info.writable != 0)
        } else {
            self.init(path: path, isDirectory: info.is_directory != 0, writable: info.writable != 0)
        }
    }

    init(path: String, isDirectory: Bool, writable: Bool) {
        self.path = path
        self.isDirectory = isDirectory
        self.writable = writable
    }
}
