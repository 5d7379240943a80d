import Foundation
import Glibc
import Policy
import PolicyStore

/// Where a copy that cannot be anonymous (a folder, or a file system without
/// O_TMPFILE) is staged, and the sweep that removes what a killed copy left
/// (SPEC S34: nothing lost, nothing left behind; issue 15 finding 6).
///
/// The staging folder is `<state>/partial-copies/`, which no app can see.
/// A copy is staged there when it is on the destination's file system (the
/// rename into place must not cross file systems); otherwise it is staged
/// beside the destination under a hidden name, as before. Either way a
/// journal `<pid>-<token>.journal` names the staged path before it exists,
/// so that `sweep()` — run when any command opens the state — can remove
/// the leftovers of a process that no longer runs.
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

    /// A staged copy: where to build it, and its journal entry.
    struct Staged {
        let path: String
        let journal: String?
    }

    static let hiddenMarker = ".scopefs-partial-"

    /// A staging path for a copy that will be renamed to `destination`.
    /// `beside` forces the hidden name next to the destination (after a
    /// rename from the staging folder failed with EXDEV).
    func stage(for destination: String, beside: Bool = false) -> Staged {
        let destinationFolder = RelativePath.parent(of: destination) ?? destination
        let token = "\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let hidden =
            destinationFolder + "/.\(RelativePath.lastComponent(of: destination))\(Self.hiddenMarker)\(getpid())"
        guard let folder, mkdir(folder, 0o700) == 0 || errno == EEXIST else {
            return Staged(path: hidden, journal: nil)
        }
        let journal = folder + "/" + token + ".journal"
        let path = !beside && Self.sameFileSystem(folder, destinationFolder) ? folder + "/" + token : hidden
        guard FileManager.default.createFile(atPath: journal, contents: Data(Self.lasting(path).utf8)) else {
            return Staged(path: path, journal: nil)
        }
        return Staged(path: path, journal: journal)
    }

    /// The path a later process can find: a folder held open by this one
    /// (`/proc/self/fd/N/...`, see `PinnedFolder`) is named by where it is.
    static func lasting(_ path: String) -> String {
        let prefix = "/proc/self/fd/"
        guard path.hasHostPrefix(prefix) else { return path }
        let rest = String(path.utf8.dropFirst(prefix.utf8.count))!
        guard let slash = rest.firstIndex(of: "/"),
            let folder = HostFiles.symbolicLinkTarget(prefix + rest[..<slash])
        else { return path }
        return folder + String(rest[slash...])
    }

    /// Forgets a staged copy that was renamed into place or removed.
    func finish(_ staged: Staged) {
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
                // Only a path this code names: a staging-folder entry or a hidden partial.
                if let data = FileManager.default.contents(atPath: path),
                    let staged = String(data: data, encoding: .utf8),
                    staged.hasPrefix(folder + "/") || (staged as NSString).lastPathComponent.contains(Self.hiddenMarker)
                {
                    HostFiles.removeTree(staged)
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
