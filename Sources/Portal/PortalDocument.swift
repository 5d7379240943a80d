import Foundation
import Glibc
import HostText
import Policy
import Synchronization

/// One exported file or folder: what the document portal calls a
/// document. Its access is not stored here: it is the ScopeFS grants of
/// the item (SPEC S45), so `scopefs privacy`, `revoke` and the portal's
/// own methods read and change one isolation layer.
public struct PortalDocument: Codable, Sendable, Equatable {
    /// The document's id: eight lowercase hex digits, unique in the store.
    public var id: String
    /// The file's absolute path on the host when it was exported.
    public var hostPath: String
    /// The ScopeFS provider holding the item, and its path inside it.
    public var provider: ProviderID
    public var relativePath: String
    public var isDirectory: Bool
    /// Whether the document (and its grants) outlive the portal process and
    /// the apps' sessions; otherwise its grants are session grants (S16a).
    public var persistent: Bool
    /// The apps' permissions while the document's file does not exist yet
    /// (AddNamed of a name to be made: "Save As"). ScopeFS grants are of
    /// items, which need a file: they are made when it appears
    /// (`DocumentPortal.fileAppeared`), and these go.
    public var pending: [AppID: Access]? = nil

    /// The document's name inside its folder of the mount layout.
    public var name: String { (hostPath as NSString).lastPathComponent }

    /// Whether the document's file is on the host now.
    var fileExists: Bool {
        var status = stat()
        return hostPath.withHostCString { lstat($0, &status) } == 0
    }

    /// `app`'s pending permission as the grant it will be, for the one
    /// access rule to decide on (SPEC S47) until the file appears.
    func pendingGrant(for app: AppID) -> Grant? {
        guard let access = pending?[app] else { return nil }
        return Grant(
            id: 0, app: app, provider: provider, item: "", relativePath: relativePath, isDirectory: false,
            access: access, state: .active, grantedAt: 0, isSession: !persistent)
    }

    /// Every pending permission as such a grant.
    var pendingGrants: [Grant] { (pending ?? [:]).keys.sorted().compactMap(pendingGrant) }
}

/// The portal's documents, in a JSON file of the state directory
/// (written whole, through a rename, so a crash leaves the old or the new
/// file). Persistent ones outlive the portal; transient ones last the
/// portal's lifetime, and are written too so that the next portal knows
/// which session grants the last one gave (`ended`), however it stopped.
/// The bus thread changes it while the layout's FUSE workers read it.
final class DocumentTable: Sendable {
    private let table = Mutex<[String: PortalDocument]>([:])
    private let file: String
    /// The transient documents an earlier portal left in the file: gone
    /// with it, their grants are to end (`DocumentPortal.endTransient`).
    let ended: [PortalDocument]

    init(file: String) {
        self.file = file
        let saved =
            FileManager.default.contents(atPath: file).flatMap {
                try? JSONDecoder().decode([PortalDocument].self, from: $0)
            } ?? []
        ended = saved.filter { !$0.persistent }
        table.withLock { documents in
            for document in saved where document.persistent { documents[document.id] = document }
        }
    }

    /// Writes the table without the earlier portal's transient documents,
    /// once their grants ended.
    func forgetEnded() throws {
        if !ended.isEmpty { try save() }
    }

    var documents: [String: PortalDocument] { table.withLock { $0 } }

    func document(at hostPath: String) -> PortalDocument? {
        documents.values.first { $0.hostPath.sameHostName(as: hostPath) }
    }

    /// A new document with a fresh id, or the existing one for the same
    /// file (one document per item: ScopeFS grants are per item), made
    /// persistent when `persistent` asks for it.
    func add(hostPath: String, provider: ProviderID, relativePath: String, isDirectory: Bool, persistent: Bool)
        throws -> PortalDocument
    {
        let (document, changed) = table.withLock { documents -> (PortalDocument, Bool) in
            if var existing = documents.values.first(where: { $0.hostPath.sameHostName(as: hostPath) }) {
                guard persistent && !existing.persistent else { return (existing, false) }
                existing.persistent = true
                documents[existing.id] = existing
                return (existing, true)
            }
            var id: String
            repeat {
                id = String(format: "%08x", UInt32.random(in: 1...UInt32.max))
            } while documents[id] != nil
            let document = PortalDocument(
                id: id, hostPath: hostPath, provider: provider, relativePath: relativePath, isDirectory: isDirectory,
                persistent: persistent)
            documents[id] = document
            return (document, true)
        }
        if changed { try save() }
        return document
    }

    /// Sets (nil: removes) `app`'s pending permission on the document.
    func setPending(_ id: String, app: AppID, _ access: Access?) throws {
        let changed = table.withLock { documents -> Bool in
            guard var document = documents[id] else { return false }
            var pending = document.pending ?? [:]
            pending[app] = access
            document.pending = pending.isEmpty ? nil : pending
            documents[id] = document
            return true
        }
        if changed { try save() }
    }

    /// Removes every pending permission of the document, returning them.
    func takePending(_ id: String) throws -> [AppID: Access] {
        let taken = table.withLock { documents -> [AppID: Access] in
            guard var document = documents[id], let pending = document.pending else { return [:] }
            document.pending = nil
            documents[id] = document
            return pending
        }
        if !taken.isEmpty { try save() }
        return taken
    }

    func remove(_ id: String) throws {
        guard table.withLock({ $0.removeValue(forKey: id) }) != nil else { return }
        try save()
    }

    /// Written by the bus thread only, so two saves never race.
    private func save() throws {
        let kept = documents.values.sorted { $0.id < $1.id }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(kept)
        let temporary = file + ".new"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600])
        else { throw CocoaError(.fileWriteUnknown) }
        guard rename(temporary, file) == 0 else { throw CocoaError(.fileWriteUnknown) }
    }
}
