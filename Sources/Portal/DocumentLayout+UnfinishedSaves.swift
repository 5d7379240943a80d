import CSystemShims
import Foundation
import Glibc
import HostText
import Policy
import Processes

/// Saves that will never be finished (SPEC S48, S40, S34): a temporary's
/// host file sits in the owner's folder under a hidden name, and nothing
/// can rename it over its document once its view may no longer replace
/// the document (revoked, narrowed, forgotten), once every process that
/// made or opened it has ended with no descriptor left on it (an app that
/// crashed mid-save), or once the portal that knew it is gone. Each is
/// removed then, as the mount removes its own (`removeTemporaries`), so
/// no save leaves files behind in the owner's folders.
extension DocumentLayout {
    /// How often the layout looks for abandoned temporaries while it serves.
    static let abandonedSweepInterval: UInt32 = 1

    /// Removes the temporaries no save will finish; how many went.
    func removeAbandonedTemporaries() -> Int {
        var removed = 0
        for (number, temporary) in temporaries.unsaved() where isAbandoned(number, temporary) {
            guard let gone = temporaries.removeUnsaved(number) else { continue }
            if let document = portal.table.documents[gone.documentID] { discard(gone, of: document) }
            removed += 1
        }
        return removed
    }

    /// Ends a save's temporary: the document's own file, renamed away for
    /// the save (vim's backup), goes back to the document's name while
    /// that is free (SPEC S34: nothing is lost); anything else is removed.
    private func discard(_ temporary: DocumentTemporaries.Temporary, of document: PortalDocument) {
        let path = Self.hostPath(of: temporary, in: document)
        if temporary.holdsDocument {
            let restored = path.withHostCString { from in
                document.hostPath.withHostCString { renameat2(AT_FDCWD, from, AT_FDCWD, $0, Self.renameNoReplace) }
            }
            if restored == 0 { return }
        }
        _ = path.withHostCString { Glibc.unlink($0) }
    }

    private func isAbandoned(_ number: UInt64, _ temporary: DocumentTemporaries.Temporary) -> Bool {
        guard let document = portal.table.documents[temporary.documentID] else { return true }
        // A revoke cuts the save even through a descriptor still open:
        // its writes fail (EPERM) and the rename finds no name.
        guard mayReplace(document, app: temporary.app) else { return true }
        if handles.withLock({ $0.open.values.contains { $0.temporary == number } }) { return false }
        return !temporary.makers.contains(where: ProcFS.isRunning)
    }

    /// What the saves of an earlier portal left when it was killed (SPEC
    /// S34): the regular files beside each file document named as its
    /// temporaries are (`DocumentTemporaries.hostName`). Run before the
    /// layout is mounted, once the bus name is this portal's, so no save
    /// of this portal is in progress. Returns how many files went.
    func removeEarlierPortalsTemporaries() -> Int {
        var removed = 0
        for document in portal.table.documents.values where !document.isDirectory {
            let folder = Self.hostFolder(of: document)
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
            for name in names where DocumentTemporaries.isHostName(name, of: document.name) {
                let path = (folder == "/" ? "" : folder) + "/" + name
                var status = stat()
                guard path.withHostCString({ lstat($0, &status) }) == 0, status.st_mode & S_IFMT == S_IFREG,
                    path.withHostCString({ Glibc.unlink($0) }) == 0
                else { continue }
                removed += 1
            }
        }
        return removed
    }

    /// The temporaries of saves never finished: their host files go with
    /// the layout.
    func removeLeftTemporaries() {
        for temporary in temporaries.removeAll() {
            guard let document = portal.table.documents[temporary.documentID] else { continue }
            discard(temporary, of: document)
        }
    }
}
