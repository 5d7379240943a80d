import CommandErrors
import Foundation
import Glibc
import SandboxProfile

/// How an extension is contained (SPEC S41, docs/PROVIDERS.md "Limits"):
/// the one sandbox profile every sandbox of ScopeFS has (`SandboxProfile`:
/// bubblewrap, no capabilities, the kernel's knobs read-only, a private
/// /dev/shm and /tmp, the seccomp filter), with an extension's own mounts.
///
/// What it sees, read-only unless said: the system's programs and
/// libraries, the files of /etc that name resolution, TLS and users need;
/// its own files (the folder of each path on its command line, the prefix
/// of an interpreter outside the system such as a venv or pyenv, and the
/// Python SDK of the ScopeFS checkout a script lives in); its
/// configuration (`~/.aws`; rclone's folder read-write, below); the
/// staging folder read-write; the paths the owner adds. Not the state directory, the mount, the policy database
/// or the control socket (`hiddenPaths`, masked where a bind would show
/// them). It shares the host's network (a store is reached over it).
///
/// It runs as the daemon's own user, whose credentials and folders it
/// needs: a non-root owner's in a user namespace that can make no other;
/// a root owner's in no user namespace (one made by root maps it to host
/// root, issue 46), as uid 0 with no capability in any set and `noroot`
/// locked, so that it owns root's files it is shown and nothing more. It
/// has a session and a cgroup namespace of its own and dies with the host
/// thread that started it.
///
/// rclone's configuration folder is writable: OAuth remotes (OneDrive,
/// Box, ...) rotate their refresh token, and a token rclone cannot save is
/// lost, which signs the remote out at the next start. `~/.aws` stays
/// read-only: the SDK reads it; SSO token caches it cannot refresh in
/// place are renewed by `aws sso login` outside.
public struct ExtensionSandbox: Sendable, Equatable {
    /// false: the command runs directly, with the daemon's environment
    /// (tests of the protocol; a host without bubblewrap). No boundary.
    public var enabled: Bool
    /// More host paths the extension may read (a virtual environment
    /// elsewhere), shown at the same place.
    public var readOnlyPaths: [String]
    /// Host paths it may write (the folder example's root).
    public var writablePaths: [String]
    /// Paths never shown, even inside a folder the rules above bind: the
    /// state directory, the mount, the policy database, the control socket.
    public var hiddenPaths: [String]

    public init(
        enabled: Bool, readOnlyPaths: [String] = [], writablePaths: [String] = [], hiddenPaths: [String] = []
    ) {
        self.enabled = enabled
        self.readOnlyPaths = readOnlyPaths
        self.writablePaths = writablePaths
        self.hiddenPaths = hiddenPaths
    }

    /// Variables passed from the daemon's environment: language, time zone,
    /// proxies, certificate bundles, and the credentials' usual places
    /// (AWS_*, RCLONE_*), plus an interpreter's own (PYTHONPATH, PYENV_*).
    static let passedVariables: Set<String> = [
        "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "XDG_CONFIG_HOME", "http_proxy", "https_proxy",
        "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE", "PYTHONPATH", "PYTHONHOME",
    ]
    static let passedPrefixes = ["LC_", "AWS_", "RCLONE_", "PYENV_"]

    /// bubblewrap, from PATH or Debian's place; nil when not installed.
    public static func bubblewrap(path: String? = ProcessInfo.processInfo.environment["PATH"]) -> String? {
        SandboxProfile.bubblewrap(path: path)
    }

    /// The descriptor the extension's bubblewrap reads its seccomp filter
    /// from: `ExtensionProcess` puts the filter's pipe there.
    static let filterDescriptor: Int32 = 3

