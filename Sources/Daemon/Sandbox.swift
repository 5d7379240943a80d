import CommandErrors
import Foundation
import Glibc
import Policy
import PolicyStore

/// The confinement of `scopefs run` (SPEC S5), built on bubblewrap, the
/// sandbox Flatpak runs its apps in, rather than on namespace code of our
/// own. What the app sees is an allow-list: its own view of the mount (at
/// the same path as outside, so paths and reference documents read the
/// same), the system's programs and libraries read-only, the few files of
/// /etc that libc needs, a private /tmp, /proc of its own pid namespace, a
/// minimal /dev, and the app endpoint of the control socket. Nothing else of
/// the host exists in it: not the state directory, not the providers'
/// backing folders, not other containers, not the owner's home.
///
/// It holds no capabilities, runs with no_new_privs, in new user, pid, IPC,
/// UTS and network namespaces (so it can neither see nor signal nor ptrace a
/// process outside), cannot make further user namespaces, and runs under
/// `SeccompFilter`. It keeps the run's cgroup (no cgroup namespace: the
/// path is harmless to show, and lets the CLI inside refuse changes).
/// docs/SECURITY.md lists the allow-list for people.
public struct Sandbox: Sendable {
    /// System directories, read-only. On merged-/usr systems /bin, /lib and
    /// friends are symlinks into /usr and are recreated as such.
    static let systemDirectories = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]

    /// The files of /etc that programs need to start, resolve names and
    /// users, find libraries, certificates and time zones. Not /etc/shadow,
    /// not /etc/ssl/private, not the machine's configuration at large.
    static let etcAllowList = [
        "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf",
        "/etc/localtime", "/etc/timezone", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
        "/etc/alternatives", "/etc/ssl/certs", "/etc/ca-certificates", "/etc/mime.types", "/etc/locale.alias",
        "/etc/os-release", "/etc/terminfo", "/etc/inputrc",
    ]

    /// Environment variables passed in from the owner's; everything else is
    /// dropped (tokens and agent sockets live in the environment too).
    static let passedEnvironment = ["TERM", "COLORTERM", "NO_COLOR", "LANG", "LANGUAGE", "TZ"]

    /// Where the app endpoint appears: `SCOPEFS_STATE` points here, so the
    /// client libraries find "STATE/control.sock" unchanged.
    public static let stateInside = "/run/scopefs/state"
    /// This very `scopefs` appears here (first on PATH), so the app can run
    /// `scopefs scope exec` and `scopefs bookmark` inside.
    static let binaryInside = "/run/scopefs/bin"

    var app: String
    var mountpoint: String
    var state: StateDirectory
    /// Keep the host's network namespace (loopback and abstract sockets of
    /// the host included).
    var shareNetwork: Bool
    /// More host paths, read-only, at the same place (`--expose`).
    var exposed: [String]

    var appDirectory: String { mountpoint + "/" + app }

    /// bubblewrap, from PATH or Debian's place.
    static func bubblewrap() throws(CommandError) -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let candidates = path.split(separator: ":").map { "\($0)/bwrap" } + ["/usr/bin/bwrap"]
        guard let found = candidates.first(where: { access($0, X_OK) == 0 }) else {
            throw CommandError(
                .badState,
                "the sandbox needs bubblewrap (bwrap), which is not installed: `apt-get install bubblewrap`; "
                    + "or run with --no-sandbox, which is no security boundary")
        }
        return found
    }

    /// bubblewrap's arguments, up to and including "--"; the app's command
    /// follows. `seccompDescriptor` is the read end holding the filter.
    func arguments(seccompDescriptor: Int32, environment: [String: String]) -> [String] {
        var arguments = [
            "--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--die-with-parent", "--cap-drop", "ALL", "--hostname", "scopefs",
        ]
        if !shareNetwork { arguments.append("--unshare-net") }
        for directory in Self.systemDirectories {
            if let target = symbolicLink(directory) {
                arguments += ["--symlink", target, directory]
            } else {
                arguments += ["--ro-bind-try", directory, directory]
            }
        }
        for path in Self.etcAllowList { arguments += ["--ro-bind-try", path, path] }
        // Before anything that may live below /tmp (an exposed path, the
        // mount itself): bubblewrap mounts in order, and a later tmpfs would
        // hide what was bound there.
        arguments += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for path in exposed { arguments += ["--ro-bind", path, path] }
        // scopefs itself, and the folders of the shared libraries it loaded
        // from outside the system directories (Swift's runtime): read-only.
        if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            arguments += ["--ro-bind", executable, Self.binaryInside + "/scopefs"]
        }
        for folder in Self.libraryFoldersOutsideSystem() { arguments += ["--ro-bind", folder, folder] }
        // The app's own view of the mount, at the same path as outside.
        arguments += ["--bind", appDirectory, appDirectory]
        arguments += ["--bind", state.appSocketPath, Self.stateInside + "/control.sock"]
        arguments += ["--chdir", appDirectory + "/" + MountLayout.container, "--clearenv"]
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) { arguments += ["--setenv", name, value] }
        arguments += ["--seccomp", "\(seccompDescriptor)", "--"]
        return arguments
    }

    /// The environment inside: a short allow-list of the owner's, and the
    /// app's own variables.
    func environment(from owner: [String: String]) -> [String: String] {
        var environment = owner.filter { Self.passedEnvironment.contains($0.key) || $0.key.hasPrefix("LC_") }
        environment["PATH"] = Self.binaryInside + ":/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
        environment["HOME"] = appDirectory + "/" + MountLayout.container
        environment["TMPDIR"] = "/tmp"
        environment["SCOPEFS_APP"] = app
        environment["SCOPEFS_MOUNT"] = appDirectory
        environment["SCOPEFS_STATE"] = Self.stateInside
        environment["SCOPEFS_VIEW"] = "sandbox"
        return environment
    }

    /// Folders of the shared objects this process mapped (from
    /// /proc/self/maps) that the system directories do not already show.
    static func libraryFoldersOutsideSystem() -> [String] {
        guard let maps = ProcFS.readText("/proc/self/maps") else { return [] }
        var folders = Set<String>()
        for line in maps.split(separator: "\n") {
            guard let slash = line.firstIndex(of: "/") else { continue }
            let path = line[slash...]
            guard path.contains(".so"), !systemDirectories.contains(where: { path.hasPrefix($0 + "/") }) else {
                continue
            }
            folders.insert(String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]))
        }
        return folders.sorted()
    }

    private func symbolicLink(_ path: String) -> String? {
        var status = stat()
        guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFLNK else { return nil }
        return try? FileManager.default.destinationOfSymbolicLink(atPath: path)
    }
}
