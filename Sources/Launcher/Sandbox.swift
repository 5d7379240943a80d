import CommandErrors
import Control
import Foundation
import Glibc
import Policy
import PolicyStore
import Processes

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
/// It is never host root: with a root owner it runs as the app account
/// (`AppAccount`), otherwise as the owner in a user namespace. It holds no
/// capabilities, runs with no_new_privs, in new pid, IPC, UTS and network
/// namespaces (and a user namespace for a non-root owner) (so it can neither see nor signal nor ptrace a
/// process outside), cannot make further user namespaces, and runs under
/// `SeccompFilter`. It keeps the run's cgroup (no cgroup namespace: the
/// path is harmless to show, and lets the CLI inside refuse changes).
/// docs/SECURITY.md lists the allow-list for people.
public struct Sandbox: Sendable {
    /// System directories, read-only. On merged-/usr systems /bin, /lib and
    /// friends are symlinks into /usr and are recreated as such.
    package static let systemDirectories = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]

    /// The files of /etc that programs need to start, resolve names and
    /// users, find libraries, certificates and time zones. Not /etc/shadow,
    /// not /etc/ssl/private, not the machine's configuration at large.
    package static let etcAllowList = [
        "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf",
        "/etc/localtime", "/etc/timezone", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
        "/etc/alternatives", "/etc/ssl/certs", "/etc/ca-certificates", "/etc/mime.types", "/etc/locale.alias",
        "/etc/os-release", "/etc/terminfo", "/etc/inputrc",
    ]

    /// Environment variables passed in from the owner's; everything else is
    /// dropped (tokens and agent sockets live in the environment too).
    package static let passedEnvironment = ["TERM", "COLORTERM", "NO_COLOR", "LANG", "LANGUAGE", "TZ"]

    /// Where the app endpoint appears: `SCOPEFS_STATE` points here, so the
    /// client libraries find "STATE/control.sock" unchanged.
    public static let stateInside = "/run/scopefs/state"
    /// This very `scopefs` appears here (first on PATH), so the app can run
    /// `scopefs scope exec` and `scopefs bookmark` inside.
    package static let binaryInside = "/run/scopefs/bin"

    package var app: String
    package var mountpoint: String
    package var state: StateDirectory
    /// What the developer added: the host's network (`--share-net`), more
    /// host paths (`--expose`), variables (`--env`), the working folder.
    package var shape: SandboxShape
    /// With a root launcher: the account the app becomes (`AppAccount`).
    /// Otherwise the app keeps the launcher's uid in a user namespace.
    package var runAs: AppAccount?
    /// The app endpoint's socket on the host (`SandboxEndpoint`).
    package var appEndpoint: String?
    /// The run path of the app's program, when it is an ELF file outside
    /// the system directories (`ElfRunPath`), found with the command.
    package var commandLibraryFolders: [String] = []
    /// `--portal-bus`: the bus proxy's socket on the host, and the mount
    /// point of `scopefs portal`'s document layout (when one is mounted).
    package var portalBusSocket: String?
    package var documentMount: String?

    package var appDirectory: String { mountpoint + "/" + app }
    /// `/.flatpak-info` of the app's sandbox: Flatpak's keyfile, with the
    /// one key portals read to attribute a request (the app id; ids are
    /// letters, digits, `.`, `-`, `_`, so nothing can be injected).
    package var appInfo: String { "[Application]\nname=\(app)\n" }
    /// Where the command starts: `--cwd`, else the app's container.
    package var workingDirectory: String { shape.workingDirectory ?? appDirectory + "/" + MountLayout.container }

    /// bubblewrap, from PATH or Debian's place.
    package static func bubblewrap() throws(CommandError) -> String {
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

    /// The sandbox's options for bubblewrap, which reads them from a
    /// descriptor (`--args`) so that its command line, the sandbox's
    /// /proc/1/cmdline, shows no host path. `seccompDescriptor` holds the
    /// filter, `binaryDescriptor` this very `scopefs` when it is copied in,
    /// `appInfoDescriptor` the text of `/.flatpak-info` (`appInfo`).
    package func options(
        seccompDescriptor: Int32, binaryDescriptor: Int32?, appInfoDescriptor: Int32? = nil,
        environment: [String: String]
    ) -> [String] {
        var arguments = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
        if runAs != nil {
            // bubblewrap runs as root to build the sandbox (it reaches the
            // mount and the state directory wherever they are) but makes no
            // user namespace: one made by root maps the app to host root
            // (issue 28). The app keeps only the capabilities to become the
            // app account (`setpriv`, `commandPrefix`), which it loses by
            // doing so. Further namespaces are refused by the seccomp filter.
            arguments += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        } else {
            arguments += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
        }
        arguments += ["--hostname", "scopefs"]
        if !shape.shareNetwork { arguments.append("--unshare-net") }
        for directory in Self.systemDirectories {
            if let target = symbolicLink(directory) {
                arguments += ["--symlink", target, directory]
            } else {
                arguments += ["--ro-bind-try", directory, directory]
            }
        }
        var passable = PassableFolders()
        func folders(above path: String) -> [String] { passable.arguments(above: path) }
        for path in Self.etcAllowList where access(path, F_OK) == 0 {
            arguments += folders(above: path) + ["--ro-bind", path, path]
        }
        // Before anything that may live below /tmp (an exposed path, the
        // mount itself): bubblewrap mounts in order, and a later tmpfs would
        // hide what was bound there.
        arguments += ["--proc", "/proc"]
        // The kernel's knobs, as Flatpak's sandbox leaves them: read-only
        // (bubblewrap covers some of them only when it finds them writable).
        for knob in Self.kernelKnobs { arguments += ["--ro-bind-try", knob, knob] }
        arguments += ["--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
        for exposure in shape.exposed {
            arguments += folders(above: exposure.path)
            arguments += [exposure.writable ? "--bind" : "--ro-bind", exposure.path, exposure.path]
        }
        arguments += folders(above: Self.stateInside + "/control.sock") + folders(above: Self.binaryInside + "/scopefs")
        // scopefs itself: a system binary at its own path; any other (a
        // build in a checkout) copied in, so its host path does not show.
        if let binaryDescriptor {
            arguments += ["--perms", "0755", "--ro-bind-data", "\(binaryDescriptor)", Self.binaryInside + "/scopefs"]
        } else if let executable = Self.executable {
            arguments += ["--symlink", executable, Self.binaryInside + "/scopefs"]
        }
        // `/.flatpak-info` naming the app, read-only, where Flatpak's sandbox
        // has it: xdg-desktop-portal reads /proc/PID/root/.flatpak-info to
        // tell which app a portal request comes from (docs/PORTAL.md).
        if let appInfoDescriptor {
            arguments += ["--perms", "0444", "--ro-bind-data", "\(appInfoDescriptor)", "/.flatpak-info"]
        }
        // The folders of the shared libraries it loaded from outside the
        // system directories (Swift's runtime): read-only.
        for folder in Self.libraryFoldersOutsideSystem {
            arguments += folders(above: folder) + ["--ro-bind", folder, folder]
        }
        // And those the app's program asks the loader for (its run path):
        // a Swift app's runtime under /opt, whatever build of scopefs runs.
        for folder in commandLibraryFolders where !passable.made(folder) && !shows(folder) {
            arguments += folders(above: folder) + ["--ro-bind", folder, folder]
        }
        // The app's own view of the mount, at the same path as outside.
        arguments += folders(above: appDirectory) + ["--bind", appDirectory, appDirectory]
        arguments += ["--bind", appEndpoint ?? state.appSocketPath, Self.stateInside + "/control.sock"]
        // The filtered bus, and at the document mount point the app's own
        // folder of the layout, as Flatpak's sandbox shows
        // /run/user/UID/doc: the paths the portal frontend hands the app.
        if let socket = portalBusSocket {
            arguments += folders(above: PortalBusProxy.socketInside) + ["--bind", socket, PortalBusProxy.socketInside]
        }
        if let documents = documentMount {
            arguments += folders(above: documents) + ["--bind", documents + "/by-app/" + app, documents]
        }
        arguments += ["--chdir", workingDirectory, "--clearenv"]
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) { arguments += ["--setenv", name, value] }
        arguments += ["--seccomp", "\(seccompDescriptor)"]
        return arguments
    }

    /// What runs before the app's command inside: with a root launcher,
    /// `setpriv` becomes the app account for good (no groups, no
    /// capabilities left) and execs the command.
    package var commandPrefix: [String] {
        guard let runAs else { return [] }
        return [
            "/usr/bin/setpriv", "--reuid=\(runAs.uid)", "--regid=\(runAs.gid)", "--clear-groups", "--inh-caps=-all",
            "--",
        ]
    }

    /// /proc entries that change the kernel rather than describe a process.
    package static let kernelKnobs = ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"]

    /// This process's executable.
    package static var executable: String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    }

    /// Whether `scopefs` must be copied into the sandbox: it lives outside
    /// the system directories the sandbox shows.
    package static var binaryNeedsCopy: Bool {
        guard let executable else { return false }
        return !systemDirectories.contains(where: { executable.hasPrefix($0 + "/") })
    }

    /// The environment inside: a short allow-list of the owner's, and the
    /// app's own variables.
    package func environment(from owner: [String: String]) -> [String: String] {
        var environment = owner.filter { Self.passedEnvironment.contains($0.key) || $0.key.hasPrefix("LC_") }
        environment["PATH"] = Self.binaryInside + ":/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
        environment["HOME"] = appDirectory + "/" + MountLayout.container
        environment["TMPDIR"] = "/tmp"
        environment["SCOPEFS_APP"] = app
        environment["SCOPEFS_MOUNT"] = appDirectory
        environment["SCOPEFS_STATE"] = Self.stateInside
        environment["SCOPEFS_VIEW"] = "sandbox"
        // The developer's own (`--env`) last: a venv's PATH, PYTHONPATH.
        environment.merge(shape.environment) { _, added in added }
        return environment
    }

    /// Folders of the shared objects this process mapped (from
    /// /proc/self/maps) that the system directories do not already show.
    /// Read once: the sandbox's options and every `shows` ask for them.
    package static let libraryFoldersOutsideSystem: [String] = readLibraryFoldersOutsideSystem()

    private static func readLibraryFoldersOutsideSystem() -> [String] {
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
