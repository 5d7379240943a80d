import Policy
import Synchronization

/// The temporary files of atomic saves beside single-file grants (SPEC
/// S48): Foundation's `write(to:atomically: true)`, GLib's
/// `g_file_set_contents` and Qt's `QSaveFile` write a new file in the
/// granted file's folder and rename it over the file. Under a bare folder
/// (`Coverage.ancestor`) nothing may be made, so the file system keeps the
/// names an app made there to replace a file it may write, and only
/// those: each is seen by that app alone (`Coverage.replacing`), can be
/// written, renamed over a granted file of its folder or to another
/// temporary name, or removed, and never becomes a grant.
///
/// Leaf lock: no syscall and no other lock while it is held.
final class ReplacementTemporaries: Sendable {
    struct Key: Hashable, Sendable {
        var app: AppID
        var provider: ProviderID
        /// The temporary's path in the provider.
        var path: String
    }

    /// Temporaries one app may hold at a time (SPEC S40): a save needs
    /// one; past the bound a create is ENOSPC for that app only.
    static let perApp = 64

    private struct State {
        /// Each temporary, and the grant of the file it was made to replace.
        var grants: [Key: GrantID] = [:]
        /// Files renamed over a grant's file, until the served policy
        /// records them as the grant's item (`PolicySnapshot.itemFile`).
        var replacedFiles: [GrantID: ItemFile] = [:]
    }

    private let state = Mutex(State())

    func grant(of key: Key) -> GrantID? { state.withLock { $0.grants[key] } }

    /// Whether the app has made any temporary in the provider: until it
    /// has, a hidden name costs no path.
    func any(app: AppID, provider: ProviderID) -> Bool {
        state.withLock { $0.grants.keys.contains { $0.app == app && $0.provider == provider } }
    }

    /// Records a temporary; false once the app holds the most it may.
    func add(_ key: Key, replacing grant: GrantID) -> Bool {
        state.withLock { state in
            guard state.grants.keys.filter({ $0.app == key.app }).count < Self.perApp else { return false }
            state.grants[key] = grant
            return true
        }
    }

    func remove(_ key: Key) { state.withLock { _ = $0.grants.removeValue(forKey: key) } }

    func rename(_ key: Key, to path: String) {
        state.withLock { state in
            guard let grant = state.grants.removeValue(forKey: key) else { return }
            var moved = key
            moved.path = path
            state.grants[moved] = grant
        }
    }

    /// A temporary was renamed over `grant`'s file: that file is the
    /// grant's item now, before the store records it.
    func replaced(_ grant: GrantID, by file: ItemFile) {
        state.withLock { $0.replacedFiles[grant] = file }
    }

    /// The file a save put at `grant`'s path, while the policy has not
    /// caught up; dropped once `recorded` (the policy's) is that file.
    func replacedFile(of grant: GrantID, recorded: ItemFile?) -> ItemFile? {
        state.withLock { state in
            guard let file = state.replacedFiles[grant] else { return nil }
            if file == recorded { state.replacedFiles[grant] = nil }
            return file
        }
    }
}