    /// The command line and environment to start `command` with.
    /// `received` (where the host moves checked staged files) is hidden
    /// like `hiddenPaths`, should a writable path the owner added hold it.
    func launch(_ command: [String], staging: String, received: String, environment: [String: String])
        throws(SpawnError) -> Launch
    {
        guard enabled else { return Launch(arguments: command, environment: environment) }
        guard let bwrap = Self.bubblewrap(path: environment["PATH"]) else {
            throw SpawnError(
                "the extension's sandbox needs bubblewrap (bwrap), which is not installed: "
                    + "`apt-get install bubblewrap`, or add the provider without a sandbox (no boundary)")
        }
        guard let program = command.first, let executable = ExecutableSearch.find(program, path: environment["PATH"])
        else { throw SpawnError("\(command.first ?? ""): no such executable") }
        var plan = SandboxPlan(hidden: (hiddenPaths + [received]).compactMap(SandboxPlan.resolve))
        plan.addProgram(executable, home: environment["HOME"])
        for argument in command.dropFirst() { plan.addArgument(argument, home: environment["HOME"]) }
        plan.addConfiguration(environment)
        for path in readOnlyPaths { plan.add(path, writable: false, explicit: true) }
        for path in writablePaths { plan.add(path, writable: true, explicit: true) }
        plan.add(staging, writable: true, explicit: true)
        let profile = SandboxProfile(
            kind: .providerExtension, identity: .forLauncher(uid: geteuid(), account: nil), shareNetwork: true,
            hostname: "scopefs-extension", newSession: true, cgroupNamespace: true, mounts: mounts(plan),
            environment: sandboxEnvironment(environment, executable: executable))
        let filter: InheritedPipe
        do { filter = try SeccompFilter.pipe() } catch { throw SpawnError(error.message) }
        let arguments = profile.commandLine(
            bubblewrap: bwrap, seccompDescriptor: Self.filterDescriptor, command: [executable] + command.dropFirst())
        return Launch(arguments: arguments, environment: [:], filter: filter)
    }

    /// What to spawn: bubblewrap's command line (it sets the environment
    /// inside itself) with the filter's pipe at `filterDescriptor`, or the
    /// command as it is.
    struct Launch {
        var arguments: [String]
        var environment: [String: String]
        var filter: InheritedPipe? = nil
    }

    /// What an extension sees beyond the profile's own: /etc as far as a
    /// network client needs it, then its plan's binds and masks.
    private func mounts(_ plan: SandboxPlan) -> [SandboxProfile.Mount] {
        SandboxProfile.etcAllowList.filter { access($0, F_OK) == 0 }.map { .bind($0, writable: false) }
            + plan.mounts()
    }

    private func sandboxEnvironment(_ environment: [String: String], executable: String) -> [String: String] {
        var inside = environment.filter { entry in
            Self.passedVariables.contains(entry.key) || Self.passedPrefixes.contains(where: entry.key.hasPrefix)
        }
        let folder = (executable as NSString).deletingLastPathComponent
        inside["PATH"] = [folder, "/usr/local/bin", "/usr/bin", "/bin"].joined(separator: ":")
        inside["TMPDIR"] = "/tmp"
        return inside
    }
}

/// The binds of one sandbox, in the order bubblewrap must make them:
/// read-only folders, writable ones, masks over hidden paths inside them,
/// then again the binds that lie inside a mask (staging in the
/// state directory).
struct SandboxPlan {
    struct Bind: Equatable {
        var path: String
        var writable: Bool
    }

    let hidden: [String]
    private(set) var binds: [Bind] = []

    init(hidden: [String]) {
        self.hidden = hidden
    }

    static func resolve(_ path: String) -> String? {
        StagedFiles.realPath(path)
    }

    static func within(_ path: String, _ folder: String) -> Bool {
        folder == "/" || path == folder || path.hasPrefix(folder + "/")
    }

    private static func isSystem(_ path: String) -> Bool {
        SandboxProfile.isSystemPath(path)
    }

    /// A bind of an existing path. One the rules derived (not `explicit`)
    /// is dropped when it is, or is inside, a hidden path; none may be `/`.
    mutating func add(_ path: String, writable: Bool, explicit: Bool) {
        guard let resolved = Self.resolve(path), resolved != "/" else { return }
        if !explicit, hidden.contains(where: { Self.within(resolved, $0) }) { return }
        if !writable, Self.isSystem(resolved) { return }
        binds.removeAll { $0.path == resolved && !$0.writable }
        if !binds.contains(where: { $0.path == resolved }) { binds.append(Bind(path: resolved, writable: writable)) }
    }

