import CommandErrors
import Control
import Foundation
import Glibc
import Policy
import PolicyStore
import Processes
import SandboxProfile

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
/// Its hardening is the one `SandboxProfile` every sandbox has: never host
/// root (with a root owner it runs as the app account, `AppAccount`,
/// otherwise as the owner in a user namespace), no capabilities, the
/// kernel's knobs read-only, a private /dev/shm and /tmp, `SeccompFilter`.
/// What is the app's own: no network unless `--share-net`, the owner's
/// terminal, and the run's cgroup (no cgroup namespace: the path is
/// harmless to show, and lets the CLI inside refuse changes).
/// docs/SECURITY.md lists the allow-list for people.
public struct Sandbox: Sendable {
    package static let systemDirectories = SandboxProfile.systemDirectories
    package static let etcAllowList = SandboxProfile.etcAllowList

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
        guard
            let found = SandboxProfile.bubblewrap(path: ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        else {
            throw CommandError(
                .badState,
                "the sandbox needs bubblewrap (bwrap), which is not installed: `apt-get install bubblewrap`; "
                    + "or run with --no-sandbox, which is no security boundary")
        }
        return found
    }

    /// The app's sandbox: the one profile, with what only an app has.
    /// `binaryDescriptor` holds this very `scopefs` when it is copied in,
    /// `appInfoDescriptor` the text of `/.flatpak-info` (`appInfo`).
    package func profile(binaryDescriptor: Int32?, appInfoDescriptor: Int32?, environment: [String: String])
        -> SandboxProfile
    {
        var mounts: [SandboxProfile.Mount] = []
        for path in Self.etcAllowList where access(path, F_OK) == 0 { mounts.append(.bind(path, writable: false)) }
        for exposure in shape.exposed { mounts.append(.bind(exposure.path, writable: exposure.writable)) }
        // scopefs itself: a system binary at its own path; any other (a
        // build in a checkout) copied in, so its host path does not show.
        if let binaryDescriptor {
            mounts.append(.data(descriptor: binaryDescriptor, at: Self.binaryInside + "/scopefs", mode: "0755"))
        } else if let executable = Self.executable {
            mounts.append(.symlink(target: executable, at: Self.binaryInside + "/scopefs"))
        }
        // `/.flatpak-info` naming the app, read-only, where Flatpak's sandbox
        // has it: xdg-desktop-portal reads /proc/PID/root/.flatpak-info to
        // tell which app a portal request comes from (docs/PORTAL.md).
        if let appInfoDescriptor {
            mounts.append(.data(descriptor: appInfoDescriptor, at: "/.flatpak-info", mode: "0444"))
        }
        // The folders of the shared libraries it loaded from outside the
        // system directories (Swift's runtime): read-only.
        for folder in Self.libraryFoldersOutsideSystem { mounts.append(.bind(folder, writable: false)) }
        // And those the app's program asks the loader for (its run path):
        // a Swift app's runtime under /opt, whatever build of scopefs runs.
        // Not a folder above an earlier mount, which it would hide.
        for folder in commandLibraryFolders where !shows(folder) {
            guard !mounts.contains(where: { $0.destination.hasPrefix(folder + "/") }) else { continue }
            mounts.append(.bind(folder, writable: false))
        }
        // The app's own view of the mount, at the same path as outside.
        mounts.append(.bind(appDirectory, writable: true))
        mounts.append(.bind(appEndpoint ?? state.appSocketPath, at: Self.stateInside + "/control.sock", writable: true))
        // The filtered bus, and at the document mount point the app's own
        // folder of the layout, as Flatpak's sandbox shows
        // /run/user/UID/doc: the paths the portal frontend hands the app.
        if let socket = portalBusSocket {
            mounts.append(.bind(socket, at: PortalBusProxy.socketInside, writable: true))
        }
        if let documents = documentMount {
            mounts.append(.bind(documents + "/by-app/" + app, at: documents, writable: true))
        }
        return SandboxProfile(
            kind: .app, identity: identity, shareNetwork: shape.shareNetwork, hostname: "scopefs", mounts: mounts,
            workingDirectory: workingDirectory, environment: environment, launcherSignals: SignalForwarder.signals)
    }

    /// Who the app runs as: the account a root launcher hands it to, or
    /// the owner in a user namespace.
    package var identity: SandboxProfile.Identity {
        guard let runAs else { return .ownerInUserNamespace }
        return .account(uid: runAs.uid, gid: runAs.gid)
    }

    /// This process's executable.
    package static var executable: String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    }

    /// Whether `scopefs` must be copied into the sandbox: it lives outside
    /// the system directories the sandbox shows.
    package static var binaryNeedsCopy: Bool {
        guard let executable else { return false }
        return !SandboxProfile.isSystemPath(executable)
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
}
