import HostText
import Policy
import Synchronization

/// The temporary files of atomic saves in the document layout (SPEC S48):
/// what an editor writes beside a document in its `DOC_ID` folder and
/// renames over it (GLib's `g_file_set_contents`, Qt's `QSaveFile`).
///
/// Each is a host file in the document's host folder under a hidden name
/// of its own (`hostName`), shown under the name the app chose only in
/// the `DOC_ID` folder of the view that made it (an app's, or the
/// owner's): never in another app's, never a grant, never a document.
/// It can be written, renamed to another temporary name, renamed over
/// the document, or removed; nothing else.
final class DocumentTemporaries: Sendable {
    struct Temporary: Sendable, Equatable {
        var documentID: String
        /// The view that made it: an app's, or nil for the owner's `DOC_ID`.
        var app: AppID?
        /// The name the app sees in the `DOC_ID` folder.
        var name: String
        /// The host file's name in the document's host folder.
        var hostName: String
        /// Renamed over the document: its number still names the
        /// document's file for the kernel, which moved the temporary's
        /// entry to the document's name, until the kernel forgets it.
        var becameDocument = false
        /// The processes that made or opened it: once none runs and no
        /// descriptor holds it, the save will never be finished.
        var makers: Set<ProcessKey> = []
        /// The document's own file, renamed to a temporary name (vim's
        /// backup): if the save is never finished, it goes back.
        var holdsDocument = false
    }

    /// Temporaries one view may hold in one document's folder at a time
    /// (SPEC S40): a save needs one; a bound keeps an app from filling the
    /// owner's folder with hidden files. Past it, creating one is ENOSPC.
    static let perDocumentAndView = 32

    private let state = Mutex<(next: UInt64, byNumber: [UInt64: Temporary])>((1, [:]))

    /// The host name a temporary of `documentName` gets (`SaveTemporaryNames`).
    static func hostName(for documentName: String) -> String {
        SaveTemporaryNames.make(beside: documentName, by: .portal)
    }

    /// Whether `hostName` is a name `hostName(for: documentName)` gives.
    static func isHostName(_ hostName: String, of documentName: String) -> Bool {
        SaveTemporaryNames.isTemporary(hostName, beside: documentName, by: .portal)
    }

    func temporary(_ number: UInt64) -> Temporary? { state.withLock { $0.byNumber[number] } }

    /// The number of the temporary `name` of the view in the document's folder.
    func number(document: String, app: AppID?, name: String) -> UInt64? {
        state.withLock { state in
            state.byNumber.first {
                $0.value.documentID == document && $0.value.app == app && $0.value.name == name
                    && !$0.value.becameDocument
            }?.key
        }
    }

    /// The view's temporaries in the document's folder, by name.
    func listed(document: String, app: AppID?) -> [(name: String, number: UInt64)] {
        state.withLock { state in
            state.byNumber.filter { $0.value.documentID == document && $0.value.app == app && !$0.value.becameDocument }
                .map { ($0.value.name, $0.key) }.sorted { $0.name < $1.name }
        }
    }

    /// Records a temporary; nil when its view holds the most it may in
    /// that folder already.
    func add(_ temporary: Temporary) -> UInt64? {
        state.withLock { state in
            let held = state.byNumber.values.filter {
                $0.documentID == temporary.documentID && $0.app == temporary.app && !$0.becameDocument
            }
            guard held.count < Self.perDocumentAndView else { return nil }
            let number = state.next
            state.next += 1
            state.byNumber[number] = temporary
            return number
        }
    }

    func remove(_ number: UInt64) -> Temporary? { state.withLock { $0.byNumber.removeValue(forKey: number) } }

    /// Removes the temporary unless it was renamed over its document
    /// meanwhile; what was removed.
    func removeUnsaved(_ number: UInt64) -> Temporary? {
        state.withLock { state in
            guard state.byNumber[number]?.becameDocument == false else { return nil }
            return state.byNumber.removeValue(forKey: number)
        }
    }

    /// Every temporary not renamed over its document, by number.
    func unsaved() -> [(number: UInt64, temporary: Temporary)] {
        state.withLock { state in
            state.byNumber.filter { !$0.value.becameDocument }.map { ($0.key, $0.value) }
        }
    }

    /// `process` made or opened the temporary.
    func touched(_ number: UInt64, by process: ProcessKey?) {
        guard let process else { return }
        state.withLock { _ = $0.byNumber[number]?.makers.insert(process) }
    }

    /// The temporary was renamed over its document: it is no temporary any
    /// more, and its number names the document until `forgotten`.
    func becameDocument(_ number: UInt64) {
        state.withLock { $0.byNumber[number]?.becameDocument = true }
    }

    /// The kernel forgot the number: a temporary renamed over its document
    /// needs it no more.
    func forgotten(_ number: UInt64) {
        state.withLock { state in
            if state.byNumber[number]?.becameDocument == true { state.byNumber[number] = nil }
        }
    }

    /// Gives the temporary another name the app sees (its host file stays).
    func rename(_ number: UInt64, to name: String) {
        state.withLock { $0.byNumber[number]?.name = name }
    }

    /// The document's file was renamed to the temporary's host name.
    func holdsDocument(_ number: UInt64) {
        state.withLock { $0.byNumber[number]?.holdsDocument = true }
    }

    /// Every temporary left, removed from the table: the layout's end
    /// removes their host files (a save never finished).
    func removeAll() -> [Temporary] {
        state.withLock { state in
            defer { state.byNumber = [:] }
            return state.byNumber.values.filter { !$0.becameDocument }
        }
    }
}
