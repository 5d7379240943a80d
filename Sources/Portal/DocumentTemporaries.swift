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
    }

    /// Temporaries one view may hold in one document's folder at a time
    /// (SPEC S40): a save needs one; a bound keeps an app from filling the
    /// owner's folder with hidden files. Past it, creating one is ENOSPC.
    static let perDocumentAndView = 32

    private let state = Mutex<(next: UInt64, byNumber: [UInt64: Temporary])>((1, [:]))

    /// The host name a temporary of `documentName` gets: hidden, so the
    /// owner's file manager does not show a save in progress, and unique.
    static func hostName(for documentName: String) -> String {
        ".\(documentName).scopefs-\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
    }

    /// Whether `hostName` is a name `hostName(for: documentName)` gives.
    static func isHostName(_ hostName: String, of documentName: String) -> Bool {
        let prefix = ".\(documentName).scopefs-"
        guard hostName.hasPrefix(prefix) else { return false }
        let suffix = hostName.dropFirst(prefix.count)
        return !suffix.isEmpty && suffix.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) }
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

    /// Every temporary left, removed from the table: the layout's end
    /// removes their host files (a save never finished).
    func removeAll() -> [Temporary] {
        state.withLock { state in
            defer { state.byNumber = [:] }
            return state.byNumber.values.filter { !$0.becameDocument }
        }
    }
}
