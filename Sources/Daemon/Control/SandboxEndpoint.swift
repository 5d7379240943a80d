import Foundation
import Glibc

/// Where the app endpoint is bound into sandboxes from. The daemon listens
/// for apps at `STATE/app.sock` and, for sandboxes, at a second path outside
/// the state directory: a bind mount shows its source path in the app's
/// /proc/self/mountinfo, and the state directory's path is the owner's
/// business (issue 28). The socket lives in the daemon's runtime folder:
/// /run/scopefs for root, `$XDG_RUNTIME_DIR` or a private /tmp folder for
/// other owners; it is named by the daemon's pid and goes with the daemon.
enum SandboxEndpoint {
    /// The path, after making its folder; nil when no folder could be made
    /// (the sandbox then binds `STATE/app.sock`).
    static func prepare() -> String? {
        let folder: String
        if getuid() == 0 {
            folder = "/run/scopefs"
        } else if let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], ownedFolder(runtime) {
            folder = runtime + "/scopefs"
        } else {
            folder = "/tmp/scopefs-\(getuid())"
        }
        // 0711: bubblewrap as the owner passes through to bind it; nobody
        // else can list it or open what is in it (the socket is 0600).
        if mkdir(folder, 0o711) != 0 && errno != EEXIST { return nil }
        guard ownedFolder(folder) else { return nil }
        sweepStale(in: folder)
        return folder + "/app-\(getpid()).sock"
    }

    /// Sockets of daemons that died without unlinking theirs (kill -9):
    /// one per crash would pile up in a folder that outlives them.
    private static func sweepStale(in folder: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] {
            guard name.hasPrefix("app-"), name.hasSuffix(".sock"),
                let pid = Int32(name.dropFirst(4).dropLast(5)), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH
            else { continue }
            unlink(folder + "/" + name)
        }
    }

    /// A real folder (not a link) of this user's: a folder someone else
    /// made in /tmp first is not used.
    private static func ownedFolder(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR && status.st_uid == getuid()
    }
}
