import Foundation
import Glibc

/// The one sandbox profile (SPEC S5, S41; docs/SECURITY.md "Sandboxes").
///
/// Every bubblewrap command line ScopeFS starts is built here: an app's
/// (`scopefs run`), a provider extension's, and the portal bus proxy's of
/// `scopefs run --portal-bus`. Each gets the same hardening, whatever it
/// is and whoever the owner is:
/// - never a user namespace that maps it to host root: a non-root owner's
///   sandbox is the owner in a user namespace that can make no other; a
///   root owner's is built by bubblewrap as root in no user namespace, and
///   its command becomes an unprivileged account, or (an extension, which
///   needs root's own files) stays uid 0 with no capability at all, not
///   even in its bounding set, and the kernel's "root gets every
///   capability at exec" rule switched off (`noroot`);
/// - every capability dropped and no_new_privs; new pid, IPC and UTS
///   namespaces; it dies with its parent;
/// - the system's programs read-only, its own /proc with the kernel's
///   knobs (/proc/sys and friends) read-only, no /sys, a minimal /dev, a
///   private writable /dev/shm and /tmp (mode 1777, as Flatpak's);
/// - the seccomp filter (`SeccompFilter`) loaded before its command runs;
/// - the signals its launcher passes on (`launcherSignals`) ignored by
///   bubblewrap and given back their default action for the command.
///
/// A caller states only what differs: its `mounts` (the binds of what it
/// may see), the network, the hostname, a session of its own, a cgroup
/// namespace. A repository test fails when any other source writes a
/// bubblewrap option (Tests/repo/test_one_sandbox_profile.py).
public struct SandboxProfile: Sendable, Equatable {
    /// What the sandbox holds, for messages, logs and docs/SECURITY.md.
    public enum Kind: String, Sendable, CaseIterable {
        case app
        case providerExtension = "provider extension"
        case busProxy = "portal bus proxy"
    }

    /// Who the command inside runs as.
    public enum Identity: Sendable, Equatable {
        /// A non-root owner: the owner's own uid, in a user namespace that
        /// cannot make another.
        case ownerInUserNamespace
        /// A root owner's app (and its bus proxy): bubblewrap builds the
        /// sandbox as root in no user namespace, and the command becomes
        /// this account for good (`setpriv`) before it runs.
        case account(uid: UInt32, gid: UInt32)
        /// A root owner's extension, which needs the owner's credentials
        /// and folders (root's files): uid 0 in no user namespace, with no
        /// capability in any set and `noroot` locked, so no exec gives
        /// any back. It can touch only what its mounts show.
        case rootWithoutCapabilities

        /// The identity a launcher running as `uid` gives its sandbox:
        /// `account` (nil for a non-root launcher) is whom a root launcher
        /// hands the command to; without one a root launcher's command
        /// keeps uid 0 without capabilities.
        public static func forLauncher(uid: uid_t, account: (uid: UInt32, gid: UInt32)?) -> Identity {
            guard uid == 0 else { return .ownerInUserNamespace }
            guard let account else { return .rootWithoutCapabilities }
            return .account(uid: account.uid, gid: account.gid)
        }
    }

    /// One thing the sandbox shows, in the order given (bubblewrap mounts
    /// in order: a later mount hides what an earlier one put below it).
    public enum Mount: Sendable, Equatable {
        /// A host path, read-only or writable, at `at` (nil: the same place).
        case bind(String, at: String? = nil, writable: Bool)
        /// The same, skipped when the host path does not exist.
        case bindIfPresent(String)
        /// A symbolic link (merged-/usr's /bin -> usr/bin).
        case symlink(target: String, at: String)
        /// The bytes of a descriptor as a read-only file with `mode`.
        case data(descriptor: Int32, at: String, mode: String)
        /// A folder bubblewrap makes with `mode` (the folders above a bind).
        case folder(String, mode: String)
        /// An empty folder over a path (masks a hidden folder).
        case emptyFolder(String)
        /// An empty read-only file over a path (masks a hidden file).
        case emptyFile(String)

        /// Where it appears inside.
        public var destination: String {
            switch self {
            case .bind(let path, let destination, _): destination ?? path
            case .bindIfPresent(let path), .folder(let path, _), .emptyFolder(let path), .emptyFile(let path): path
            case .symlink(_, let path), .data(_, let path, _): path
            }
        }

