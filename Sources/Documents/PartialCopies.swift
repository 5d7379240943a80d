import Foundation
import Glibc
import HostText
import Policy
import PolicyStore

/// Where a copy that cannot be anonymous (a folder, or a file system without
/// O_TMPFILE) is staged, and the sweep that removes what a killed copy left
/// (SPEC S34: nothing lost, nothing left behind; issue 15 finding 6, issue 29
/// finding 5).
///
/// A staged copy is renamed into place at the end, so it must be built on
/// the destination's file system (and mount), and where no one looks:
/// 1. `<state>/partial-copies/<token>`, when the state directory is on the
///    destination's file system — no app can see it;
/// 2. otherwise `<top>/.scopefs-partial-copies-<uid>/<token>/<name>`, where
///    `<top>` is the highest folder on the destination's file system that
///    this user can write (the disk's root for a USB stick, as the
///    freedesktop trash puts `.Trash-<uid>` there): outside the provider
///    folder as a rule, and a name the mount never shows should a grant
///    cover it (`StagingNames`). The per-copy `<token>` folder keeps the
///    staging folder in use while the copy runs; both are removed after;
/// 3. the same staging folder inside the destination folder itself, when
///    renaming from (2) fails with EXDEV (a bind mount).
///
/// A journal `<state>/partial-copies/<pid>-<token>.journal` names the staged
/// path before it exists, so that `sweep()` — run when any command opens the
/// state, and by the daemon at start and every 10 s (`DaemonTunables`) — removes the
/// leftovers of a process that no longer runs.
public struct PartialCopies: Sendable {
    /// nil: no state directory; staged copies go beside their destination,
    /// unjournaled (a library caller without a state).
    public let folder: String?

    public init(state: StateDirectory) {
        folder = state.path + "/partial-copies"
    }

    init(stagingBesideDestinations: ()) {
        folder = nil
    }

    /// A staged copy: where to build it, its journal entry, and the
    /// per-copy folder (place 2 and 3) to remove once it is done.
    struct Staged {
        let path: String
        let journal: String?
        var container: String? = nil
        /// Whether a later `attempt` stages somewhere else.
        var hasFallback = false
    }

    static let hiddenMarker = StagingNames.marker
    /// The staging folder's name on another file system, per user.
    static var stagingFolderName: String { "\(hiddenMarker)copies-\(geteuid())" }

    /// A staging path for a copy that will be renamed to `destination`.
    /// `attempt` 1, 2: a later place, after renaming from an earlier one
    /// failed with EXDEV.
    func stage(for destination: String, attempt: Int = 0) -> Staged {
        let destinationFolder = RelativePath.parent(of: destination) ?? destination
        let name = RelativePath.lastComponent(of: destination)
        guard let folder, mkdir(folder, 0o700) == 0 || errno == EEXIST else {
            return Staged(
                path: destinationFolder + "/.\(name)\(Self.hiddenMarker)\(getpid())", journal: nil)
        }
        let token = "\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let journal = folder + "/" + token + ".journal"
        let lasting = Self.lasting(destinationFolder)
        var places: [String?] = []
        if Self.sameFileSystem(folder, destinationFolder) { places.append(nil) }
        if let top = Self.highestWritable(onFileSystemOf: lasting), top != lasting { places.append(top) }
        places.append(destinationFolder)
        for index in min(attempt, places.count - 1)..<places.count {
            let fallback = index < places.count - 1
            guard let top = places[index] else {
                let path = folder + "/" + token
                let written = FileManager.default.createFile(atPath: journal, contents: Data(Self.lasting(path).utf8))
                return Staged(path: path, journal: written ? journal : nil, hasFallback: fallback)
            }
            let staging = top + "/" + Self.stagingFolderName
            let container = staging + "/" + token
            let written = FileManager.default.createFile(
                atPath: journal, contents: Data(Self.lasting(container).utf8))
            // Another copy finishing may remove the staging folder between
            // the two mkdirs: make it again.
            var made = false
            for _ in 0..<10 where !made && Self.ownFolder(staging) {
                made = container.withHostCString { mkdir($0, 0o700) } == 0
                if !made && errno != ENOENT { break }
            }
            if made || !fallback {
                return Staged(
                    path: container + "/" + name, journal: written ? journal : nil, container: container,
                    hasFallback: fallback)
            }
            if written { unlink(journal) }  // not ours, or not writable after all: the next place
        }
        fatalError("unreachable: the last place returns")
    }

