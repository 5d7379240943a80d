import Foundation

/// Conflict copies not yet resolved, for `status` (issue 47): a copy
/// counts until it is removed or renamed away, as an unresolved
/// NSFileVersion counts until it is resolved or removed. Kept in the
/// replica's store (one path a line), so a restart still counts them.
extension ExtensionProvider {
    static let conflictsKey = "conflicts"

    /// A conflict copy was made at `path` (on the sync thread).
    func rememberConflict(_ path: String) {
        let known = (try? store.value(Self.conflictsKey)).flatMap { $0 } ?? ""
        try? store.setValue(known.isEmpty ? path : known + "\n" + path, for: Self.conflictsKey)
    }

    /// How many conflict copies are still where they were made; those gone
    /// are forgotten.
    var unresolvedConflicts: Int {
        guard let known = (try? store.value(Self.conflictsKey)).flatMap({ $0 }), !known.isEmpty else { return 0 }
        let paths = known.split(separator: "\n").map(String.init)
        let present = paths.filter { folder.status($0) != nil }
        if present.count != paths.count {
            try? store.setValue(present.isEmpty ? nil : present.joined(separator: "\n"), for: Self.conflictsKey)
        }
        return present.count
    }
}