        var options: [String] {
            switch self {
            case .bind(let path, let destination, let writable):
                [writable ? "--bind" : "--ro-bind", path, destination ?? path]
            case .bindIfPresent(let path): ["--ro-bind-try", path, path]
            case .symlink(let target, let path): ["--symlink", target, path]
            case .data(let descriptor, let path, let mode): ["--perms", mode, "--ro-bind-data", "\(descriptor)", path]
            case .folder(let path, let mode): ["--perms", mode, "--dir", path]
            case .emptyFolder(let path): ["--tmpfs", path]
            case .emptyFile(let path): ["--ro-bind", "/dev/null", path]
            }
        }
    }

    /// System directories, read-only. On merged-/usr systems /bin, /lib and
    /// friends are symlinks into /usr and are recreated as such.
    public static let systemDirectories = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]

    /// The files of /etc that programs need to start, resolve names, users
    /// and services, find libraries, certificates, OpenSSL's configuration,
    /// time zones and their terminal. Not /etc/shadow, not
    /// /etc/ssl/private, not the machine's configuration at large.
    public static let etcAllowList = [
        "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf",
        "/etc/gai.conf", "/etc/services", "/etc/protocols", "/etc/localtime", "/etc/timezone", "/etc/ld.so.cache",
        "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/ssl/certs", "/etc/ssl/openssl.cnf",
        "/etc/ca-certificates", "/etc/ca-certificates.conf", "/etc/mime.types", "/etc/locale.alias",
        "/etc/os-release", "/etc/terminfo", "/etc/inputrc",
    ]

    /// /proc entries that change the kernel rather than describe a process:
    /// read-only in every sandbox, as Flatpak's leaves them (bubblewrap
    /// covers some only when it finds them writable).
    public static let kernelKnobs = ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"]

    public var kind: Kind
    public var identity: Identity
    /// The host's network (an extension reaches its store, the proxy an
    /// abstract bus socket); otherwise a network namespace of its own.
    public var shareNetwork: Bool
    public var hostname: String
    /// A session of its own (no TIOCSTI on the owner's terminal, which the
    /// filter refuses anyway). An app keeps the terminal it was run from.
    public var newSession: Bool
    /// A cgroup namespace (when the kernel has one). An app keeps its
    /// run's cgroup path, which tells the CLI inside it is an app.
    public var cgroupNamespace: Bool
    /// What the sandbox shows beyond the profile's own mounts.
    public var mounts: [Mount]
    public var workingDirectory: String
    /// The whole environment inside: nothing of the launcher's passes.
    public var environment: [String: String]
    /// Signals the launcher starts bubblewrap with ignored and passes on
    /// to the command itself (`scopefs run`: a `kill` of the run, the
    /// scenario runner's `signal:` step). bubblewrap has no handler for
    /// them: one would end it, and `--die-with-parent` would end the
    /// sandbox with SIGKILL before the command's handler ran. An ignored
    /// signal stays ignored across exec, so the command gets their
    /// default action back (`env --default-signal`) before it runs.
    public var launcherSignals: [Int32]

    public init(
        kind: Kind, identity: Identity, shareNetwork: Bool, hostname: String, newSession: Bool = false,
        cgroupNamespace: Bool = false, mounts: [Mount] = [], workingDirectory: String = "/",
        environment: [String: String] = [:], launcherSignals: [Int32] = []
    ) {
        self.launcherSignals = launcherSignals
        self.kind = kind
        self.identity = identity
        self.shareNetwork = shareNetwork
        self.hostname = hostname
        self.newSession = newSession
        self.cgroupNamespace = cgroupNamespace
        self.mounts = mounts
        self.workingDirectory = workingDirectory
        self.environment = environment
    }

    /// bubblewrap's options, up to (not including) `--` and the command:
    /// the hardening, the caller's mounts, and the filter that bubblewrap
    /// reads from `seccompDescriptor` (see `SeccompFilter.pipe`).
    public func options(seccompDescriptor: Int32) -> [String] {
        var options = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
        if newSession { options.append("--new-session") }
        if cgroupNamespace { options.append("--unshare-cgroup-try") }
        switch identity {
        case .ownerInUserNamespace:
            options += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
        case .account:
            // Only what `setpriv` needs to become the account and empty
            // the bounding set, lost by doing so.
            options += [
                "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP",
            ]
        case .rootWithoutCapabilities:
            // Only what `setpriv` needs to empty the bounding set, lost by doing so.
            options += ["--cap-drop", "ALL", "--cap-add", "CAP_SETPCAP"]
        }
        options += ["--hostname", hostname]
        if !shareNetwork { options.append("--unshare-net") }
        for directory in Self.systemDirectories {
            if let target = Self.symbolicLink(directory) {
                options += ["--symlink", target, directory]
            } else {
                options += ["--ro-bind-try", directory, directory]
            }
        }
        // Before the caller's mounts: a later tmpfs at /tmp would hide a
        // bind below it (a bus proxy's folder, a mount in /tmp).
        options += ["--proc", "/proc"]
        for knob in Self.kernelKnobs { options += ["--ro-bind-try", knob, knob] }
        options += ["--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm", "--perms", "1777", "--tmpfs", "/tmp"]
        var passable = PassableFolders()
        for mount in mounts { options += passable.arguments(above: mount.destination) + mount.options }
        options += ["--chdir", workingDirectory, "--clearenv"]
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) { options += ["--setenv", name, value] }
        options += ["--seccomp", "\(seccompDescriptor)"]
        return options
    }

    /// The whole command line: bubblewrap, these options, `--`, the
    /// prefix and the command.
    public func commandLine(bubblewrap: String, seccompDescriptor: Int32, command: [String]) -> [String] {
        [bubblewrap] + options(seccompDescriptor: seccompDescriptor) + ["--"] + commandPrefix + command
    }

    /// The same with the options read from `optionsDescriptor` (`--args`:
    /// NUL-separated `options`), so that bubblewrap's command line, the
    /// sandbox's /proc/1/cmdline, shows no host path.
    public func commandLine(bubblewrap: String, optionsDescriptor: Int32, command: [String]) -> [String] {
        [bubblewrap, "--args", "\(optionsDescriptor)", "--"] + commandPrefix + command
    }

    /// What runs inside before the command: `setpriv` becoming the account
    /// for good, or emptying a root extension's capabilities for good;
    /// then `env` giving the launcher's signals their default action back.
    /// Each execs the next: the command keeps their pid.
    public var commandPrefix: [String] { identityPrefix + signalPrefix }

    private var identityPrefix: [String] {
        switch identity {
        case .ownerInUserNamespace:
            return []
        case .account(let uid, let gid):
            return [
                Self.setpriv, "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all", "--",
            ]
        case .rootWithoutCapabilities:
            return [
                Self.setpriv, "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all",
                "--securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked,+keep_caps_locked",
                "--",
            ]
        }
    }

    private var signalPrefix: [String] {
        guard !launcherSignals.isEmpty else { return [] }
        let numbers = launcherSignals.map(String.init).joined(separator: ",")
        return [Self.env, "--default-signal=" + numbers, "--"]
    }

    /// util-linux's, which every Debian system has.
    static let setpriv = "/usr/bin/setpriv"
    /// coreutils' (`--default-signal` since 8.31; Debian 11 has 8.32).
    static let env = "/usr/bin/env"

    /// bubblewrap, from `path` (a PATH value) or Debian's place; nil when
    /// it is not installed.
    public static func bubblewrap(path: String? = ProcessInfo.processInfo.environment["PATH"]) -> String? {
        let candidates = (path ?? "").split(separator: ":").map { "\($0)/bwrap" } + ["/usr/bin/bwrap"]
        return candidates.first(where: { access($0, X_OK) == 0 })
    }

    /// Whether the sandbox shows `path` through the system directories.
    public static func isSystemPath(_ path: String) -> Bool {
        systemDirectories.contains { path == $0 || path.hasPrefix($0 + "/") }
    }

    private static func symbolicLink(_ path: String) -> String? {
        var status = stat()
        guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFLNK else { return nil }
        return try? FileManager.default.destinationOfSymbolicLink(atPath: path)
    }
}