    /// Makes (or finds) `path` as a folder of this user's, mode 0700, not a link.
    private static func ownFolder(_ path: String) -> Bool {
        _ = path.withHostCString { mkdir($0, 0o700) }
        guard let info = HostFiles.status(path) else { return false }
        return (info.st_mode & S_IFMT) == S_IFDIR && info.st_uid == geteuid()
    }

    /// The highest folder above and including `folder` on its file system
    /// that this user can write and search, or nil.
    static func highestWritable(onFileSystemOf folder: String) -> String? {
        var info = stat()
        guard folder.hasHostPrefix("/"), folder.withHostCString({ stat($0, &info) }) == 0 else { return nil }
        let device = info.st_dev
        var best: String?
        var current = folder
        while true {
            var here = stat()
            guard current.withHostCString({ stat($0, &here) }) == 0, here.st_dev == device else { break }
            if current.withHostCString({ access($0, W_OK | X_OK) }) == 0 { best = current }
            guard current != "/", let parent = RelativePath.parent(of: current) else { break }
            current = parent.isEmpty ? "/" : parent
        }
        return best.map { $0 == "/" ? "" : $0 }
    }

    /// The path a later process can find: a folder held open by this one
    /// (`/proc/self/fd/N/...`, see `PinnedFolder`) is named by where it is.
    static func lasting(_ path: String) -> String {
        let prefix = "/proc/self/fd/"
        guard path.hasHostPrefix(prefix) else { return path }
        let rest = String(path.utf8.dropFirst(prefix.utf8.count))!
        guard let folder = HostFiles.symbolicLinkTarget(prefix + rest.prefix { $0 != "/" }) else { return path }
        guard let slash = rest.firstIndex(of: "/") else { return folder }
        let tail = String(rest[slash...])
        return tail == "/" ? folder : folder + tail
    }

    /// Forgets a staged copy that was renamed into place or removed, and
    /// removes its per-copy folder and, once empty, the staging folder.
    func finish(_ staged: Staged) {
        if let container = staged.container {
            HostFiles.removeTree(container)
            if let staging = RelativePath.parent(of: container) { staging.withHostCString { _ = rmdir($0) } }
        }
        if let journal = staged.journal { unlink(journal) }
    }

    /// Removes staged copies (and their journals) whose process is gone.
    /// Costs one readdir of a folder that is normally empty.
    public func sweep() {
        guard let folder, let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        for name in names {
            guard let pid = pid_t(name.prefix { $0 != "-" }), pid > 0, !Self.isRunning(pid) else { continue }
            let path = folder + "/" + name
            if name.hasSuffix(".journal") {
                // Only a path this code names: a staging-folder entry, a
                // copy's folder in a staging folder elsewhere, or a hidden partial.
                if let data = FileManager.default.contents(atPath: path),
                    let staged = String(data: data, encoding: .utf8)
                {
                    let parent = RelativePath.parent(of: staged) ?? ""
                    if staged.hasPrefix(folder + "/")
                        || RelativePath.lastComponent(of: staged).contains(Self.hiddenMarker)
                    {
                        HostFiles.removeTree(staged)
                    } else if RelativePath.lastComponent(of: parent) == Self.stagingFolderName,
                        RelativePath.lastComponent(of: staged).hasPrefix("\(pid)-")
                    {
                        HostFiles.removeTree(staged)
                        parent.withHostCString { _ = rmdir($0) }
                    }
                }
                unlink(path)
            } else {
                HostFiles.removeTree(path)
            }
        }
    }

    private static func isRunning(_ pid: pid_t) -> Bool {
        kill(pid, 0) == 0 || errno == EPERM
    }

    private static func sameFileSystem(_ first: String, _ second: String) -> Bool {
        var a = stat()
        var b = stat()
        return first.withHostCString({ stat($0, &a) }) == 0 && second.withHostCString({ stat($0, &b) }) == 0
            && a.st_dev == b.st_dev
    }
}
