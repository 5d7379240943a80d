import FuseBridge
import Glibc
import HostText
import Policy
import Synchronization
import SystemPackage

/// The last check of a backed folder's host location (SPEC S33 amended: "A
/// folder moved out of a grant on the host stops being reachable through
/// descriptors and working directories held on it within 1 s").
///
/// A folder node keeps an O_PATH descriptor, which follows the folder
/// wherever the owner moves it on the host; the node's path in the table
/// (by which coverage is decided) does not. So a folder's real location —
/// `/proc/self/fd/N` of its descriptor, one `readlink` — is compared with
/// the provider's directory plus its path, when the last comparison is
/// older than `LocationCheck.maximumAge`. Files are checked through their
/// folder: the link names the folder's whole path, so a move of any
/// ancestor shows in every folder below it.
///
/// Why on use and not on notification: inotify reports a move to watches
/// on the moved folder and its old parent only, so every ancestor of every
/// held folder, up to `/`, would need a watch to see a move of an ancestor
/// (the second half of the finding); fanotify's FAN_RENAME on a whole file
/// system (the daemon is root) sees them all, but then every rename on the
/// host's file system wakes the daemon and must be mapped back to nodes
/// by file handle, and file systems without file handles (FUSE, some
/// network ones) report nothing. A check on use costs one readlink per
/// folder in use per second, nothing for folders nobody uses, and sees
/// every move, of any ancestor, on any file system.
struct LocationCheck: Sendable {
    /// `CLOCK_MONOTONIC_COARSE` in milliseconds when the check started;
    /// 0: never checked.
    var checkedAt: UInt64 = 0
    /// The node table's tree epoch at the check: a folder renamed or seen
    /// under another name since (the epoch moved) has another path to
    /// compare with, so the check is made again at once.
    var epoch: UInt64 = 0
    /// The folder is not where its path says, and where it is now is not
    /// covered as its path is: every operation on it, or on files in it,
    /// answers ENOENT.
    var displaced = false

    /// Under a second, with room for the coarse clock's tick (a few ms):
    /// an operation at least 1 s after a move always sees a check made
    /// after the move.
    static let maximumAge: UInt64 = 900

    /// The coarse monotonic clock, read from the vDSO (no system call).
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return UInt64(time.tv_sec) &* 1000 &+ UInt64(time.tv_nsec) / 1_000_000
    }
}

/// Providers' directories as the kernel names them (symbolic links
/// resolved), for comparison with `/proc/self/fd` links. Read once per
/// configured directory, only when a folder's location is checked.
final class CanonicalDirectories: Sendable {
    private let known = Mutex<[String: String]>([:])

    func canonical(_ directory: String) -> String? {
        if let found = known.withLock({ $0[directory] }) { return found }
        guard let resolved = realpath(directory, nil) else { return nil }
        defer { free(resolved) }
        let path = HostName.string(cString: resolved)
        known.withLock { $0[directory] = path }
        return path
    }
}

extension ScopeFileSystem {
    /// Refuses an operation on a provider node whose folder was moved on the
    /// host to a place its path's coverage does not extend to: ENOENT, as
    /// if it were gone. Costs a coarse clock read per operation; a
    /// `readlink` when the folder's last check is older than `maximumAge`.
    func checkHostLocation(_ resolved: NodeTable.Resolved, app: AppID, provider: ProviderID) throws(Errno) {
        var check = resolved.location
        let now = LocationCheck.now()
        if now &- check.checkedAt >= LocationCheck.maximumAge || check.epoch != resolved.epoch,
            let folder = resolved.folder
        {
            check = LocationCheck(
                checkedAt: now, epoch: resolved.epoch,
                displaced: isDisplaced(folder, resolved: resolved, app: app, provider: provider))
            table.storeLocation(folder.inode, check)
        }
        if check.displaced { throw .noSuchFileOrDirectory }
    }

    /// Whether `folder` (the node or its parent) is no longer where its path
    /// says and its real place is not covered as its path is. A folder
    /// renamed on the host within the same coverage (inside one granted
    /// folder) stays usable under its old name, as it did before.
    private func isDisplaced(_ folder: Node, resolved: NodeTable.Resolved, app: AppID, provider: ProviderID) -> Bool {
        // A folder that cannot be opened again by its name from its parent
        // (`folderDescriptor(of:)`) is gone from where its path says.
        guard let descriptor = try? folderDescriptor(of: folder),
            let directory = withPolicy({ $0.providers[provider]?.directory }),
            let root = canonicalDirectories.canonical(directory),
            let real = withExtendedLifetime(descriptor, { try? Sys.location(of: descriptor.number) })
        else { return true }
        // A path the table cannot build (a cycle: an internal error, logged
        // where it is found) places the folder nowhere.
        guard let path = try? (folder === resolved.node ? resolved.path : table.path(of: folder.inode)) else {
            return true
        }
        let expected = path.isEmpty ? root : root + "/" + path
        // Compared by bytes (SPEC S33a): two canonically equivalent names
        // are two folders.
        if real.sameHostName(as: expected) { return false }
        // Outside the provider, or deleted (the link then ends in " (deleted)").
        guard real.hasHostPrefix(root + "/") else { return true }
        let moved = String(Substring(real.utf8.dropFirst(root.utf8.count + 1)))
        return withPolicy {
            $0.position(app: app, provider: provider, path: moved).coverage
                != $0.position(app: app, provider: provider, path: path).coverage
        }
    }
}

/// What each provider's directory was at the last sweep: its identity,
/// or nil where it could not be reached.
final class ProviderDirectories: Sendable {
    let known = Mutex<[ProviderID: FileIdentity?]>([:])
}

extension ScopeFileSystem {
    /// Records where the providers' directories are, before the mount
    /// serves its first request: a move after this, however soon, is seen
    /// by the sweeps (a baseline taken by the first sweep missed a move
    /// made before it).
    public func recordProviderDirectories() {
        _ = invalidationForMovedProviderDirectories()
    }

    /// Sweeps the providers' own directories (one stat each): those moved,
    /// removed or replaced on the host since the last sweep are reported by
    /// no folder watch, since no view holds their parents, yet every item
    /// under them has left its grants (SPEC S33 amended). What the kernel
    /// may keep of those providers — entries, attributes, kept listings —
    /// must go, and every folder's next use must check its location again
    /// (the tree epoch), or a descriptor held inside would go on reaching
    /// cached answers for the whole cache timeout. Called by the host-change
    /// channel's thread a few times a second; the first
    /// (`recordProviderDirectories`) only records.
    public func invalidationForMovedProviderDirectories() -> CacheInvalidation {
        let directories = withPolicy { policy in policy.providers.mapValues(\.directory) }
        var moved: Set<ProviderID> = []
        for (provider, directory) in directories {
            // Followed if a symbolic link, as the provider's directory is.
            var info = stat()
            let now = fstatat(AT_FDCWD, directory, &info, 0) == 0 ? FileIdentity(info) : nil
            let before = providerDirectories.known.withLock { known in
                defer { known[provider] = .some(now) }
                return known[provider]
            }
            if case .some(let before) = before, before != now { moved.insert(provider) }
        }
        guard !moved.isEmpty else { return CacheInvalidation() }
        var invalidation = CacheInvalidation()
        for node in table.providerNodesMoved(moved) {
            invalidation.inodes.append(node.inode)
            invalidation.entries.append((node.parent, node.name))
        }
        return invalidation
    }
}