    /// The program's folder; for one in a `bin` (or pyenv's `shims`)
    /// folder, the prefix above it (a venv, a pyenv root, /opt/x), unless
    /// that is the home folder or `/`. Both for the path found on PATH and
    /// for the file it resolves to.
    mutating func addProgram(_ executable: String, home: String?) {
        for path in [executable, Self.resolve(executable)].compactMap({ $0 }) where !Self.isSystem(path) {
            let folder = (path as NSString).deletingLastPathComponent
            let prefix = (folder as NSString).deletingLastPathComponent
            let named = (folder as NSString).lastPathComponent
            if ["bin", "sbin", "shims"].contains(named), !Self.isHomeOrAbove(prefix, home: home) {
                add(prefix, writable: false, explicit: false)
            } else {
                addFolder(of: path, home: home)
            }
        }
    }

    /// An argument that is an existing absolute path: its folder (a file)
    /// or itself (a folder), read-only; for a script in a ScopeFS checkout,
    /// also the checkout's Python SDK (`clients/python`).
    mutating func addArgument(_ argument: String, home: String?) {
        guard argument.hasPrefix("/"), let resolved = Self.resolve(argument) else { return }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: resolved, isDirectory: &isFolder) else { return }
        if isFolder.boolValue {
            add(resolved, writable: false, explicit: false)
        } else {
            addFolder(of: resolved, home: home)
        }
        var ancestor = resolved
        while ancestor != "/" && !ancestor.isEmpty {
            ancestor = (ancestor as NSString).deletingLastPathComponent
            let sdk = ancestor + "/clients/python"
            if access(sdk + "/scopefs_extension.py", F_OK) == 0 {
                add(sdk, writable: false, explicit: false)
                break
            }
        }
    }

    /// A file's folder, or the file alone when its folder is the home
    /// folder or above it (a script in ~ must not show ~/.ssh).
    private mutating func addFolder(of file: String, home: String?) {
        let folder = (file as NSString).deletingLastPathComponent
        add(Self.isHomeOrAbove(folder, home: home) ? file : folder, writable: false, explicit: false)
    }

    static func isHomeOrAbove(_ folder: String, home: String?) -> Bool {
        guard let resolved = resolve(folder) else { return true }
        if resolved == "/" { return true }
        guard let home = home.flatMap(resolve) else { return false }
        return within(home, resolved)
    }

    /// Where credentials live: `~/.aws` (and AWS_CONFIG_FILE,
    /// AWS_SHARED_CREDENTIALS_FILE) and certificate bundles read-only;
    /// rclone's configuration folder writable (token refresh), or
    /// RCLONE_CONFIG's file.
    mutating func addConfiguration(_ environment: [String: String]) {
        let home = environment["HOME"] ?? ""
        if !home.isEmpty { add(home + "/.aws", writable: false, explicit: false) }
        for name in ["AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"] {
            if let file = environment[name] { add(file, writable: false, explicit: false) }
        }
        // Certificate bundles named by the environment (a company's CA).
        for name in ["SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "AWS_CA_BUNDLE"] {
            if let path = environment[name], path.hasPrefix("/") { add(path, writable: false, explicit: false) }
        }
        if let file = environment["RCLONE_CONFIG"] {
            add(file, writable: true, explicit: false)
        } else {
            let configHome = environment["XDG_CONFIG_HOME"] ?? (home.isEmpty ? "" : home + "/.config")
            if !configHome.isEmpty { add(configHome + "/rclone", writable: true, explicit: false) }
        }
    }

    func mounts() -> [SandboxProfile.Mount] {
        var mounts: [SandboxProfile.Mount] = []
        let ordered = binds.filter { !$0.writable } + binds.filter(\.writable)
        for bind in ordered { mounts.append(.bind(bind.path, writable: bind.writable)) }
        var masked: [String] = []
        for path in hidden where binds.contains(where: { Self.within(path, $0.path) && path != $0.path }) {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { continue }
            mounts.append(isFolder.boolValue ? .emptyFolder(path) : .emptyFile(path))
            masked.append(path)
        }
        for bind in ordered where masked.contains(where: { Self.within(bind.path, $0) }) {
            mounts.append(.bind(bind.path, writable: bind.writable))
        }
        return mounts
    }
}
