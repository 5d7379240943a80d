import HostText
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
/// A temporary's host file has a hidden name of its own (`hostName`), as
/// the portal's do (`DocumentTemporaries`): the name the app chose is the
/// app's alone, so a name the host has beside the grant answers as any
/// other (S2, S32: an ungranted file is invisible, even to a create), and
/// no ungranted file is ever opened, replaced or shown through one. The
/// node table knows a temporary by its host name; lookups, listings,
/// renames and unlinks, which the kernel sends with the app's name, are
/// translated here.
///
/// Leaf lock: no syscall and no other lock while it is held.
final class ReplacementTemporaries: Sendable {
    /// A name in a provider as one app sees it.
    struct Key: Hashable, Sendable {
        var app: AppID
        var provider: ProviderID
        /// The path in the provider: the app's name of a temporary, or
        /// the host's (`hostKey`).
        var path: String
    }

    struct Temporary: Sendable, Equatable {
        /// The grant whose file it was made to replace.
        var grant: GrantID
        /// The host file's name in the folder.
        var hostName: String
    }

    /// Temporaries one app may hold at a time (SPEC S40): a save needs
    /// one; past the bound a create is ENOSPC for that app only.
    static let perApp = 64

    private struct State {
        /// Each temporary by the app's path of it.
        var temporaries: [Key: Temporary] = [:]
        /// The app's path of each temporary, by its host path.
        var byHostPath: [Key: Key] = [:]
        /// Files renamed over a grant's file, until the served policy
        /// records them as the grant's item (`PolicySnapshot.itemFile`).
        var replacedFiles: [GrantID: ItemFile] = [:]
    }

    private let state = Mutex(State())
    /// How many temporaries there are, readable without the lock: every
    /// getattr and lookup of a provider file asks `any` (`isTemporary`),
    /// and with none, which is nearly always, that costs one load.
    private let held = Atomic<Int>(0)

    /// The host name a temporary of a file gets (`SaveTemporaryNames`).
    static func hostName(beside granted: String) -> String {
        SaveTemporaryNames.make(beside: granted, by: .mount)
    }

    /// The temporary the app calls `key.path`.
    func temporary(_ key: Key) -> Temporary? {
        guard held.load(ordering: .acquiring) > 0 else { return nil }
        return state.withLock { $0.temporaries[key] }
    }

    func grant(of key: Key) -> GrantID? { temporary(key)?.grant }

    /// The grant of the temporary whose host file is at `key.path`.
    func grant(ofHostPath key: Key) -> GrantID? {
        state.withLock { state in state.byHostPath[key].flatMap { state.temporaries[$0]?.grant } }
    }

    /// Whether the app has made any temporary in the provider: until it
    /// has, a hidden name costs no path.
    func any(app: AppID, provider: ProviderID) -> Bool {
        guard held.load(ordering: .acquiring) > 0 else { return false }
        return state.withLock { $0.temporaries.keys.contains { $0.app == app && $0.provider == provider } }
    }

    /// The app's temporaries in `folder`: the app's name and the host's.
    func listed(app: AppID, provider: ProviderID, folder: String) -> [(name: String, hostName: String)] {
        state.withLock { state in
            state.temporaries.compactMap { key, temporary in
                guard key.app == app, key.provider == provider, RelativePath.parent(of: key.path) ?? "" == folder
                else { return nil }
                return (RelativePath.lastComponent(of: key.path), temporary.hostName)
            }.sorted { $0.name < $1.name }
        }
    }

    /// The host paths of the temporaries made to replace `grant`'s file.
    func hostPaths(replacing grant: GrantID) -> [String] {
        state.withLock { state in
            state.temporaries.compactMap { key, temporary in
                guard temporary.grant == grant else { return nil }
                return RelativePath.join(RelativePath.parent(of: key.path) ?? "", temporary.hostName)
            }
        }
    }

    /// Records a temporary; false once the app holds the most it may.
    func add(_ key: Key, _ temporary: Temporary) -> Bool {
        state.withLock { state in
            var ofApp = 0
            for other in state.temporaries.keys where other.app == key.app { ofApp += 1 }
            guard ofApp < Self.perApp else { return false }
            state.temporaries[key] = temporary
            state.byHostPath[Self.hostKey(key, temporary)] = key
            held.store(state.temporaries.count, ordering: .releasing)
            return true
        }
    }

    @discardableResult
    func remove(_ key: Key) -> Temporary? {
        state.withLock { state in
            guard let temporary = state.temporaries.removeValue(forKey: key) else { return nil }
            state.byHostPath[Self.hostKey(key, temporary)] = nil
            held.store(state.temporaries.count, ordering: .releasing)
            return temporary
        }
    }

    /// Forgets every temporary `ending` picks and returns their host
    /// files (provider, host path) for the caller to remove: those of an
    /// app whose last process exited, or made to replace a grant's file
    /// that lost its access. A save left that way is never finished, and
    /// its file would stay in the owner's folder for good.
    func removeAll(where ending: (Key, Temporary) -> Bool) -> [(provider: ProviderID, hostPath: String)] {
        state.withLock { state in
            var ended: [(ProviderID, String)] = []
            for (key, temporary) in state.temporaries where ending(key, temporary) {
                state.temporaries[key] = nil
                let host = Self.hostKey(key, temporary)
                state.byHostPath[host] = nil
                ended.append((key.provider, host.path))
            }
            held.store(state.temporaries.count, ordering: .releasing)
            return ended
        }
    }

    /// Whether some app's temporary has its host file at `hostPath`.
    func holds(provider: ProviderID, hostPath: String) -> Bool {
        state.withLock { state in state.byHostPath.keys.contains { $0.provider == provider && $0.path == hostPath } }
    }

    /// Whether `name` has the form `hostName(beside:)` gives, beside `granted`.
    static func isHostName(_ name: String, beside granted: String) -> Bool {
        SaveTemporaryNames.isTemporary(name, beside: granted, by: .mount)
    }

    /// Gives the temporary another name the app sees (its host file stays).
    func rename(_ key: Key, to path: String) {
        state.withLock { state in
            guard let temporary = state.temporaries.removeValue(forKey: key) else { return }
            var moved = key
            moved.path = path
            state.temporaries[moved] = temporary
            state.byHostPath[Self.hostKey(key, temporary)] = moved
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

    private static func hostKey(_ key: Key, _ temporary: Temporary) -> Key {
        var host = key
        host.path = RelativePath.join(RelativePath.parent(of: key.path) ?? "", temporary.hostName)
        return host
    }
}
